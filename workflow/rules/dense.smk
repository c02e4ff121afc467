# Any trained model folder dense/{model}/{split}/model: encode every candidate with its doc tower
# (cached), build each Faiss index named in params (faiss.indexes), search a split's test questions,
# and mine hard negatives for its training questions.

from towers.plan import DENSE, Plan, collection

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS, CPU_ENV = plan.software.towers, plan.software.cpu_env


rule encode_candidates:
    # the corpus of a dataset that encode.shards does not split, in one job
    input:
        model=plan.dense.model_dir,
        candidates=collection("{dataset}", "candidates.jsonl"),
    output:
        embeddings=f"{DENSE}/candidates.npy",
        ids=f"{DENSE}/candidates.ids",
    log:
        "logs/{dataset}/encode_{model}_{split}.log",
    wildcard_constraints:
        dataset=f"(?!(?:{plan.dense.sharded_re})/)[a-z0-9-]+",  # not a sharded one (next: "/")
    conda:
        plan.software.torch_env
    threads: config["torch_threads"]
    resources:
        **plan.software.gpu_job,
    params:
        batch=config["encode"]["batch_size"],
        precision=config["inference_precision"],
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} encode-candidates --model {input.model} --candidates {input.candidates}"
        " --embeddings {output.embeddings} --ids {output.ids} --batch-size {params.batch} --threads {threads}"
        " --precision {params.precision} 2>&1 | tee {log}"


rule encode_candidates_shard:
    # part {shard} of encode.shards[dataset] of a corpus, one job (one GPU) each; merge_embeddings joins them.
    # Temporary: the merged matrix holds the same rows, so a part is deleted once merged (MS MARCO: 27 GB a model)
    input:
        model=plan.dense.model_dir,
        candidates=collection("{dataset}", "candidates.jsonl"),
    output:
        embeddings=temp(f"{DENSE}/shards/{{shard}}.npy"),
        ids=temp(f"{DENSE}/shards/{{shard}}.ids"),
    log:
        "logs/{dataset}/encode_{model}_{split}_{shard}.log",
    wildcard_constraints:
        shard="[0-9]+",
    conda:
        plan.software.torch_env
    threads: config["torch_threads"]
    resources:
        **plan.software.gpu_job,
    params:
        batch=config["encode"]["batch_size"],
        shards=lambda w: plan.dense.shards[w.dataset],
        precision=config["inference_precision"],
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} encode-candidates --model {input.model} --candidates {input.candidates}"
        " --embeddings {output.embeddings} --ids {output.ids} --batch-size {params.batch} --threads {threads}"
        " --shard {wildcards.shard} --shards {params.shards} --precision {params.precision} 2>&1 | tee {log}"


rule merge_embeddings:
    input:
        parts=plan.dense.encoded_shards("npy"),
        ids=plan.dense.encoded_shards("ids"),
    output:
        embeddings=f"{DENSE}/candidates.npy",
        ids=f"{DENSE}/candidates.ids",
    log:
        "logs/{dataset}/merge_embeddings_{model}_{split}.log",
    wildcard_constraints:
        dataset=plan.dense.sharded_re,  # only datasets encode.shards splits
    conda:
        plan.software.cpu_env
    shell:
        "{TOWERS} merge-embeddings --parts {input.parts} --part-ids {input.ids} --embeddings {output.embeddings}"
        " --ids {output.ids} 2>&1 | tee {log}"


# The corpus matrix (candidates.npy) is kept, not temp(), though a flat index holds the same vectors: LTRe
# training reads it (ltre.smk), and a temporary one would be re-encoded whenever a later job asks for it (a new
# factory string, a changed LTRe setting), rebuilding every index and search downstream of it.
rule build_index:
    input:
        f"{DENSE}/candidates.npy",
    output:
        f"{DENSE}/index-{{index}}.faiss",
    log:
        "logs/{dataset}/faiss_{model}_{split}_{index}.log",
    conda:
        plan.software.cpu_env
    threads: config["faiss"].get("threads") or config["torch_threads"]
    resources:  # a CPU job holding the index, and the matrix a block at a time: the memory and time of the GPU jobs
        mem_mb=plan.software.gpu_job["mem_mb"],
        runtime=plan.software.gpu_job["runtime"],
    params:
        factory=lambda w: plan.dense.indexes[w.index],  # LTRe's indexes too
    shell:
        "{TOWERS} build-index --embeddings {input} --factory {params.factory:q} --out {output} --threads {threads}"
        " 2>&1 | tee {log}"


rule dense_search:
    input:
        unpack(lambda w: plan.dense.dense_files(w.dataset, w.model, w.split, w.index)),
        queries=plan.dense.split_questions("test"),
    output:
        f"{DENSE}/run-{{index}}.trec",
    log:
        "logs/{dataset}/dense_search_{model}_{split}_{index}.log",
    conda:
        plan.software.torch_env
    threads: config["torch_threads"]
    resources:
        **plan.software.gpu_job,
    params:
        depth=plan.dense.search_depth,
        nprobe=config["faiss"]["nprobe"],
        precision=config["inference_precision"],
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} dense-search --model {input.model} --index {input.index} --ids {input.ids}"
        " --queries {input.queries} --run {output} --depth {params.depth} --nprobe {params.nprobe}"
        " --threads {threads} --tag {wildcards.model}_{wildcards.index} --precision {params.precision} 2>&1 | tee {log}"


rule mine_hard_negatives:
    # QuadrupletBERT's candidate set C_i: the training (and validation) questions' top results
    # under a trained model, through its own index, gold sentences removed.
    input:
        unpack(lambda w: plan.dense.dense_files(w.dataset, w.model, w.split, config["mining"]["index"])),
        train=plan.dense.split_questions("train"),
        valid=plan.dense.split_questions("valid"),
        qrels=collection("{dataset}", "qrels.txt"),
    output:
        f"{DENSE}/mined.jsonl",
    log:
        "logs/{dataset}/mine_{model}_{split}.log",
    conda:
        plan.software.torch_env
    threads: config["torch_threads"]
    resources:
        **plan.software.gpu_job,
    params:
        depth=config["mining"]["depth"],
        nprobe=config["faiss"]["nprobe"],
        precision=config["inference_precision"],
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} mine-hard-negatives --model {input.model} --index {input.index}"
        " --ids {input.ids} --queries {input.train} {input.valid} --qrels {input.qrels} --out {output}"
        " --depth {params.depth} --nprobe {params.nprobe} --threads {threads} --precision {params.precision}"
        " 2>&1 | tee {log}"
