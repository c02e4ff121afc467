# What workflow/rules/pretrain.smk's rules call: architecture flags, a tokenizer's text, bag-of-words encoders.

def arch_flags(layers=None):
    e = config["encoder"]
    return (f"--hidden {e['hidden']} --layers {layers or e['layers']} --heads {e['heads']}"
            f" --intermediate {e['intermediate']} --max-positions {e['max_positions']}")


def tokenizer_text(w):
    """A tokenizer learns from the dataset's ReQA candidates, or a pre-training corpus's articles."""
    if dataset_cfg(w.dataset)["kind"] == "wikipedia":
        return f"{ART}/{w.dataset}/corpus/articles.jsonl"
    return collection(w.dataset, "candidates.jsonl")


BAG_OF_WORDS = {
    # Three-T Emb: hashed word uni/bigrams and character trigrams (Huang et al. 2020)
    "hashed-bow": flags(config["quadrupletbert"]["three_t_emb"]["encoder"]),
    # Chang's BoW-MLP: word unigrams only
    "bow-unigram": flags({**{k: config["chang2020"]["bow_mlp"][k] for k in ("buckets", "dim", "max_features")},
                          "char_ngram": 0, "word_bigrams": False}),
}
