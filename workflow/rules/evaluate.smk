# Metrics from ir-measures on a split's test questions, one JSON per (model, split, index);
# BM25 is model "bm25" with index "lucene"; a fused run is model "<fusion>-<a>+<b>" with index "fusion",
# a reranked run "<first stage>-d<depth>" with index "rerank" (workflow/rules/repbert.smk).

from towers.plan import ART, Plan, collection

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule evaluate:
    input:
        run=plan.evaluation.run_path,
        qrels=lambda w: plan.data.evaluation_qrels(w.dataset),  # judged evaluation qrels where the set has them
        queries=plan.evaluation.test_questions,  # an open-domain dataset: its base's
        candidates=lambda w: collection(plan.data.corpus_of(w.dataset), "candidates.jsonl"),  # ranked ids are checked against it
    output:
        f"{ART}/{{dataset}}/eval/{{model}}/{{split}}/{{index}}.json",
    log:
        "logs/{dataset}/eval_{model}_{split}_{index}.log",
    conda:
        plan.software.cpu_env
    params:
        metrics=lambda w: plan.evaluation.eval_metrics(w.dataset, w.split),
        recall=lambda w: plan.evaluation.recall_convention(w.dataset, w.model),
    shell:
        "{TOWERS} evaluate --run {input.run} --qrels {input.qrels} --queries {input.queries}"
        " --metrics {params.metrics:q} --recall {params.recall:q} --candidates {input.candidates}"
        " --out {output} 2>&1 | tee {log}"
