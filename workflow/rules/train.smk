# Two-tower fine-tuning with in-batch sampled softmax on a split's training questions.


rule finetune_two_tower:
    input:
        encoder=f"{ART}/{{dataset}}/encoders/{{init}}",
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
        qrels=f"{ART}/{{dataset}}/reqa/qrels.txt",
        train=f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{{split}}/valid.tsv",
    output:
        directory(f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/model"),
    params:
        seed=config["seed"],
        train=" ".join(f"--{k.replace('_', '-')} {v}" for k, v in config["finetune"].items()),
        towers=" ".join(f"--{k.replace('_', '-')} {int(v) if isinstance(v, bool) else v}"
                        for k, v in config["two_tower"].items()),
        state=lambda w: f"{ART}/{w.dataset}/train-state/twotower-{w.init}-{w.split}",
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/finetune_{init}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} finetune --encoder {input.encoder} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --valid {input.valid} --out {output}"
        " --state-dir {params.state} --seed {params.seed} {params.train} {params.towers}"
        " --log logs/{wildcards.dataset}/finetune_{wildcards.init}_{wildcards.split}.steps.jsonl 2>&1 | tee {log}"
