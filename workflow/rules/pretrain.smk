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
        train=lambda w: " ".join(f"--{k.replace('_', '-')} {v}" for k, v in config["pretrain_mlm"].items()),
        state=lambda w: f"{ART}/{w.dataset}/train-state/mlm",
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/pretrain_mlm.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} pretrain-mlm --candidates {input.candidates} --tokenizer {input.tokenizer}"
        " --out {output} --state-dir {params.state} --seed {params.seed} {params.train} {params.arch}"
        " --hub-model '{params.hub}' --log logs/{wildcards.dataset}/pretrain_mlm.steps.jsonl 2>&1 | tee {log}"
