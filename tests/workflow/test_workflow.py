"""The DAG through snakemake: a tiny end-to-end run, caching, bad params, and the paper profile's plan."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from towers.verdicts import claims as checker
from benchmarks.workflow_harness import copy_workflow as copy_workflow_files, job_counts, watched

from conftest import FIXTURES

from towers.reports import papers as paper_list
from towers.reports.common import layout_problems, read_table
from benchmarks.workflow_harness import planned_jobs

pytestmark = pytest.mark.snakemake   # every test here starts Snakemake (make test-fast leaves them out)

ROOT = Path(__file__).resolve().parents[2]
CLAIMS_SCHEMA = ROOT / "workflow/schemas/claims.schema.yaml"

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
TARGET = "results/chang2020/table3.csv"
PAIRS_TABLE = "results/chang2020/table1.csv"
PAPERS = paper_list.load(root=ROOT)   # data/papers/papers.yaml: every paper's tables and figures
PAPER_TARGETS = [t for paper in PAPERS.values() for t in paper_list.targets(paper)]
PAPER_TABLES, PAPER_FIGURES = paper_list.tables(PAPERS), paper_list.figures(PAPERS)
CHANG_TABLES = paper_list.targets(PAPERS["chang2020"])
QUADRUPLET_TABLES = paper_list.targets(PAPERS["quadrupletbert"])
REPBERT_TARGETS = paper_list.targets(PAPERS["repbert"])
LTRE_TARGETS = paper_list.targets(PAPERS["ltre"])
ZEROSHOT_TARGETS = ["results/zeroshot/enwiki-mini.csv", "results/zeroshot/beir-tiny.csv"]


def copy_workflow(dest: Path) -> Path:
    shutil.copytree(FIXTURES, copy_workflow_files(dest) / "fixtures")
    return dest


def snakemake(workdir, *args):
    return subprocess.run([*SNAKEMAKE, *map(str, args)], cwd=workdir, capture_output=True, text=True)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    work = copy_workflow(tmp_path_factory.mktemp("e2e"))
    done = watched([*SNAKEMAKE, *PAPER_TARGETS, *ZEROSHOT_TARGETS, "results/claims.csv", "results/report.html", "check",
                    "--cores", 2, "--configfile", "fixtures/tiny.yaml"], work)
    assert done["returncode"] == 0, done["stderr"][-3000:]   # `check` passed: every cell as data/expected/tiny.csv has it
    (work / "snakemake-use.json").write_text(json.dumps({k: done[k] for k in ("wall", "cpu", "threads")}))
    return work


@pytest.mark.slow
def test_snakemakes_own_threads_stay_few_over_the_tiny_run(tiny_run):
    """Some 200 jobs on 2 cores: without towers.launch.scheduler's fix, applied by the workflow, Snakemake's scheduler
    adds a timer thread with nearly every finished job (test_scheduler.py)."""
    use = json.loads((tiny_run / "snakemake-use.json").read_text())
    assert use["threads"] <= 40, use


@pytest.mark.slow
def test_the_tiny_runs_model_jobs_were_forked_from_its_own_warm_start_server(tiny_run):
    """The server takes only its own user (issue 40) and still serves that user's build."""
    records = [json.loads(p.read_text()) for p in tiny_run.glob("artifacts/**/*.meta.json")]
    model_jobs = [r for r in records if r.get("torch_loaded")]
    forked = sum(r["warm_start"] for r in model_jobs)
    assert model_jobs and forked >= len(model_jobs) / 2, (forked, len(model_jobs))
    assert "refused" not in (tiny_run / "logs/warm-start.log").read_text()


@pytest.mark.slow
def test_tiny_dag_builds_the_table(tiny_run):
    table = read_table(tiny_run / TARGET)   # with the columns every row shares (split, profile) put back
    assert list(table[["encoder", "pretraining"]].itertuples(index=False, name=None)) == [
        ("BM-25", "No Pretraining"), ("BoW-MLP", "No Pretraining"), ("BoW-MLP", "ICT+BFS+WLP"),
        ("Transformer", "No Pretraining"), ("Transformer", "MLM"), ("Transformer", "ICT+BFS+WLP"),
        ("all-MiniLM-L6-v2", "retrieval-trained checkpoint (not a BERT init)")]   # chang2020.table3.checkpoints
    assert set(table["split"]) == {"50-50"} and set(table["profile"]) == {"tiny"}
    for metric in ["Success@1", "Success@5", "Success@10", "Success@50", "Success@100"]:   # ReQA's R@k
        # the paper has no 50%/50% split: a paper column no row has is not printed
        assert table[metric].between(0, 100).all() and f"{metric} paper" not in table
    assert (table["queries"] == 6).all()
    # BM25 answers these lexical questions well even on a toy corpus
    assert table.loc[0, "Success@10"] >= 50
    assert (tiny_run / "results/chang2020/table3.json").exists()
    # Table 4 is the same models on NQ's paper values (one dataset stands in for both here)
    table4 = read_table(tiny_run / "results/chang2020/table4.csv")
    trained = table[table["encoder"] != "all-MiniLM-L6-v2"]   # the checkpoint row is Table 3's only
    assert table4["Success@10"].tolist() == trained["Success@10"].tolist()


