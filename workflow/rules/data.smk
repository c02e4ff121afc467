# Datasets -> ReQA form: candidates.jsonl, queries.tsv, qrels.txt; then cold-start splits.
# Kinds: wikipedia-qa, squad, nq (question sets); wikipedia (parsed articles only, no questions);
# open-domain (a QA dataset's ReQA form with extra candidates from a wikipedia dataset's articles,
# Chang et al. 2020 sec. 4.4: evaluated with the models and splits of its base dataset);
# passage ranking (RepBERT): msmarco-passage (the official archive), msmarco-tsv (MS MARCO TSV form,
# a folder or archive of one's own), beir (BEIR JSONL form, a folder or zip), wikipedia-passages (a
# wikipedia(-qa) dataset's paragraphs, its questions and ICT pseudo-queries). A passage dataset's
# candidates are passages ({"id", "contents"}) and its one split, "dev" (test = the dataset's
# evaluation queries), comes from its own rule, `passages`, not from rule `split`. graded-passages (TREC DL
# 2019): extra test queries with graded qrels over a passage dataset's collection, searched with its
# base's models and indexes (rule passages_graded).

from towers.plan import ART, PASSAGE_SPLIT, Plan, collection, collection_files, content_digest, q

plan = Plan.of(workflow)  # every name below that is no Snakemake directive comes from here (towers.plan.datasets)
TOWERS, CPU_ENV = plan.software.towers, plan.software.cpu_env


rule parse_wiki:
    input:
        plan.data.dump_inputs,
    output:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        stats=f"{ART}/{{dataset}}/corpus/stats.json",
    log:
        "logs/{dataset}/parse_wiki.log",
    wildcard_constraints:
        dataset=plan.data.not_parted_wiki,
    conda:
        CPU_ENV
    params:
        dump=lambda w: plan.data.dump_of(w.dataset),
        sha256=lambda w: q(plan.data.dataset_cfg(w.dataset).get("dump_sha256", "")),
        max_articles=lambda w: plan.data.dataset_cfg(w.dataset).get("max_articles", 0),
    shell:
        "{TOWERS} parse-wiki --dump {params.dump:q} --sha256 {params.sha256} --max-articles {params.max_articles}"
        " --articles {output.articles} --redirects {output.redirects} --stats {output.stats} 2>&1 | tee {log}"


rule wiki_parts:
    # Byte ranges of whole bz2 streams of a multistream dump, of about equal size, from its index.
    input:
        dump=lambda w: plan.data.dump_of(w.dataset),
        index=plan.data.dump_index,
    output:
        f"{ART}/{{dataset}}/corpus/parts/plan.json",
    log:
        "logs/{dataset}/wiki_parts_plan.log",
    wildcard_constraints:
        dataset=plan.data.only_parted_wiki,
    conda:
        CPU_ENV
    params:
        parts=lambda w: plan.data.dataset_cfg(w.dataset).get("parts", 1),
    shell:
        "{TOWERS} wiki-parts --dump {input.dump} --index {input.index} --parts {params.parts} --out {output}"
        " 2>&1 | tee {log}"


rule parse_wiki_part:
    # One part of the dump, read with a seek and decompressed stream by stream; jobs run side by side.
    input:
        dump=lambda w: plan.data.dump_of(w.dataset),
        plan=f"{ART}/{{dataset}}/corpus/parts/plan.json",
    output:
        **{
            name.split(".")[0]: f"{ART}/{{dataset}}/corpus/parts/{{part}}/{name}"
            for name in ("articles.jsonl", "redirects.json", "stats.json", "links.npz")
        },
    log:
        "logs/{dataset}/parse_wiki_part_{part}.log",
    wildcard_constraints:
        dataset=plan.data.only_parted_wiki,
        part=r"\d\d\d+",
    conda:
        CPU_ENV
    params:
        out_dir=lambda w: f"{ART}/{w.dataset}/corpus/parts/{w.part}",
    shell:
        "{TOWERS} parse-wiki-part --dump {input.dump} --plan {input.plan} --part {wildcards.part}"
        " --out-dir {params.out_dir} 2>&1 | tee {log}"


rule merge_wiki_parts:
    # The parts' articles in dump order, their redirects, and statistics summed (links resolved through
    # digests of every title: 8 bytes an article, 16 a redirect): parse_wiki's three files.
    input:
        lambda w: [
            f"{d}/{name}"
            for d in plan.data.wiki_part_dirs(w)
            for name in ("articles.jsonl", "redirects.json", "stats.json", "links.npz")
        ],
    output:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        stats=f"{ART}/{{dataset}}/corpus/stats.json",
    log:
        "logs/{dataset}/merge_wiki_parts.log",
    wildcard_constraints:
        dataset=plan.data.only_parted_wiki,
    conda:
        CPU_ENV
    params:
        parts=lambda w: " ".join(plan.data.wiki_part_dirs(w)),
    shell:
        "{TOWERS} merge-wiki-parts --parts {params.parts} --articles {output.articles} --redirects {output.redirects}"
        " --stats {output.stats} 2>&1 | tee {log}"


