# Metrics from ir-measures on a split's test questions, one JSON per (model, split, index);
# BM25 is model "bm25" with index "lucene"; a fused run is model "<fusion>-<a>+<b>" with index "fusion",
# a reranked run "<first stage>-d<depth>" with index "rerank" (workflow/rules/repbert.smk).

include: "../helpers/evaluate.smk"


rule evaluate:
    input:
        run=run_path,
        qrels=collection("{dataset}", "qrels.txt"),
        queries=lambda w: f"{ART}/{questions_of(w.dataset)}/splits/{w.split}/test.tsv",   # an open-domain dataset: its base's
        candidates=lambda w: collection(corpus_of(w.dataset), "candidates.jsonl"),   # ranked ids are checked against it
    output:
        f"{ART}/{{dataset}}/eval/{{model}}/{{split}}/{{index}}.json",
    params:
        metrics=lambda w: eval_metrics(w.dataset, w.split),
        recall=lambda w: recall_convention(w.dataset, w.model),
    log:
        "logs/{dataset}/eval_{model}_{split}_{index}.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} evaluate --run {input.run} --qrels {input.qrels} --queries {input.queries}"
        " --metrics {params.metrics:q} --recall {params.recall:q} --candidates {input.candidates}"
        " --out {output} 2>&1 | tee {log}"
