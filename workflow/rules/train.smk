# Training regimes, each writing a model folder dense/{model}/{split}/model:
#   transformer-.../bowmlp-...  Chang et al.: two towers, sampled softmax over in-batch documents,
#                             optionally after pre-training on ICT/BFS/WLP pairs (pretrained/{model})
#   threet-emb-m{m}-s{seed}   Three-T Emb: hashed bag-of-words towers (Huang et al. 2020), triplet loss
#   threet-bert-m{m}-s{seed}  Three-T BERT: Sentence-BERT style triplets, cosine distance; also
#                             QuadrupletBERT's first phase (eq. 3 with loss^h = 0)
#   quadbert-m{m}-s{seed}     QuadrupletBERT: phase 2, four towers with mined hard negatives

from towers.plan import ART, Plan

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TRAIN = plan.software.train


rule pretrain_two_tower:
    # Chang et al. 4.1: both towers pre-trained on ICT/BFS/WLP pairs of the corpus (a mixture samples
    # each pair's task uniformly), sampled softmax over in-batch documents. Built once, reused by every
    # fine-tuning run of every dataset and table.
    input:
        start=lambda w: plan.chang2020.init(w.dataset, plan.chang2020.parse_model(w.model)),
        pairs=plan.chang2020.pretraining_pairs,
    output:
        directory(f"{ART}/{{dataset}}/pretrained/{{model}}/model"),
    log:
        "logs/{dataset}/pretrain_{model}.log",
    wildcard_constraints:
        model=plan.chang2020.model_re,
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        seed=config["seed"],
        train=plan.chang2020.pretraining_flags(),
        titles=" ".join(plan.chang2020.settings["pretraining"]["title_tasks"]),
        towers=lambda w: plan.chang2020.towers(w.model),
        state=lambda w: f"{ART}/{w.dataset}/train-state/pretrain-{w.model}",
        steps_log=lambda w: f"logs/{w.dataset}/pretrain_{w.model}.steps.jsonl",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} pretrain-two-tower --start {input.start} --pairs {input.pairs}"
        " --title-tasks {params.titles} --out {output} --state-dir {params.state} --seed {params.seed}"
        " {params.train} {params.towers} --log {params.steps_log} 2>&1 | tee {log}"


rule finetune:
    input:
        unpack(plan.train.split_files),
        encoder=plan.chang2020.start,
    output:
        directory(f"{ART}/{{dataset}}/dense/{{model}}/{{split}}/model"),
    log:
        "logs/{dataset}/finetune_{model}_{split}.log",
    wildcard_constraints:
        model=plan.chang2020.model_re,
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        seed=config["seed"],
        train=plan.chang2020.finetuning(),
        towers=lambda w: plan.chang2020.towers(w.model),
        state=lambda w: f"{ART}/{w.dataset}/train-state/{w.model}-{w.split}",
        steps_log=lambda w: plan.train.train_log(w, w.model),
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} finetune --encoder {input.encoder} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --valid {input.valid} --out {output}"
        " --state-dir {params.state} --seed {params.seed} {params.train} {params.towers}"
        " --log {params.steps_log} 2>&1 | tee {log}"


rule train_margin_threet:
    input:
        unpack(plan.train.split_files),
        start=lambda w: plan.train.encoder(w.dataset, plan.quadrupletbert.phase(w.kind)["start"]),
    output:
        directory(f"{ART}/{{dataset}}/dense/threet-{{kind}}-m{{margin}}-s{{seed}}/{{split}}/model"),
    log:
        "logs/{dataset}/train_threet-{kind}-m{margin}-s{seed}_{split}.log",
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        towers=lambda w: plan.quadrupletbert.phase(w.kind)["towers"],
        train=lambda w: plan.quadrupletbert.phase(w.kind)["train"],
        state=lambda w: f"{ART}/{w.dataset}/train-state/threet-{w.kind}-m{w.margin}-s{w.seed}-{w.split}",
        steps_log=lambda w: plan.train.train_log(w, f"threet-{w.kind}-m{w.margin}-s{w.seed}"),
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-margin --start {input.start} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --valid {input.valid} --out {output}"
        " --margin {wildcards.margin} --seed {wildcards.seed} --state-dir {params.state}"
        " {params.train} {params.towers} --log {params.steps_log} 2>&1 | tee {log}"


rule train_margin_quadbert:
    # Phase 2: continue from the phase-1 (Three-T BERT) model with the same margin and seed, each
    # question's hard negative drawn from the candidates that model retrieves for it.
    input:
        unpack(plan.train.split_files),
        start=f"{ART}/{{dataset}}/dense/threet-bert-m{{margin}}-s{{seed}}/{{split}}/model",
        mined=f"{ART}/{{dataset}}/dense/threet-bert-m{{margin}}-s{{seed}}/{{split}}/mined.jsonl",
    output:
        directory(f"{ART}/{{dataset}}/dense/quadbert-m{{margin}}-s{{seed}}/{{split}}/model"),
    log:
        "logs/{dataset}/train_quadbert-m{margin}-s{seed}_{split}.log",
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        towers=plan.quadrupletbert.phase("quadbert")["towers"],
        train=plan.quadrupletbert.phase("quadbert")["train"],
        state=lambda w: f"{ART}/{w.dataset}/train-state/quadbert-m{w.margin}-s{w.seed}-{w.split}",
        steps_log=lambda w: plan.train.train_log(w, f"quadbert-m{w.margin}-s{w.seed}"),
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-margin --start {input.start} --mined {input.mined}"
        " --candidates {input.candidates} --qrels {input.qrels} --train {input.train} --valid {input.valid}"
        " --out {output} --margin {wildcards.margin} --seed {wildcards.seed} --state-dir {params.state}"
        " {params.train} {params.towers} --log {params.steps_log} 2>&1 | tee {log}"