rule download:
    # Official files, checked against their sha256, their md5 (MS MARCO: as ir_datasets lists them) or
    # the sha1 their publisher lists beside them (sha1_from: Wikimedia's <wiki>-<date>-sha1sums.txt);
    # unchecked only where params say `checksum: none`; retried on network failure.
    output:
        "data/raw/{dataset}/{name}",
    log:
        "logs/{dataset}/download_{name}.log",
    retries: 3
    conda:
        CPU_ENV
    params:
        url=lambda w: plan.data.file_spec(w.dataset, w.name)["url"],
        check=lambda w: plan.data.download_check(w.dataset, w.name),
    shell:
        "{TOWERS} download --url {params.url:q} {params.check} --out {output} 2>&1 | tee {log}"
# fmt: off   (snakefmt: a run block's text is its rule's code, a rerun trigger of every collection and all below
# it; formatting it would rebuild everything. Shell rules keep their code whatever the layout.)
rule reqa:
    input:
        unpack(plan.data.reqa_inputs),
    output:
        **collection_files("{dataset}", "stats"),
    wildcard_constraints:
        dataset=plan.data.only_reqa,   # open-domain datasets: rule reqa_open; passage datasets: rule passages
    params:
        out_dir=lambda w: collection(w.dataset),
        kind=lambda w: plan.data.dataset_cfg(w.dataset)["kind"],
        # "none": a local file given without a sha256 (checked when given, recorded as not verified when not)
        sha256=lambda w: [f.get("sha256") or "none" for f in plan.data.dataset_cfg(w.dataset).get("files", [])],
        questions_digest=lambda w: [content_digest(plan.data.dataset_cfg(w.dataset).get(key, ""))   # by content
                                    for key in ("questions", "judgements")],
        judged=plan.data.reqa_options,
    log:
        "logs/{dataset}/reqa.log",
    run:
        if params.kind == "wikipedia-qa":
            shell("{TOWERS} reqa-wiki --articles {input.articles} --questions {input.questions:q} {params.judged}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")
        elif params.kind == "nq":
            shell("{TOWERS} reqa-nq --jsonl {input.files:q} --sha256 {params.sha256:q}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")
        else:
            shell("{TOWERS} reqa-squad --json {input.files:q} --sha256 {params.sha256:q}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")

# fmt: on
rule reqa_open:
    # The base dataset's ReQA form (questions and qrels unchanged) with extra candidates: every sentence
    # of the extra dataset's articles outside the base's articles, sub-sampled to max_extra (seeded).
    input:
        unpack(plan.data.open_inputs),
    output:
        **collection_files("{dataset}", "stats"),
    log:
        "logs/{dataset}/reqa.log",
    wildcard_constraints:
        dataset=plan.data.only_open,
    conda:
        CPU_ENV
    params:
        out_dir=lambda w: collection(w.dataset),
        max_extra=lambda w: plan.data.dataset_cfg(w.dataset).get("max_extra", 0),
        prefix=lambda w: f"{plan.data.dataset_cfg(w.dataset)['extra']}:",
        seed=config["seed"],
    shell:
        "{TOWERS} reqa-open --candidates {input.candidates} --queries {input.queries} --qrels {input.qrels}"
        " --articles {input.articles} --max-extra {params.max_extra} --seed {params.seed} --id-prefix {params.prefix:q}"
        " --out-dir {params.out_dir} 2>&1 | tee {log}"
# fmt: off   (a run block: as rule reqa)
rule passages:
    # A passage-ranking dataset (RepBERT): passages as candidates, queries and TREC qrels of both sides,
    # and its one split, "dev" (test: the dataset's evaluation queries; train: its training queries, and for
    # wikipedia-passages ICT pseudo-queries; valid: a seeded sample of the training queries).
    input:
        unpack(plan.data.passage_inputs),
    output:
        **collection_files("{dataset}", "stats"),
        train=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/test.tsv",
    wildcard_constraints:
        dataset=plan.data.only_passages,
    params:
        command=plan.data.passage_command,
        listing=plan.data.passage_listing,
        out_dir=lambda w: collection(w.dataset),
        split_dir=lambda w: f"{ART}/{w.dataset}/splits/{PASSAGE_SPLIT}",
        kind=lambda w: plan.data.dataset_cfg(w.dataset)["kind"],
        questions_digest=lambda w: [content_digest(plan.data.dataset_cfg(w.dataset).get(key, ""))   # by content
                                    for key in ("questions", "test_questions", "judgements")],
    log:
        "logs/{dataset}/passages.log",
    run:
        if params.kind == "wikipedia-passages":
            shell("{TOWERS} {params.command} --articles {input.articles} --questions {input.questions:q}"
                  " --out-dir {params.out_dir} --split-dir {params.split_dir} 2>&1 | tee {log}")
        else:
            shell("{TOWERS} {params.command} --source {input.source:q}"
                  " --out-dir {params.out_dir} --split-dir {params.split_dir} 2>&1 | tee {log}")

