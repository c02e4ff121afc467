# Tokenizer and encoder initialisations: "none" (random, Chang's No Pretraining) and "mlm".
# Pre-training is built once per dataset and reused by every fine-tuning run and table.


def arch_flags():
    e = config["encoder"]
    return (f"--hidden {e['hidden']} --layers {e['layers']} --heads {e['heads']}"
            f" --intermediate {e['intermediate']} --max-positions {e['max_positions']}")


rule tokenizer:
    input:
        f"{ART}/{{dataset}}/reqa/candidates.jsonl",
    output:
        directory(f"{ART}/{{dataset}}/tokenizer"),
    params:
        vocab=config["tokenizer"]["vocab_size"],
        min_freq=config["tokenizer"]["min_frequency"],
        lowercase=int(config["tokenizer"]["lowercase"]),
        hub=config["tokenizer"]["hub_model"],
    log:
        "logs/{dataset}/tokenizer.log",
    shell:
        "{TOWERS} tokenizer --candidates {input} --out {output} --vocab-size {params.vocab}"
        " --min-frequency {params.min_freq} --lowercase {params.lowercase} --hub-model '{params.hub}' 2>&1 | tee {log}"


rule init_random:
    input:
        f"{ART}/{{dataset}}/tokenizer",
    output:
        directory(f"{ART}/{{dataset}}/encoders/none"),
    params:
        arch=arch_flags(),
        seed=config["seed"],
        hub=config["encoder"]["hub_model"],
    log:
        "logs/{dataset}/init_random.log",
    shell:
        "{TOWERS} init-random --tokenizer {input} --out {output} --seed {params.seed} {params.arch}"
        " --hub-model '{params.hub}' 2>&1 | tee {log}"


rule pretrain_mlm:
    input:
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
        tokenizer=f"{ART}/{{dataset}}/tokenizer",
    output:
        directory(f"{ART}/{{dataset}}/encoders/mlm"),
    params:
        arch=arch_flags(),
        seed=config["seed"],
        hub=config["encoder"]["hub_model"],
        train=flags(config["pretrain_mlm"]),
        state=lambda w: f"{ART}/{w.dataset}/train-state/mlm",
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/pretrain_mlm.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} pretrain-mlm --candidates {input.candidates} --tokenizer {input.tokenizer}"
        " --out {output} --state-dir {params.state} --seed {params.seed} {params.train} {params.arch}"
        " --hub-model '{params.hub}' --log logs/{wildcards.dataset}/pretrain_mlm.steps.jsonl 2>&1 | tee {log}"


rule pretrain_mlm_nsp:
    # QuadrupletBERT: every BERT tower is pre-trained on the downstream dataset's own text with
    # Masked LM and Next Sentence Prediction (from scratch here; the paper profile continues a hub BERT).
    input:
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
        tokenizer=f"{ART}/{{dataset}}/tokenizer",
    output:
        directory(f"{ART}/{{dataset}}/encoders/mlm-nsp"),
    params:
        arch=arch_flags(),
        seed=config["seed"],
        train=flags({k: v for k, v in config["quadrupletbert"]["pretrain"].items() if k != "init_hub_model"}),
        init=config["quadrupletbert"]["pretrain"]["init_hub_model"],
        state=lambda w: f"{ART}/{w.dataset}/train-state/mlm-nsp",
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/pretrain_mlm_nsp.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} pretrain-mlm --nsp 1 --init-hub-model '{params.init}'"
        " --candidates {input.candidates} --tokenizer {input.tokenizer} --out {output} --state-dir {params.state}"
        " --seed {params.seed} {params.train} {params.arch}"
        " --log logs/{wildcards.dataset}/pretrain_mlm_nsp.steps.jsonl 2>&1 | tee {log}"


rule init_hashed_bow:
    # Three-T Emb's starting point: random embeddings of hashed word and character n-grams.
    output:
        directory(f"{ART}/{{dataset}}/encoders/hashed-bow"),
    params:
        seed=config["seed"],
        encoder=flags(config["quadrupletbert"]["three_t_emb"]["encoder"]),
    log:
        "logs/{dataset}/init_hashed_bow.log",
    shell:
        "{TOWERS} init-bow --out {output} --seed {params.seed} {params.encoder} 2>&1 | tee {log}"
