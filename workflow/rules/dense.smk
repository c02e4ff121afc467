# Encode every candidate with the doc tower (cached), build a Faiss index, search the test questions.


rule encode_candidates:
    input:
        model=f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/model",
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
    output:
        embeddings=f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/candidates.npy",
        ids=f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/candidates.ids",
    params:
        batch=config["encode"]["batch_size"],
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/encode_{init}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} encode-candidates --model {input.model} --candidates {input.candidates}"
        " --embeddings {output.embeddings} --ids {output.ids} --batch-size {params.batch} --threads {threads}"
        " 2>&1 | tee {log}"


rule faiss_index:
    input:
        f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/candidates.npy",
    output:
        f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/index.faiss",
    params:
        factory=config["faiss"]["index_factory"],
    log:
        "logs/{dataset}/faiss_{init}_{split}.log",
    shell:
        "{TOWERS} build-index --embeddings {input} --factory '{params.factory}' --out {output}"
        " 2>&1 | tee {log}"


rule dense_search:
    input:
        model=f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/model",
        index=f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/index.faiss",
        ids=f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/candidates.ids",
        queries=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    output:
        f"{ART}/{{dataset}}/twotower/{{init}}/{{split}}/run.trec",
    params:
        depth=config["faiss"]["depth"],
        nprobe=config["faiss"]["nprobe"],
    threads: config["torch_threads"]
    log:
        "logs/{dataset}/dense_search_{init}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} dense-search --model {input.model} --index {input.index} --ids {input.ids}"
        " --queries {input.queries} --run {output} --depth {params.depth} --nprobe {params.nprobe}"
        " --threads {threads} 2>&1 | tee {log}"
