# Metrics from ir-measures on a split's test questions, one JSON per (model, split, index);
# BM25 is model "bm25" with index "lucene"; a fused run is model "<fusion>-<a>+<b>" with index "fusion",
# a reranked run "<first stage>-d<depth>" with index "rerank" (workflow/rules/repbert.smk).


def run_path(w):
    if w.model == "bm25":
        return f"{ART}/{w.dataset}/bm25/run.trec"
    if w.index == "fusion":
        fusion, pair = w.model.split("-", 1)
        return f"{ART}/{w.dataset}/fusion/{fusion}/{pair}/{w.split}.trec"
    if w.index == "rerank":
        return f"{ART}/{w.dataset}/rerank/{w.model}/{w.split}.trec"
    return f"{ART}/{w.dataset}/dense/{w.model}/{w.split}/run-{w.index}.trec"


rule evaluate:
    input:
        run=run_path,
        qrels=f"{ART}/{{dataset}}/reqa/qrels.txt",
        queries=lambda w: f"{ART}/{questions_of(w.dataset)}/splits/{w.split}/test.tsv",   # an open-domain dataset: its base's
        candidates=lambda w: f"{ART}/{corpus_of(w.dataset)}/reqa/candidates.jsonl",   # ranked ids are checked against it
    output:
        f"{ART}/{{dataset}}/eval/{{model}}/{{split}}/{{index}}.json",
    params:
        metrics=lambda w: metrics_for(w.dataset),
    log:
        "logs/{dataset}/eval_{model}_{split}_{index}.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} evaluate --run {input.run} --qrels {input.qrels} --queries {input.queries}"
        " --metrics {params.metrics:q} --candidates {input.candidates} --out {output} 2>&1 | tee {log}"