@pytest.mark.slow
def test_every_tiny_table_is_printed_as_the_papers_are(tiny_run):
    for table in PAPER_TABLES + ZEROSHOT_TARGETS:
        assert layout_problems(tiny_run / table) == [], table


@pytest.mark.slow
def test_tiny_dag_builds_the_ablation_and_open_domain_tables(tiny_run):
    table5 = read_table(tiny_run / "results/chang2020/table5.csv")
    assert table5["index"].tolist() == [1, 4, 5, 9] and table5["Success@10 50-50"].between(0, 100).all()
    assert table5["layers paper"].tolist() == [4, 12, 12, 12]
    # index 9 is Table 3's Transformer ICT+BFS+WLP: the same model, the same number
    table3 = read_table(tiny_run / TARGET)
    assert table5.loc[3, "Success@10 50-50"] == table3.loc[5, "Success@10"]
    table6 = read_table(tiny_run / "results/chang2020/table6.csv")
    assert table6["pretraining"].tolist() == ["No Pretraining", "ICT", "ICT+BFS+WLP"]
    assert "Success@1 paper" not in table6      # the paper has no 50%/50% split
    pretrained = sorted(p.parent.name for p in (tiny_run / "artifacts/enwiki-mini/pretrained").glob("*/model"))
    assert pretrained == ["bowmlp-ict+bfs+wlp-d8", "transformer-ict+bfs+wlp-l1-d16", "transformer-ict-l1-d16",
                          "transformer-ict-l1-d8"]


@pytest.mark.slow
def test_tiny_dag_builds_the_quadrupletbert_tables(tiny_run):
    table1 = read_table(tiny_run / "results/table1.csv")
    assert list(table1[["model", "index"]].itertuples(index=False, name=None)) == [
        ("Three-T Emb", "flat"), ("Three-T BERT", "flat"), ("QuadrupletBERT", "flat"), ("QuadrupletBERT", "ivf")]
    assert (table1["seeds"] == 1).all() and (table1["queries"] == 6).all()
    assert "R@1 paper" not in table1   # the paper has no 50%/50% split
    assert table1["R@10"].between(0, 100).all()
    assert not [c for c in table1 if c.endswith(" p")]   # significance is the claims' (Holm-corrected)
    twin = json.loads((tiny_run / "results/table1.json").read_text())
    assert "R@1 lost to quantization" in twin["rows"]["enwiki-mini/squad/50-50/QuadrupletBERT/ivf"]
    table2 = read_table(tiny_run / "results/table2.csv")
    assert list(table2["margin"]) == [0.1, 1.0] and set(table2["model"]) == {"QuadrupletBERT"}
    # phase 2 trained from phase 1 with hard negatives mined by that model
    mined = (tiny_run / "artifacts/enwiki-mini/dense/threet-bert-m0.1-s1/50-50/mined.jsonl").read_text().splitlines()
    assert mined and all(json.loads(line)["candidates"] for line in mined)
    meta = json.loads((tiny_run / "artifacts/enwiki-mini/dense/quadbert-m0.1-s1/50-50/model.meta.json").read_text())
    assert meta["counts"]["hard_negatives"] is True


@pytest.mark.slow
def test_tiny_dag_builds_the_pair_statistics(tiny_run):
    table = pd.read_csv(tiny_run / PAIRS_TABLE)
    assert list(table["task"]) == ["ICT", "BFS", "WLP"] and (table["pairs"] > 0).all()
    assert list(table["pairs paper"]) == ["50.2M", "17.5M", "24.9M"]   # as the paper prints them
    ict = [json.loads(line) for line in (tiny_run / "artifacts/enwiki-mini/pairs/ict.jsonl").read_text().splitlines()]
    assert len(ict) == table.loc[0, "pairs"] and all(p["query"] not in p["doc"] for p in ict)