# fmt: on
EVALUATION_QRELS = (
    "{TOWERS} evaluation-qrels --articles {input.articles} {params.flags} --judgements {input.judgements:q}"
    " --pools {input.pools:q} --qrels {input.qrels} --out {output.qrels} --sources {output.sources} 2>&1 | tee {log}"
)


rule evaluation_qrels:
    # the qrels a question set's tables are scored on (datasets.<name>.evaluation_qrels): the judge's grade
    # stands over the writer's label, over the first and the deeper pools; what trains keeps qrels.txt.
    # EVALUATION_QRELS is both rules' command: a passage set's flags add its paragraphs and unexposed.json
    input:
        unpack(plan.data.evaluation_inputs),
    output:
        qrels=collection("{dataset}", "qrels-eval.txt"),
        sources=collection("{dataset}", "qrels-eval.tsv"),
    log:
        "logs/{dataset}/evaluation_qrels.log",
    wildcard_constraints:
        dataset=plan.data.only_reqa,
    conda:
        CPU_ENV
    params:
        flags=plan.data.evaluation_flags,
    shell:
        EVALUATION_QRELS


rule evaluation_qrels_passages:
    # the same for a passage set, its paragraphs graded, and its test questions no training question shares a
    # fact with (the unexposed reading of the claims)
    input:
        unpack(plan.data.evaluation_inputs),
    output:
        qrels=collection("{dataset}", "qrels-eval.txt"),
        sources=collection("{dataset}", "qrels-eval.tsv"),
        unexposed=collection("{dataset}", "unexposed.json"),
    log:
        "logs/{dataset}/evaluation_qrels.log",
    wildcard_constraints:
        dataset=plan.data.only_passages,
    conda:
        CPU_ENV
    params:
        flags=plan.data.evaluation_flags,
    shell:
        EVALUATION_QRELS


rule passages_graded:
    # TREC DL 2019 style: judged test queries with graded qrels over the base dataset's collection
    input:
        queries=lambda w: plan.data.graded_file(w.dataset, "queries"),
        qrels=lambda w: plan.data.graded_file(w.dataset, "qrels"),
        candidates=lambda w: collection(plan.data.corpus_of(w.dataset), "candidates.jsonl"),
    output:
        queries=collection("{dataset}", "queries.tsv"),
        qrels=collection("{dataset}", "qrels.txt"),
        stats=collection("{dataset}", "stats.json"),
        train=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/test.tsv",
    log:
        "logs/{dataset}/passages_graded.log",
    wildcard_constraints:
        dataset=plan.data.only_graded,
    conda:
        CPU_ENV
    params:
        checks=lambda w: plan.data.graded_checks(w.dataset),
        out_dir=lambda w: collection(w.dataset),
        split_dir=lambda w: f"{ART}/{w.dataset}/splits/{PASSAGE_SPLIT}",
    shell:
        "{TOWERS} passages-graded --queries {input.queries:q} --qrels {input.qrels:q} --candidates {input.candidates}"
        " {params.checks} --out-dir {params.out_dir} --split-dir {params.split_dir} 2>&1 | tee {log}"


rule passages_triples:
    # MS MARCO's text triples (query, positive, negative) as ids, for the dev split's training queries
    input:
        unpack(plan.data.triples_inputs),
    output:
        collection("{dataset}", "triples.tsv"),
    log:
        "logs/{dataset}/passage_triples.log",
    wildcard_constraints:
        dataset=plan.data.only_passages,
    conda:
        CPU_ENV
    params:
        check=lambda w: plan.data.source_check(w.dataset, plan.data.dataset_cfg(w.dataset)["triples"]),
        max_triples=lambda w: plan.data.dataset_cfg(w.dataset).get("max_triples", 0),
    shell:
        "{TOWERS} passages-triples --triples {input.triples:q} {params.check} --candidates {input.candidates}"
        " --queries {input.train} --qrels {input.qrels} --max-triples {params.max_triples} --out {output}"
        " 2>&1 | tee {log}"


rule split:
    input:
        queries=collection("{dataset}", "queries.tsv"),
        qrels=collection("{dataset}", "qrels.txt"),
    output:
        train=f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{{split}}/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    log:
        "logs/{dataset}/split_{split}.log",
    wildcard_constraints:
        split=plan.data.split_names,  # never a passage dataset's "dev": rule passages
    conda:
        CPU_ENV
    params:
        fraction=lambda w: plan.data.splits[w.split],
        valid=config["valid_fraction"],
        seed=config["seed"],
        out_dir=lambda w: f"{ART}/{w.dataset}/splits/{w.split}",
    shell:
        "{TOWERS} split --queries {input.queries} --qrels {input.qrels} --train-fraction {params.fraction}"
        " --valid-fraction {params.valid} --seed {params.seed} --out-dir {params.out_dir} 2>&1 | tee {log}"
