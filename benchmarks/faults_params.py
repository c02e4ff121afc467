"""Fault cases, group "params": wrong types and ranges, misspelt keys, undefined names, broken config files, and
injection attempts through every params string that reaches a shell (run for real, a marker file the payload)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from .faults_harness import CHANG2, CHANG3, TINY, Workspace, classify_failure, error_lines

INJECTIONS = [
    # (name, overlay with {marker} as the payload's file, a target whose job puts the value in a shell, expect)
    ("faiss.indexes factory", {"faiss": {"indexes": {"flat": "Flat", "ivf": "IVF2,SQ8'$(touch {marker})'"}}},
     "artifacts/enwiki-mini/dense/transformer-mlm-l1-d16/50-50/index-ivf.faiss", "refused"),
    ("ltre.indexes factory", {"ltre": {"indexes": [{"name": "flat", "factory": "Flat"},
                                                   {"name": "pq2", "factory": "PQ2x2;touch {marker}"}]}},
     "artifacts/enwiki-mini-passages/dense/neg-bm25/dev/index-pq2.faiss", "refused"),
    ("tokenizer.hub_model", {"tokenizer": {"hub_model": "x'$(touch {marker})'"}}, "artifacts/enwiki-mini/tokenizer",
     "refused"),
    ("encoder.hub_model", {"encoder": {"hub_model": "x'; touch {marker}; '"}}, "artifacts/enwiki-mini/encoders/random-l1",
     "refused"),
    ("quadrupletbert.pretrain.init_hub_model", {"quadrupletbert": {"pretrain": {"init_hub_model": "x'`touch {marker}`'"}}},
     "artifacts/enwiki-mini/encoders/mlm-nsp", "refused"),
    ("ltre.start_hub_model", {"ltre": {"start_hub_model": "x;touch {marker}"}},
     "artifacts/enwiki-mini-passages/dense/neg-rand/dev/model", "refused"),
    ("repbert.reranker.hub_model", {"repbert": {"reranker": {"hub_model": "x$(touch {marker})"}}},
     "artifacts/enwiki-mini-passages/rerank/bm25-d5/dev.trec", "refused"),
    ("metrics item", {"metrics": ["R@1", "R@5$(touch {marker})"]}, "artifacts/enwiki-mini/eval/bm25/50-50/lucene.json",
     "refused"),
    ("repbert.metrics item", {"repbert": {"metrics": ["RR@10", "nDCG@10", "R@1000", "R@5;touch {marker}"]}},
     "artifacts/enwiki-mini-passages/eval/bm25/dev/lucene.json", "refused"),
    ("chang2020 split name", {"chang2020": {"table3": {"splits": ["50-50'$(touch {marker})'"]}}}, CHANG3, "refused"),
    # legitimate free text and paths: must run, quoted, without running anything
    ("profile_note with quotes", {"profile_note": "it's \"tiny\" $(touch {marker}) `touch {marker}`"}, CHANG2, "runs"),
    ("dump path with a payload", {"datasets": {"enwiki-mini": {"dump": "fixtures/tiny-wiki.xml$(touch {marker})"}}},
     "artifacts/enwiki-mini/corpus/stats.json", "refused"),
    ("questions path with a payload", {"datasets": {"enwiki-mini": {"questions": "fixtures/q.tsv;touch {marker}"}}},
     "artifacts/enwiki-mini/collection/stats.json", "refused"),
    ("a collection file name with a payload", {"datasets": {"tiny-msmarco": {
        "kind": "msmarco-tsv", "local_dir": "fixtures/msmarco-tiny", "collection": "collection.tsv;touch {marker}"}}},
     "artifacts/tiny-msmarco/collection/stats.json", "refused"),
]


def params_cases() -> list[tuple[str, dict, list[str]]]:
    """(name, overlay on tiny.yaml, strings the message must name)."""
    return [
        ("bm25.k1 not a number", {"bm25": {"k1": "high"}}, ["bm25.k1", "k1"]),
        ("bm25.depth 0", {"bm25": {"depth": 0}}, ["bm25.depth", "depth"]),
        ("finetune.lr above 1", {"finetune": {"lr": 2}}, ["finetune.lr", "lr"]),
        ("split fraction above 1", {"splits": {"50-50": 1.5}}, ["splits.50-50", "50-50"]),
        ("typo ict_querys in a dataset", {"datasets": {"enwiki-mini-passages": {"ict_querys": 8}}}, ["ict_querys"]),
        ("typo tabel3 in chang2020", {"chang2020": {"tabel3": {"dataset": "enwiki-mini"}}}, ["tabel3"]),
        ("typo dump_sha265 in a dataset", {"datasets": {"enwiki-mini": {"dump_sha265": ""}}}, ["dump_sha265"]),
        ("typo at the top level", {"bm52": {"k1": 1}}, ["bm52"]),
        ("typo poolng in two_tower", {"two_tower": {"poolng": "mean"}}, ["poolng"]),
        ("typo mem_mbb in resources", {"resources": {"gpu_jobs": {"mem_mbb": 10}}}, ["mem_mbb"]),
        ("typo stpes in ltre.train", {"ltre": {"train": {"stpes": 3}}}, ["stpes"]),
        ("a key of another dataset kind", {"datasets": {"enwiki-mini": {"ict_queries": 3}}}, ["ict_queries"]),
        ("unknown dataset in table 3", {"chang2020": {"table3": {"dataset": "nosuch"}}}, ["nosuch"]),
        ("unknown index in table 3", {"chang2020": {"table3": {"index": "hnsw"}}}, ["hnsw"]),
        ("unknown split in table 3", {"chang2020": {"table3": {"splits": ["7-93"]}}}, ["7-93"]),
        ("unknown quantized index", {"quadrupletbert": {"quantized_index": "hnsw"}}, ["hnsw"]),
        ("RepBERT on a QA dataset", {"repbert": {"dataset": "enwiki-mini"}}, ["repbert.dataset", "enwiki-mini"]),
        ("unknown graded dataset", {"ltre": {"graded_dataset": "nosuch"}}, ["nosuch"]),
        ("shards of an unknown dataset", {"encode": {"shards": {"nosuch": 2}}}, ["nosuch"]),
        ("open-domain base undefined", {"datasets": {"enwiki-mini-open": {"base": "nosuch"}}}, ["nosuch"]),
        ("unknown dataset kind", {"datasets": {"enwiki-mini": {"kind": "wikipedia-qaa"}}}, ["wikipedia-qaa", "kind"]),
        ("a download without checksum", {"datasets": {"squad": {"files": [
            {"name": "dev-v1.1.json", "url": "https://example.org/dev-v1.1.json"}]}}}, ["squad", "sha256"]),
        ("dump_sha256 not hex", {"datasets": {"enwiki-mini": {"dump_sha256": "xyz"}}}, ["dump_sha256", "xyz"]),
        ("unknown metric", {"metrics": ["R@1", "Recall@x"]}, ["Recall@x", "metrics"]),
        ("empty factory string", {"faiss": {"indexes": {"flat": "Flat", "ivf": ""}}}, ["faiss.indexes.ivf", "ivf"]),
        ("no seeds", {"quadrupletbert": {"seeds": []}}, ["seeds"]),
        ("a negative margin", {"quadrupletbert": {"margins": [-1]}}, ["margins"]),
        ("a profile name with a space", {"profile": "tiny profile"}, ["profile"]),
        ("LTRe indexes without flat", {"ltre": {"indexes": [{"name": "pq2", "factory": "PQ2x2"}]}}, ["ltre.indexes"]),
        ("splits as a list", {"splits": [0.5]}, ["splits"]),
        ("an unknown pre-training in table 5", {"chang2020": {"table5": {"rows": [[1, 1, "xyz", 8]]}}}, ["xyz", "rows"]),
        ("an unknown LTRe baseline", {"ltre": {"baselines": ["bm26"]}}, ["bm26", "baselines"]),
        ("a wrong kind's required key missing", {"datasets": {"extra-beir": {"kind": "beir"}}}, ["extra-beir"]),
        ("batch size 1 for in-batch softmax", {"finetune": {"batch_size": 1}}, ["finetune.batch_size", "batch_size"]),
    ]


def run_params(ws: Workspace, tmp: Path) -> list[dict]:
    cases = []
    for name, overlay, names in params_cases():
        (ws.root / "fixtures/bad.yaml").write_text(yaml.safe_dump(overlay))
        result = ws.snake(CHANG3, *TINY, "fixtures/bad.yaml", "-n")
        outcome, last = classify_failure(result, names)
        cases.append({"group": "params", "case": name, "outcome": outcome, "message": last})
    broken = [("a config file that is not YAML", "bm25: {k1: 0.9\n", ["bad.yaml"]),
              ("a config file that is not a mapping", "- 1\n- 2\n", ["bad.yaml"])]
    for name, text, names in broken:
        (ws.root / "fixtures/bad.yaml").write_text(text)
        outcome, last = classify_failure(ws.snake(CHANG3, *TINY, "fixtures/bad.yaml", "-n"), names)
        cases.append({"group": "params", "case": name, "outcome": outcome, "message": last})
    original = (ws.root / "params.yaml").read_text()
    try:
        (ws.root / "params.yaml").write_text(original + "bm25: {k1: 0.9\n")
        outcome, last = classify_failure(ws.snake(CHANG3, *TINY, "-n"), ["params.yaml"])
    finally:
        (ws.root / "params.yaml").write_text(original)
    cases.append({"group": "params", "case": "params.yaml that is not YAML", "outcome": outcome, "message": last})
    result = ws.snake(CHANG3, *TINY, "fixtures/missing.yaml", "-n")
    outcome, last = classify_failure(result, ["missing.yaml"])
    cases.append({"group": "params", "case": "a config file that does not exist", "outcome": outcome, "message": last})
    (ws.root / "fixtures/bad.yaml").unlink()
    for i, (name, overlay, target, expect) in enumerate(INJECTIONS):
        work = ws.clone(tmp / f"inject{i}")
        marker = tmp / f"pwned{i}"
        text = json.dumps(overlay).replace("{marker}", str(marker))
        (work / "fixtures/inject.yaml").write_text(yaml.safe_dump(json.loads(text)))
        result = ws.snake(target, *TINY, "fixtures/inject.yaml", "--cores", 1, cwd=work)
        if expect == "runs":
            outcome = ("injection executed" if marker.exists() else
                       "handled" if result.returncode == 0 else "unclear error")
            last = (error_lines(result) or [""])[-1]
        else:
            leaves = re.findall(r'"([^"]+)"', text)
            outcome, last = classify_failure(result, [*leaves, name.split()[0], "inject.yaml"], marker=marker)
        cases.append({"group": "injection", "case": name, "outcome": outcome, "message": last[:300]})
        shutil.rmtree(work, ignore_errors=True)
    return cases