@pytest.mark.slow
def test_tiny_dag_builds_the_repbert_tables_and_figures(tiny_run):
    table1 = pd.read_csv(tiny_run / "results/repbert/table1.csv")
    assert table1["method"].tolist() == ["BM-25", "RepBERT"]
    assert table1["RR@10 paper"].tolist() == [0.184, 0.304] and (table1["ms/query"] > 0).all()
    assert table1["ms/query paper"].tolist() == [50, 80]
    table2 = pd.read_csv(tiny_run / "results/repbert/table2.csv")
    assert table2[["first stage", "depth"]].values.tolist() == [["BM-25", 2], ["BM-25", 5], ["RepBERT", 2], ["RepBERT", 5]]
    table3 = pd.read_csv(tiny_run / "results/repbert/table3.csv")
    fusions = list(table3[["first", "second", "fusion"]].astype("string").fillna("").itertuples(index=False, name=None))
    assert fusions == [("BM-25", "", "none"), ("RepBERT", "", "none"), ("BM-25", "RepBERT", "alternate"),
                       ("RepBERT", "BM-25", "alternate"), ("BM-25", "RepBERT", "rrf"), ("BM-25", "RepBERT", "combsum")]
    table4 = pd.read_csv(tiny_run / "results/repbert/table4.csv")
    assert table4.loc[2, "R@1000 paper"] == 0.957 and table4[["R@1000", "R@2000"]].stack().dropna().between(0, 1).all()
    # one row a condition, a column a measure: the untruncated union's R@2000 in its own column
    assert table4["R@2000"].notna().tolist() == [False] * 4 + [True] * 2 + [False] * 2
    assert table4["R@1000"].isna().tolist() == [False] * 4 + [True] * 2 + [False] * 2
    # a reranked run is exactly as deep as asked; the alternate merge holds the union of both runs
    reranked = (tiny_run / "artifacts/enwiki-mini-passages/rerank/bm25-d2/dev.trec").read_text().splitlines()
    assert max(int(line.split()[3]) for line in reranked) == 2
    # ... and reuses the cross-encoder scores of the deepest reranking of the same run
    meta = json.loads((tiny_run / "artifacts/enwiki-mini-passages/rerank/bm25-d2/dev.trec.meta.json").read_text())
    assert meta["counts"]["scores_from"].endswith("rerank/bm25-d5/dev.trec")
    # the passages are enwiki-mini's text: RepBERT and the cross-encoder start from its MLM encoder
    assert not (tiny_run / "artifacts/enwiki-mini-passages/encoders/mlm").exists()
    for figure in ("figure1", "figure2"):
        assert (tiny_run / f"results/repbert/{figure}.png").read_bytes()[:4] == b"\x89PNG"
        assert len(pd.read_csv(tiny_run / f"results/repbert/{figure}.csv")) > 0


