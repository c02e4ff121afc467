# Tokenizer and encoder initialisations: random (Chang's No Pretraining), MLM, MLM+NSP, bags of words.
# Pre-training is built once per dataset and reused by every fine-tuning run and table.

from towers.plan import ART, Plan, collection, flags, q

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS, TRAIN = plan.software.towers, plan.software.train


rule tokenizer:
    input:
        plan.train.tokenizer_text,
    output:
        directory(f"{ART}/{{dataset}}/tokenizer"),
    log:
        "logs/{dataset}/tokenizer.log",
    conda:
        plan.software.cpu_env
    params:
        vocab=config["tokenizer"]["vocab_size"],
        min_freq=config["tokenizer"]["min_frequency"],
        lowercase=int(config["tokenizer"]["lowercase"]),
        hub=q(config["tokenizer"]["hub_model"]),
    shell:
        "{TOWERS} tokenizer --candidates {input} --out {output} --vocab-size {params.vocab}"
        " --min-frequency {params.min_freq} --lowercase {params.lowercase} --hub-model {params.hub} 2>&1 | tee {log}"


rule init_random:
    # Chang's "No Pretraining" (and the start of two-tower pre-training): random weights, any depth.
    input:
        f"{ART}/{{dataset}}/tokenizer",
    output:
        directory(f"{ART}/{{dataset}}/encoders/random-l{{layers}}"),
    log:
        "logs/{dataset}/init_random_l{layers}.log",
    wildcard_constraints:
        layers="[0-9]+",
    conda:
        plan.software.cpu_env
    params:
        arch=lambda w: plan.train.arch_flags(int(w.layers)),
        seed=config["seed"],
        hub=q(config["encoder"]["hub_model"]),
    shell:
        "{TOWERS} init-random --tokenizer {input} --out {output} --seed {params.seed} {params.arch}"
        " --hub-model {params.hub} 2>&1 | tee {log}"


rule pretrain_mlm:
    input:
        candidates=collection("{dataset}", "candidates.jsonl"),
        tokenizer=f"{ART}/{{dataset}}/tokenizer",
    output:
        directory(f"{ART}/{{dataset}}/encoders/mlm"),
    log:
        "logs/{dataset}/pretrain_mlm.log",
    # on the build's critical path (MLM -> cross-encoder -> reranking at depth 1000): started first when cores are free
    priority: 50
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        arch=plan.train.arch_flags(),
        seed=config["seed"],
        hub=q(config["encoder"]["hub_model"]),
        train=flags(config["pretrain_mlm"]),
        state=lambda w: f"{ART}/{w.dataset}/train-state/mlm",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} pretrain-mlm --candidates {input.candidates} --tokenizer {input.tokenizer}"
        " --out {output} --state-dir {params.state} --seed {params.seed} {params.train} {params.arch}"
        " --hub-model {params.hub} --log logs/{wildcards.dataset}/pretrain_mlm.steps.jsonl 2>&1 | tee {log}"


rule pretrain_mlm_nsp:
    # QuadrupletBERT: every BERT tower is pre-trained on the downstream dataset's own text with
    # Masked LM and Next Sentence Prediction (from scratch here; the paper profile continues a hub BERT).
    input:
        candidates=collection("{dataset}", "candidates.jsonl"),
        tokenizer=f"{ART}/{{dataset}}/tokenizer",
    output:
        directory(f"{ART}/{{dataset}}/encoders/mlm-nsp"),
    log:
        "logs/{dataset}/pretrain_mlm_nsp.log",
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        arch=plan.train.arch_flags(),
        seed=config["seed"],
        train=plan.quadrupletbert.pretraining()["train"],
        init=plan.quadrupletbert.pretraining()["init"],
        state=lambda w: f"{ART}/{w.dataset}/train-state/mlm-nsp",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} pretrain-mlm --nsp 1 --init-hub-model {params.init}"
        " --candidates {input.candidates} --tokenizer {input.tokenizer} --out {output} --state-dir {params.state}"
        " --seed {params.seed} {params.train} {params.arch}"
        " --log logs/{wildcards.dataset}/pretrain_mlm_nsp.steps.jsonl 2>&1 | tee {log}"


rule init_bow:
    # The starting point of the bag-of-words towers: random embeddings of hashed features.
    output:
        directory(f"{ART}/{{dataset}}/encoders/{{bow}}"),
    log:
        "logs/{dataset}/init_{bow}.log",
    wildcard_constraints:
        bow="|".join(plan.train.bag_of_words),
    conda:
        plan.software.cpu_env
    params:
        seed=config["seed"],
        encoder=lambda w: plan.train.bag_of_words[w.bow],
    shell:
        "{TOWERS} init-bow --out {output} --seed {params.seed} {params.encoder} 2>&1 | tee {log}"
