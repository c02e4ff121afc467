"""Training (rules in workflow/rules/pretrain.smk and train.smk): architecture flags, a tokenizer's text, the
encoders training starts from, a split's training files, Chang et al.'s model names and where their towers start,
the three-tower baselines' settings.

Chang et al.'s two-tower models are named <arch>-<pre-training>[-l<layers>]-d<dim>, e.g.
transformer-ict+bfs+wlp-l2-d128 or bowmlp-none-d128; pre-training is none, mlm, a pair task or a '+'-joined
uniform mixture of them (ict, bfs, wlp)."""
from __future__ import annotations

from .paths import ART, collection
from .shell import flags

CHANG_MODEL = r"(transformer-[a-z+]+-l[0-9]+|bowmlp-[a-z+]+)-d[0-9]+"
PAIR_TASKS = ("ict", "bfs", "wlp")
SAME_TEXT = ("dump", "dump_sha256", "max_articles")   # wikipedia-qa datasets alike in these share encoders


class Training:
    chang_model_re = CHANG_MODEL

    def __init__(self, plan):
        self.plan = plan
        self.config = config = plan.config
        self.chang = config["chang2020"]
        self.bag_of_words = {
            # Three-T Emb: hashed word uni/bigrams and character trigrams (Huang et al. 2020)
            "hashed-bow": flags(config["quadrupletbert"]["three_t_emb"]["encoder"]),
            # Chang's BoW-MLP: word unigrams only
            "bow-unigram": flags({**{k: config["chang2020"]["bow_mlp"][k] for k in ("buckets", "dim", "max_features")},
                                  "char_ngram": 0, "word_bigrams": False}),
        }

    # --- encoders -----------------------------------------------------------------------------------

    def arch_flags(self, layers=None):
        e = self.config["encoder"]
        return (f"--hidden {e['hidden']} --layers {layers or e['layers']} --heads {e['heads']}"
                f" --intermediate {e['intermediate']} --max-positions {e['max_positions']}")

    def tokenizer_text(self, w):
        """A tokenizer learns from the dataset's ReQA candidates, or a pre-training corpus's articles."""
        if self.plan.data.dataset_cfg(w.dataset)["kind"] == "wikipedia":
            return f"{ART}/{w.dataset}/corpus/articles.jsonl"
        return collection(w.dataset, "candidates.jsonl")

    def text_home(self, dataset):
        """The dataset whose tokenizer and pre-trained encoders `dataset` uses, so that one text is pre-trained on
        once: a wikipedia-passages dataset's articles dataset; for a wikipedia-qa dataset, the first one in params
        over the same articles (dump, dump_sha256, max_articles), e.g. a second question set's; else itself."""
        datasets = self.config["datasets"]
        spec = datasets[dataset]
        if spec["kind"] == "wikipedia-passages":
            return spec["articles"]
        if spec["kind"] == "wikipedia-qa":
            return next(name for name, other in datasets.items() if other["kind"] == "wikipedia-qa"
                        and all(other.get(key) == spec.get(key) for key in SAME_TEXT))
        return dataset

    def encoder(self, dataset, name):
        """An encoder (mlm, mlm-nsp, random-l<layers>, a bag of words) of the dataset's text."""
        return f"{ART}/{self.text_home(dataset)}/encoders/{name}"

    def tokenizer(self, dataset):
        return f"{ART}/{self.text_home(dataset)}/tokenizer"

    def mlm_encoder(self, w):
        return self.encoder(w.dataset, "mlm")

    # --- a split's training ---------------------------------------------------------------------------

    @staticmethod
    def split_files(w):
        return {"candidates": collection(w.dataset, "candidates.jsonl"), "qrels": collection(w.dataset, "qrels.txt"),
                "train": f"{ART}/{w.dataset}/splits/{w.split}/train.tsv",
                "valid": f"{ART}/{w.dataset}/splits/{w.split}/valid.tsv"}

    @staticmethod
    def train_log(w, name):
        return f"logs/{w.dataset}/train_{name}_{w.split}.steps.jsonl"

    # --- Chang et al.'s models ------------------------------------------------------------------------

    def chang_model(self, arch, pretraining, dim, layers=None):
        layers = f"-l{layers or self.config['encoder']['layers']}" if arch == "transformer" else ""
        return f"{arch}-{pretraining}{layers}-d{dim}"

    def parse_chang(self, name):
        arch, rest = name.split("-", 1)
        pretraining, *shape = rest.rsplit("-", 2 if arch == "transformer" else 1)
        layers = int(shape[0][1:]) if arch == "transformer" else None
        tasks = pretraining.split("+")
        if pretraining not in ("none", "mlm") and not set(tasks) <= set(PAIR_TASKS):
            raise ValueError(f"model {name}: unknown pre-training {pretraining!r} (none, mlm or '+'-joined {PAIR_TASKS})")
        if pretraining == "mlm" and (arch != "transformer" or layers != self.config["encoder"]["layers"]):
            raise ValueError(f"model {name}: MLM exists for the transformer of encoder.layers only")
        return {"arch": arch, "pretraining": pretraining, "tasks": tasks, "layers": layers, "dim": int(shape[-1][1:])}

    def chang_init(self, dataset, m):
        """Where a model's towers start before any two-tower training."""
        if m["arch"] == "bowmlp":
            return self.encoder(dataset, "bow-unigram")
        return self.encoder(dataset, "mlm" if m["pretraining"] == "mlm" else f"random-l{m['layers']}")

    def chang_start(self, w):
        """Fine-tuning starts from the corpus's pre-trained two towers, or from an encoder."""
        m = self.parse_chang(w.model)
        if m["pretraining"] in ("none", "mlm"):
            return self.chang_init(w.dataset, m)
        return f"{ART}/{self.chang['pretraining']['corpus']}/pretrained/{w.model}/model"

    def pretraining_pairs(self, w):
        """The pair files a two-tower pre-training reads: one a task of its mixture."""
        return [f"{ART}/{w.dataset}/pairs/{task}.jsonl" for task in self.parse_chang(w.model)["tasks"]]

    def chang_towers(self, model):
        m = self.parse_chang(model)
        towers = {**self.config["two_tower"], "embedding_dim": m["dim"]}
        if m["arch"] == "bowmlp":   # unigram embeddings, average pooling, two-layer tanh MLP
            towers.update(pooling="mean", head="mlp")
        return flags(towers)

    def pretraining_flags(self):
        """Two-tower pre-training's schedule (chang2020.pretraining, less what names its data)."""
        return flags({k: v for k, v in self.chang["pretraining"].items()
                      if k not in ("corpus", "per_article", "title_tasks")})

    # --- the three-tower baselines (QuadrupletBERT) ---------------------------------------------------

    def three_t_settings(self, kind):
        """The three-tower baselines: (starting encoder's name, tower flags, schedule flags)."""
        qb = self.config["quadrupletbert"]
        if kind == "bert":
            return "mlm-nsp", flags(qb["towers"]), flags(qb["phase1"])
        emb = qb["three_t_emb"]
        return "hashed-bow", flags(emb["towers"]), flags(emb["train"])
