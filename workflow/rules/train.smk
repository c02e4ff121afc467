# Training regimes, each writing a model folder dense/{model}/{split}/model:
#   twotower-{init}           Chang et al.: two towers, sampled softmax over in-batch documents
#   threet-emb-m{m}-s{seed}   Three-T Emb: hashed bag-of-words towers (Huang et al. 2020), triplet loss
#   threet-bert-m{m}-s{seed}  Three-T BERT: Sentence-BERT style triplets, cosine distance; also
#                             QuadrupletBERT's first phase (eq. 3 with loss^h = 0)
#   quadbert-m{m}-s{seed}     QuadrupletBERT: phase 2, four towers with mined hard negatives


def split_files(w):
    return {"candidates": f"{ART}/{w.dataset}/reqa/candidates.jsonl", "qrels": f"{ART}/{w.dataset}/reqa/qrels.txt",
            "train": f"{ART}/{w.dataset}/splits/{w.split}/train.tsv",
            "valid": f"{ART}/{w.dataset}/splits/{w.split}/valid.tsv"}


def train_log(w, name):
    return f"logs/{w.dataset}/train_{name}_{w.split}.steps.jsonl"


rule finetune_two_tower:
    input:
        unpack(split_files),
        encoder=f"{ART}/{{dataset}}/encoders/{{init}}",
    output:
        directory(f"{ART}/{{dataset}}/dense/twotower-{{init}}/{{split}}/model"),
    params:
        seed=config["seed"],
        train=flags(config["finetune"]),
        towers=flags(config["two_tower"]),
        state=lambda w: f"{ART}/{w.dataset}/train-state/twotower-{w.init}-{w.split}",
        steps_log=lambda w: train_log(w, f"twotower-{w.init}"),
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/finetune_{init}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} finetune --encoder {input.encoder} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --valid {input.valid} --out {output}"
        " --state-dir {params.state} --seed {params.seed} {params.train} {params.towers}"
        " --log {params.steps_log} 2>&1 | tee {log}"


def three_t_settings(kind):
    """The three-tower baselines: (starting encoder, tower flags, schedule flags)."""
    qb = config["quadrupletbert"]
    if kind == "bert":
        return f"{ART}/{{dataset}}/encoders/mlm-nsp", flags(qb["towers"]), flags(qb["phase1"])
    emb = qb["three_t_emb"]
    return f"{ART}/{{dataset}}/encoders/hashed-bow", flags(emb["towers"]), flags(emb["train"])


rule train_three_tower:
    input:
        unpack(split_files),
        start=lambda w: three_t_settings(w.kind)[0].format(dataset=w.dataset),
    output:
        directory(f"{ART}/{{dataset}}/dense/threet-{{kind}}-m{{margin}}-s{{seed}}/{{split}}/model"),
    params:
        towers=lambda w: three_t_settings(w.kind)[1],
        train=lambda w: three_t_settings(w.kind)[2],
        state=lambda w: f"{ART}/{w.dataset}/train-state/threet-{w.kind}-m{w.margin}-s{w.seed}-{w.split}",
        steps_log=lambda w: train_log(w, f"threet-{w.kind}-m{w.margin}-s{w.seed}"),
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/train_threet-{kind}-m{margin}-s{seed}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} train-margin --start {input.start} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --valid {input.valid} --out {output}"
        " --margin {wildcards.margin} --seed {wildcards.seed} --state-dir {params.state}"
        " {params.train} {params.towers} --log {params.steps_log} 2>&1 | tee {log}"


rule train_quadruplet:
    # Phase 2: continue from the phase-1 (Three-T BERT) model with the same margin and seed, each
    # question's hard negative drawn from the candidates that model retrieves for it.
    input:
        unpack(split_files),
        start=f"{ART}/{{dataset}}/dense/threet-bert-m{{margin}}-s{{seed}}/{{split}}/model",
        mined=f"{ART}/{{dataset}}/dense/threet-bert-m{{margin}}-s{{seed}}/{{split}}/mined.jsonl",
    output:
        directory(f"{ART}/{{dataset}}/dense/quadbert-m{{margin}}-s{{seed}}/{{split}}/model"),
    params:
        towers=flags(config["quadrupletbert"]["towers"]),
        train=flags(config["quadrupletbert"]["phase2"]),
        state=lambda w: f"{ART}/{w.dataset}/train-state/quadbert-m{w.margin}-s{w.seed}-{w.split}",
        steps_log=lambda w: train_log(w, f"quadbert-m{w.margin}-s{w.seed}"),
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/train_quadbert-m{margin}-s{seed}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} train-margin --start {input.start} --mined {input.mined}"
        " --candidates {input.candidates} --qrels {input.qrels} --train {input.train} --valid {input.valid}"
        " --out {output} --margin {wildcards.margin} --seed {wildcards.seed} --state-dir {params.state}"
        " {params.train} {params.towers} --log {params.steps_log} 2>&1 | tee {log}"
