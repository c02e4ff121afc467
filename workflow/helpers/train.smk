# What workflow/rules/train.smk's rules call: a split's training files, Chang et al.'s model names (parse_chang)
# and where their towers start, the three-tower baselines' settings.

def split_files(w):
    return {"candidates": collection(w.dataset, "candidates.jsonl"), "qrels": collection(w.dataset, "qrels.txt"),
            "train": f"{ART}/{w.dataset}/splits/{w.split}/train.tsv",
            "valid": f"{ART}/{w.dataset}/splits/{w.split}/valid.tsv"}


def train_log(w, name):
    return f"logs/{w.dataset}/train_{name}_{w.split}.steps.jsonl"


def parse_chang(name):
    arch, rest = name.split("-", 1)
    pretraining, *shape = rest.rsplit("-", 2 if arch == "transformer" else 1)
    layers = int(shape[0][1:]) if arch == "transformer" else None
    tasks = pretraining.split("+")
    if pretraining not in ("none", "mlm") and not set(tasks) <= set(PAIR_TASKS):
        raise ValueError(f"model {name}: unknown pre-training {pretraining!r} (none, mlm or '+'-joined {PAIR_TASKS})")
    if pretraining == "mlm" and (arch != "transformer" or layers != config["encoder"]["layers"]):
        raise ValueError(f"model {name}: MLM exists for the transformer of encoder.layers only")
    return {"arch": arch, "pretraining": pretraining, "tasks": tasks, "layers": layers, "dim": int(shape[-1][1:])}


def chang_init(dataset, m):
    """Where a model's towers start before any two-tower training."""
    if m["arch"] == "bowmlp":
        return f"{ART}/{dataset}/encoders/bow-unigram"
    return f"{ART}/{dataset}/encoders/" + ("mlm" if m["pretraining"] == "mlm" else f"random-l{m['layers']}")


def chang_start(w):
    """Fine-tuning starts from the corpus's pre-trained two towers, or from an encoder."""
    m = parse_chang(w.model)
    if m["pretraining"] in ("none", "mlm"):
        return chang_init(w.dataset, m)
    return f"{ART}/{CHANG['pretraining']['corpus']}/pretrained/{w.model}/model"


def chang_towers(model):
    m = parse_chang(model)
    towers = {**config["two_tower"], "embedding_dim": m["dim"]}
    if m["arch"] == "bowmlp":   # unigram embeddings, average pooling, two-layer tanh MLP
        towers.update(pooling="mean", head="mlp")
    return flags(towers)


def three_t_settings(kind):
    """The three-tower baselines: (starting encoder, tower flags, schedule flags)."""
    qb = config["quadrupletbert"]
    if kind == "bert":
        return f"{ART}/{{dataset}}/encoders/mlm-nsp", flags(qb["towers"]), flags(qb["phase1"])
    emb = qb["three_t_emb"]
    return f"{ART}/{{dataset}}/encoders/hashed-bow", flags(emb["towers"]), flags(emb["train"])