@pytest.mark.slow
def test_tiny_dag_builds_the_ltre_tables_and_figure(tiny_run):
    table1 = pd.read_csv(tiny_run / "results/ltre/table1.csv")
    assert table1["key"].tolist() == ["BM25", "rand", "bm25", "nce", "bm25.async", "ltre:bm25"]
    assert table1["method"].tolist()[-2:] == ["BM25 Neg -> Async ANN", "LTRe (BM25 Neg)"]
    assert table1["RR@10 paper"].tolist() == [0.187, 0.261, 0.309, 0.256, 0.338, 0.329]
    assert table1[["RR@10", "R@1000", "nDCG@10"]].stack().between(0, 1).all()
    table3 = read_table(tiny_run / "results/ltre/table3.csv")   # printed long (a row a measure): wide again
    assert table3["key"].tolist() == ["start:bm25", "async:bm25.async", "ltre:flat", "ltre:pq2"]
    assert table3.loc[1, "speed-up"] == 1.0 and (table3.loc[2:, "speed-up"] > 0).all()
    # a tiny index is bytes, 0.000000 GB as printed: its twin keeps the unrounded size
    sizes = {k: row["memory GB"] for k, row in json.loads((tiny_run / "results/ltre/table3.json").read_text())["rows"].items()}
    assert all(size > 0 for size in sizes.values()) and sizes["ltre:pq2"] < sizes["ltre:flat"]
    table4 = pd.read_csv(tiny_run / "results/ltre/table4.csv")
    assert table4[["train index", "eval index"]].values.tolist() == [
        ["flat", "flat"], ["flat", "pq2"], ["pq2", "flat"], ["pq2", "pq2"]]
    # LTRe's doc tower is its start's, untouched, so its runs search the start's indexes: nothing re-encodes
    import torch
    from safetensors.torch import load_file
    dense = tiny_run / "artifacts/enwiki-mini-passages/dense"
    start = load_file(dense / "neg-bm25/dev/model/query/model.safetensors")
    kept = load_file(dense / "ltre-bm25-flat/dev/model/doc/model.safetensors")
    assert start.keys() == kept.keys() and all(torch.equal(start[k], kept[k]) for k in start)
    assert not (dense / "ltre-bm25-flat/dev/candidates.npy").exists()
    figure = pd.read_csv(tiny_run / "results/ltre/figure3.csv")
    assert set(figure["method"]) == {"ltre", "rand", "bm25", "async"}
    assert set(figure["measure"]) == {"RR@10", "R@3", "BM25 overlap", "async overlap"}
    assert (tiny_run / "results/ltre/figure3.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_tiny_dag_builds_the_zeroshot_tables(tiny_run):
    table = read_table(tiny_run / "results/zeroshot/enwiki-mini.csv")
    assert table["model"].tolist() == ["bm25", "ckpt-minilm"] and set(table["split"]) == {"all"}
    assert (table["queries"] == 12).all()   # every question, not a split's test side
    assert table[["nDCG@10", "Success@100", "RR@10"]].stack().between(0, 1).all()   # a question set: ReQA's
    note = json.loads((tiny_run / "results/zeroshot/enwiki-mini.csv.meta.json").read_text())["note"]   # said once
    assert "all-MiniLM-L6-v2: retrieval-trained checkpoint" in note and "contaminated" in note
    assert "Success@k" in note and "nDCG@10 published" not in table
    # one model folder and one encoding of the corpus serve every split: Table 3's 50-50 row searched it
    dense = tiny_run / "artifacts/enwiki-mini/dense/ckpt-minilm"
    assert sorted(p.name for p in dense.iterdir()) == ["50-50", "all"]
    assert not (dense / "50-50/model").exists() and (dense / "50-50/run-flat.trec").exists()
    towers = json.loads((dense / "all/model/towers.json").read_text())
    assert towers["pooling"] == "mean" and towers["normalize"] and towers["doc_text"] == "sentence"
    assert towers["checkpoint"]["read_from"]["pooling"] == "1_Pooling/config.json"
    beir = read_table(tiny_run / "results/zeroshot/beir-tiny.csv")
    assert beir["split"].tolist() == ["dev", "dev"] and (beir["queries"] == 2).all()   # the project's split name
    beir_note = json.loads((tiny_run / "results/zeroshot/beir-tiny.csv.meta.json").read_text())["note"]
    assert beir["nDCG@10 published"].tolist()[1] == 0.5 and "R@k (ir-measures)" in beir_note
    assert "qrels/test.tsv" in beir_note and "R@100" in beir   # BEIR's own file, named once; a passage set's R@k
    # nothing is trained for a zero-shot table: its note is not the profile's (a small BERT trained here)
    assert beir_note.startswith("zero-shot: ") and "1-layer BERT" not in beir_note
    assert json.loads((tiny_run / "results/zeroshot/beir-tiny.json").read_text())["rows"]["ckpt-minilm"]["RR@10"] >= 0
    passages = json.loads((tiny_run / "artifacts/beir-tiny/collection/candidates.jsonl.meta.json").read_text())
    assert list(passages["counts"]["checksum"].values()) == ["not verified (a folder)"]


@pytest.mark.slow
def test_ltre_change_retrains_only_the_query_towers(tiny_run):
    changed = (tiny_run / "fixtures/tiny.yaml").read_text().replace(
        "  train: {steps: 4, batch_size: 4, lr: 1.0e-3, warmup_ratio: 0.1, checkpoint_every: 2, top_n: 5",
        "  train: {steps: 4, batch_size: 4, lr: 2.0e-3, warmup_ratio: 0.1, checkpoint_every: 2, top_n: 5")
    (tiny_run / "fixtures/ltre.yaml").write_text(changed)
    plan = snakemake(tiny_run, *LTRE_TARGETS, "--cores", 2, "--configfile", "fixtures/ltre.yaml", "-n")
    counts = job_counts(plan.stdout)
    # LTRe at both training indexes and the 3 figure-3 query-only runs; no baseline retrains or re-encodes
    assert counts["train_ltre"] == 2 + 3 and "train_negatives" not in counts
    assert "encode_candidates" not in counts and "build_index" not in counts and counts["ltre_figure"] == 1


@pytest.mark.slow
def test_tiny_report_holds_every_table_figure_and_the_rule_graph(tiny_run):
    page = (tiny_run / "results" / "report.html").read_text()
    tables, figures = PAPER_TABLES + ZEROSHOT_TARGETS, PAPER_FIGURES
    names = [t[len("results/"):-len(".csv")] for t in tables]
    assert all(f"<h3>{n}</h3>" in page for n in names)
    assert all(f"<figcaption class='note'>{f[len('results/'):-len('.png')]}</figcaption>" in page for f in figures)
    assert "<figcaption class='note'>the rule graph (" in page and page.count("<details><summary>raw CSV") == len(tables)
    # the profile said once at the top, then the verdicts: every paper's claims with a coloured badge each
    top = page.split("<h2>Did it reproduce?</h2>")[0]
    assert "Profile: tiny." in top and "tiny end-to-end test configuration" in top
    claims = pd.read_csv(tiny_run / "results/claims.csv")
    assert page.count('<tr><td><span class="badge"') == claims.groupby(["paper", "claim"]).ngroups
    assert "transformers" in page and "git commit" in page
    assert (tiny_run / "results" / "dag.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_tiny_claims_cover_every_claims_file_with_a_verdict_each(tiny_run):
    import yaml

    claims = pd.read_csv(tiny_run / "results/claims.csv")
    for paper in PAPERS.values():
        listed = [c["id"] for c in yaml.safe_load((tiny_run / paper["claims"]).read_text())["claims"]]
        assert claims.loc[claims["paper"] == paper["id"], "claim"].unique().tolist() == listed
    assert set(claims["verdict"]) <= {"holds", "same direction, not significant", "not supported", "contradicted",
                                      "not measurable"}
    measured = claims[claims["verdict"] != "not measurable"]
    assert len(measured) > 50 and measured["p"].between(0, 1).all() and (measured["profile"] == "tiny").all()
    # the 50%/50% split is the only one: claims about the 1% and 5% splits cannot be tested here
    assert claims.loc[claims["claim"] == "chang-7", "verdict"].eq("not measurable").all()
    assert json.loads((tiny_run / "results/claims.csv.meta.json").read_text())["labels"] == {"profile": "tiny"}
    assert list(json.loads((tiny_run / "results/claims.json").read_text())) == ["papers"]   # numbers only


@pytest.mark.slow
@pytest.mark.extended   # retrains LTRe after the tiny run, on its critical path; tests/verdicts/test_checks.py checks the statuses
def test_a_changed_learning_rate_fails_the_check_naming_the_cells(tiny_run, tmp_path):
    """LTRe's learning rate (its query tower trains in seconds): the check fails and names the cells it moved."""
    work = tmp_path / "work"
    shutil.copytree(tiny_run, work, symlinks=True)
    before = "  train: {steps: 4, batch_size: 4, lr: 1.0e-3, warmup_ratio: 0.1, checkpoint_every: 2, top_n: 5"
    changed = (work / "fixtures/tiny.yaml").read_text()
    assert before in changed
    (work / "fixtures/lr.yaml").write_text(changed.replace(before, before.replace("lr: 1.0e-3", "lr: 3.0e-2")))
    done = snakemake(work, "check", "--cores", 2, "--configfile", "fixtures/lr.yaml")
    assert done.returncode != 0
    message = done.stdout + done.stderr
    assert "cells outside their tolerance" in message
    assert "[FAIL] ltre/table1 [key=ltre:bm25] RR@10: " in message
    report = pd.read_csv(work / "results/check.csv")
    failed = report[report["status"] == "FAIL"]
    # only what LTRe's training settings feed: LTRe's tables and Figure 3; Chang, QuadrupletBERT, RepBERT unchanged,
    # and so are Table 1's baselines (BM25, BM25 Neg, ANCE, Rand Neg, NCE)
    assert len(failed) and failed["table"].str.startswith("ltre/").all()
    assert set(failed.loc[failed["table"] == "ltre/table1", "row"]) == {"key=ltre:bm25"}


def test_switching_profile_reruns_the_tables_only(tiny_run, tmp_path):
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text("profile: tiny-renamed\n")
    plan = snakemake(tiny_run, *PAPER_TARGETS, "--configfile", "fixtures/tiny.yaml", renamed, "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    # the jobs that make every paper's tables and figures (data/papers/papers.yaml), and nothing below them
    outputs = {path for _, block in planned_jobs(plan.stdout)
               for path in re.search(r"^\s+output: (.*)$", block, re.M).group(1).split(", ")}
    assert set(PAPER_TARGETS) <= outputs and all(path.startswith("results/") for path in outputs)
    assert "repbert_table" in job_counts(plan.stdout) and "evaluate" not in job_counts(plan.stdout)


def test_second_run_has_nothing_to_do(tiny_run):
    again = snakemake(tiny_run, *PAPER_TARGETS, "--cores", 2,
                      "--configfile", "fixtures/tiny.yaml", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_finetune_change_reuses_pretraining(tiny_run):
    changed = (tiny_run / "fixtures/tiny.yaml").read_text().replace(
        "finetune: {steps: 4, batch_size: 4, lr: 1.0e-3", "finetune: {steps: 4, batch_size: 4, lr: 2.0e-3")
    (tiny_run / "fixtures/changed.yaml").write_text(changed)
    plan = snakemake(tiny_run, TARGET, "--cores", 2, "--configfile", "fixtures/changed.yaml", "-n")
    counts = job_counts(plan.stdout)
    # five two-tower rows re-fine-tuned; neither MLM nor the ICT/BFS/WLP pre-training reruns
    assert counts == {"finetune": 5, "encode_candidates": 5, "build_index": 5, "dense_search": 5,
                      "evaluate": 5, "chang2020_table": 1}


@pytest.mark.slow
def test_margin_list_change_reruns_only_the_new_margin(tiny_run):
    changed = (tiny_run / "fixtures/tiny.yaml").read_text().replace("margins: [0.1, 1]", "margins: [0.1, 2]")
    (tiny_run / "fixtures/margins.yaml").write_text(changed)
    plan = snakemake(tiny_run, *QUADRUPLET_TABLES, "--cores", 2, "--configfile", "fixtures/margins.yaml", "-n")
    # phase 1 and 2 for m = 2 (the first also mines), each encoded and indexed; only the new model searched
    assert job_counts(plan.stdout) == {"train_margin_threet": 1, "encode_candidates": 2, "build_index": 2,
                                       "mine_hard_negatives": 1, "train_margin_quadbert": 1, "dense_search": 1,
                                       "evaluate": 1, "quadrupletbert_table": 1}


def cells_as_the_paper(results: Path) -> dict:
    """A run's table cells with each value replaced by the paper's (no per-query values: the
    comparisons are then exact), so the claims can be worked out on the paper's own numbers."""
    tables = {}
    for meta in sorted(results.rglob("*.csv.meta.json")):
        name = str(meta.relative_to(results))[:-len(".csv.meta.json")]
        cells = json.loads(meta.read_text()).get("cells")
        if cells is not None:
            tables[name] = [{**{k: v for k, v in c.items() if k != "samples"}, "value": c["paper"]} for c in cells]
    return tables


@pytest.mark.slow
def test_every_claim_holds_on_the_papers_own_numbers(tiny_run):
    """A claims file that misreads its paper shows here: on the paper's values every comparison the paper's
    tables can decide goes the claimed way, except where a claim says the paper's numbers disagree (the tiny
    profile builds fewer rows than the paper has: 36 comparisons are decided here)."""
    cells = cells_as_the_paper(tiny_run / "results")
    assert {"chang2020/table3", "table1", "repbert/table1", "ltre/table1"} <= set(cells)
    documents = [checker.load_claims(ROOT / paper["claims"], CLAIMS_SCHEMA) for paper in PAPERS.values()]
    decided = 0
    for document in documents:
        disagreeing = {c["id"] for c in document["claims"] if c.get("paper_disagrees")}
        parts = checker.evaluate([document], cells, "wilcoxon", 0.05)
        for part in parts:
            if part.get("paper agrees") in ("yes", "no"):
                decided += 1
                if part["claim"] not in disagreeing:
                    assert part["paper agrees"] == "yes", (part["claim"], part["part"], part["higher"], part["lower"])
        for claim in disagreeing:   # where the paper's numbers are compared, they do disagree somewhere
            agrees = [p["paper agrees"] for p in parts if p["claim"] == claim and p.get("paper agrees") in ("yes", "no")]
            assert not agrees or "no" in agrees, claim
    assert decided >= 30
