"""Fault injection on the test configuration (benchmarks/run.py --part faults, or this file alone).

Tried as a new user would, in a fresh copy of the workflow built once on tests/fixtures/tiny.yaml:
- bad params: wrong types and ranges, misspelt keys at every level, keys of another dataset kind, names of
  undefined datasets, splits and indexes, broken config files, and injection attempts through every params
  string that reaches a shell (those run for real, with a marker file as the payload);
- bad input files of every format the stages read (MediaWiki dumps, question sets, JSONL, TSV, TREC runs and
  qrels, NumPy matrices, Faiss and Lucene indexes, safetensors weights, training checkpoints, tables' JSON),
  truncated, malformed, inconsistent or missing, each fed to the stage that reads it;
- faults during runs: kill -9 of a training stage (resume must reach bit-identical weights), of one job of
  several during a params change, of Snakemake itself; failures during a change through Snakemake and
  `dvc repro`; Ctrl-C; a read-only output folder; edits inside a local_dir collection; a tampered checkpoint;
- edge cases (group "edge"): nested-alias and deeply nested config and claims files, a key given twice, a NUL in
  a params string, byte-order marks, a BEIR query judged only -1, an artifact edited after the build, a question
  file edited while the clock went back, an input dated in the future, a full disk (a tmpfs, root only).

Each outcome is classified automatically:
  clear error         non-zero exit, no traceback, the last line names the bad file or key
  unclear error       non-zero exit, no traceback, but the message names neither, or runs to many lines
  traceback           a Python traceback (or Snakemake's report of one)
  silent wrong result exit 0 over bad input, or a table or record not current with its inputs after a fault
  injection executed  the marker file a params value tried to create exists
  partial output      an output of a failed stage left behind
  handled             a fault recovered as it should (bit-identical resume, rebuilt table, warning counted),
                      or a legitimate but unusual value (quotes, spaces) run safely
Counts per class go to benchmarks/results.json under "faults"; every case's outcome and last message too."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from towers.config.params_check import merge_configs as merged
from .workflow_harness import spaced_python

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--configfile", "fixtures/tiny.yaml"]
CHANG3 = "results/chang2020/table3.csv"
CHANG2 = "results/chang2020/table2.csv"
LTRE_MODEL = "artifacts/enwiki-mini-passages/dense/ltre-bm25-flat/dev/model"
MLM_MODEL = "artifacts/enwiki-mini/dense/transformer-mlm-l1-d16/50-50/model"
KILLER = '''import os, signal
_wanted = os.environ.get("TOWERS_FAULT_KILL", "").encode()
_command = open("/proc/self/cmdline", "rb").read().split(b"\\0")
if _wanted and b"towers" in _command and _wanted in _command:
    _after = float(os.environ.get("TOWERS_FAULT_AFTER", "0"))
    if _after:   # die part-way, as an out-of-memory kill would
        import threading
        threading.Timer(_after, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    else:
        os.kill(os.getpid(), signal.SIGKILL)
'''
INFO = re.compile(r"^(Config file .* is extended|Building DAG|Assuming unrestricted|Using shell|Provided cores|"
                  r"Rules claiming|Select jobs|Job stats|host:|Nothing to be done|Complete log|$)")
FRAME = re.compile(r'^\s*File ".*", line \d+')


class Workspace:
    """The fresh copy the cases run in: the workflow, a snapshot of src/, the fixtures, built once."""

    def __init__(self, root: Path, src: Path):
        self.root, self.src = root, src

    def env(self, kill: str | None = None, after: float = 0.0, extra: dict | None = None) -> dict:
        env = {**os.environ, "PYTHONPATH": str(self.src)}
        if kill:
            faults = self.root.parent / "faults"
            faults.mkdir(exist_ok=True)
            (faults / "sitecustomize.py").write_text(KILLER)
            env.update(PYTHONPATH=f"{faults}{os.pathsep}{self.src}", TOWERS_FAULT_KILL=kill,
                       TOWERS_FAULT_AFTER=str(after))
        return {**env, **(extra or {})}

    def run(self, cmd, cwd=None, kill=None, after=0.0, timeout=5400, extra=None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(list(map(str, cmd)), cwd=cwd or self.root, capture_output=True, text=True,
                                  env=self.env(kill, after, extra), timeout=timeout)
        except subprocess.TimeoutExpired as err:
            return subprocess.CompletedProcess(err.cmd, 124, err.stdout or "", f"timed out after {timeout} s")

    def snake(self, *args, cwd=None, **kw):
        return self.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, **kw)

    def stage(self, *args, cwd=None, **kw):
        return self.run([sys.executable, "-m", "towers", *args], cwd=cwd, **kw)

    def clone(self, dest: Path) -> Path:
        """A copy of the built workspace: file times and Snakemake's records kept, so it plans as the original."""
        shutil.copytree(self.root, dest, symlinks=True)
        return dest


def error_lines(result) -> list[str]:
    return [l for l in (result.stdout + "\n" + result.stderr).splitlines() if not INFO.match(l.strip())]


def classify_failure(result, names: list[str], outputs=(), marker: Path | None = None) -> tuple[str, str]:
    """The class of a case expected to fail, and its telling message.

    Clear: a one-line `error: ...` (a stage's, or the params check's) naming the bad file or key, also when
    Snakemake reports the failed job around it; or a short message (Snakemake's missing-input report) naming
    it. A schema dump that names the key somewhere in 900 lines is not clear."""
    text = result.stdout + "\n" + result.stderr
    lines = error_lines(result)
    last = lines[-1].strip() if lines else ""
    names = [str(n) for n in names if n]
    if marker is not None and marker.exists():
        return "injection executed", last
    if result.returncode == 0:
        return "silent wrong result", last
    left = [str(p) for p in outputs if Path(p).exists()]
    if left:
        return "partial output", f"left {left[0]}"
    if "Traceback (most recent call last)" in text or any(FRAME.match(l) for l in lines):
        return "traceback", last[:300]
    one_liners = [l.strip() for l in lines if l.strip().startswith("error: ") and any(n in l for n in names)]
    if one_liners:
        return "clear error", one_liners[-1][:300]
    if len(lines) <= 12 and any(n in l for l in lines for n in names):
        return "clear error", last[:300]
    return "unclear error", f"{last[:240]} ({len(lines)} lines)"


# --- the workspace -----------------------------------------------------------------------------------------

def build(home: Path, src: Path, cores: int) -> Workspace:
    from .workflow_harness import copy_workflow

    root = home / "work"
    root.mkdir()
    copy_workflow(root, src.parent)
    shutil.copytree(src.parent / "tests/fixtures", root / "fixtures")
    shutil.copy(src.parent / "dvc.yaml", root / "dvc.yaml")
    ws = Workspace(root, src)
    done = ws.snake(CHANG2, CHANG3, LTRE_MODEL, *TINY, "--cores", cores, timeout=5400)
    if done.returncode != 0:
        sys.exit(f"faults: the base workspace did not build\n{done.stderr[-3000:]}")
    return ws


# --- bad params -----------------------------------------------------------------------------------------

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


# --- bad input files --------------------------------------------------------------------------------------

def cut(path: Path, fraction: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * fraction)])


def chang_row(evaluation, **fields) -> str:
    """A --row of Chang et al.'s Table 3 (the table stage's JSON object); a field given as None is left out."""
    row = {"split": "50-50", "encoder": "BM-25", "pretraining": "No Pretraining", "eval": str(evaluation), **fields}
    return json.dumps({k: v for k, v in row.items() if v is not None})


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def input_cases(ws: Workspace, tmp: Path) -> list[dict]:
    """Each case: a folder with copies of real artifacts, one of them spoilt, and the stage that reads it."""
    art = ws.root / "artifacts/enwiki-mini"
    model = ws.root / MLM_MODEL
    cases = []

    def case(name, args, bad, outputs, expect="error", extra_names=()):
        result = ws.stage(*args)
        if expect == "warn":
            warned = any(l.startswith("warning: ") and str(bad) in l for l in result.stderr.splitlines())
            outcome = "handled" if result.returncode == 0 and warned else (
                "silent wrong result" if result.returncode == 0 else classify_failure(result, [str(bad)])[0])
            last = (result.stderr.strip().splitlines() or [""])[-1]
        else:
            outcome, last = classify_failure(result, [str(bad), *extra_names], outputs)
        cases.append({"group": "input", "case": name, "outcome": outcome, "message": last[:300]})

    def folder(name) -> Path:
        path = tmp / "inputs" / re.sub(r"[^a-z0-9]+", "-", name.lower())
        path.mkdir(parents=True)
        return path

    def copy(src: Path, dst: Path) -> Path:
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
        return dst

    dump = ws.root / "fixtures/tiny-wiki.xml"
    questions = ws.root / "fixtures/tiny-questions.tsv"

    # MediaWiki dumps: parse-wiki
    for name, spoil in [("dump cut mid-page", lambda p: cut(p, 0.6)), ("dump empty", lambda p: p.write_text("")),
                        ("dump not XML", lambda p: p.write_text("just text, no pages\n")),
                        ("dump of another version (checksum)", None)]:
        f = folder(name)
        bad = copy(dump, f / "dump.xml")
        sha = []
        if spoil:
            spoil(bad)
        else:
            sha = ["--sha256", "0" * 64]
        case(name, ["parse-wiki", "--dump", bad, *sha, "--articles", f / "a.jsonl", "--redirects", f / "r.json",
                    "--stats", f / "s.json"], bad, [f / "a.jsonl", f / "r.json", f / "s.json"])

    # question sets: reqa-wiki
    header, *rows = lines_of(questions)
    for name, text in [("questions: a row pasted twice", [header, *rows, rows[1]]),
                       ("questions: wrong header", ["article\tquestion\tanswer", *rows]),
                       ("questions: a row with a field missing", [header, rows[0].rsplit("\t", 1)[0], *rows[1:]]),
                       ("questions: an unknown article", [header, "Nowhere\tq?\ta\tb", *rows]),
                       ("questions: an answer not in its sentence", [header, rows[0].replace("\t", "\tX", 2), *rows[1:]]),
                       ("questions: header only", [header])]:
        f = folder(name)
        bad = f / "questions.tsv"
        bad.write_text("\n".join(text) + "\n")
        case(name, ["reqa-wiki", "--articles", art / "corpus/articles.jsonl", "--questions", bad, "--out-dir", f / "reqa"],
             bad, [f / "reqa"])
    f = folder("articles cut mid-line")
    bad = copy(art / "corpus/articles.jsonl", f / "articles.jsonl")
    cut(bad, 0.7)
    case("articles cut mid-line", ["reqa-wiki", "--articles", bad, "--questions", questions, "--out-dir", f / "reqa"],
         bad, [f / "reqa"])

    # queries TSV: split
    for name, text in [("queries: a repeated id", "q1\tone\nq2\ttwo\nq1\tthree\n"),
                       ("queries: a line without a tab", "q1 one\n"), ("queries: empty", "")]:
        f = folder(name)
        bad = f / "queries.tsv"
        bad.write_text(text)
        case(name, ["split", "--queries", bad, "--train-fraction", 0.5, "--seed", 1, "--out-dir", f / "s"], bad, [f / "s"])

    # runs, qrels and test queries: evaluate
    run, qrels = art / "bm25/run.trec", art / "collection/qrels.txt"
    test, candidates = art / "splits/50-50/test.tsv", art / "collection/candidates.jsonl"

    def evaluate(name, run_file, qrels_file=qrels, test_file=test, bad=None, expect="error", metrics=("R@1",)):
        f = folder(name)
        case(name, ["evaluate", "--run", run_file, "--qrels", qrels_file, "--queries", test_file, "--metrics", *metrics,
                    "--candidates", candidates, "--out", f / "e.json"], bad or run_file, [f / "e.json"], expect)

    f = folder("run files")
    other = f / "other-queries.trec"
    other.write_text("".join(l.replace("q", "z", 1) + "\n" for l in lines_of(run)))
    evaluate("run: of other queries", other)
    foreign = f / "other-docs.trec"
    foreign.write_text("".join(re.sub(r" Q0 (\S+)", r" Q0 x\1", l) + "\n" for l in lines_of(run)))
    evaluate("run: of another collection's documents", foreign)
    partial = f / "some-docs.trec"
    partial.write_text("".join((re.sub(r" Q0 (\S+)", r" Q0 x\1", l) if i % 2 else l) + "\n"
                               for i, l in enumerate(lines_of(run))))
    evaluate("run: some documents unknown", partial, expect="warn")
    half = f / "half-queries.trec"
    kept = {l.split()[0] for l in lines_of(test)[::2]}
    half.write_text("".join(l + "\n" for l in lines_of(run) if l.split()[0] not in kept))
    evaluate("run: half the test queries missing", half, expect="warn")
    bad_line = f / "bad-line.trec"
    bad_line.write_text(run.read_text() + "q1 Q0 d1 one 1.0 t\n")
    evaluate("run: a malformed line", bad_line)
    evaluate("run: missing", f / "nope.trec")
    g = folder("qrels files")
    unjudged = g / "qrels.txt"
    unjudged.write_text("zz 0 d1 1\n")
    evaluate("qrels: none of the test queries judged", run, qrels_file=unjudged, bad=unjudged)
    some = g / "some-qrels.txt"
    some.write_text("".join(l + "\n" for l in lines_of(qrels) if l.split()[0] not in kept))
    evaluate("qrels: some test queries unjudged", run, qrels_file=some, bad=some, expect="warn")
    nonint = g / "nonint.txt"
    nonint.write_text(qrels.read_text() + "q1 0 d1 high\n")
    evaluate("qrels: a non-integer grade", run, qrels_file=nonint, bad=nonint)
    evaluate("metrics: an unknown measure", run, metrics=("Recall@@1",), bad="Recall@@1")

    # ReQA candidates JSONL and trained models: encode-candidates
    f = folder("candidates")
    broken = copy(candidates, f / "broken.jsonl")
    broken.write_text(candidates.read_text() + '{"id": "x", "sentence": \n')
    case("candidates: a line that is not JSON", ["encode-candidates", "--model", model, "--candidates", broken,
                                                 "--embeddings", f / "e.npy", "--ids", f / "e.ids"], broken,
         [f / "e.npy", f / "e.ids"])
    empty = f / "empty.jsonl"
    empty.write_text("")
    case("candidates: empty", ["encode-candidates", "--model", model, "--candidates", empty, "--embeddings", f / "e2.npy",
                               "--ids", f / "e2.ids"], empty, [f / "e2.npy", f / "e2.ids"])
    for name, spoil, bad_part in [("model: truncated weights", lambda m: cut(m / "query/model.safetensors", 0.3), "query"),
                                  ("model: truncated heads", lambda m: cut(m / "heads.safetensors", 0.5), ""),
                                  ("model: broken towers.json", lambda m: (m / "towers.json").write_text("{"), ""),
                                  ("model: tokenizer missing", lambda m: shutil.rmtree(m / "tokenizer"), "tokenizer")]:
        f = folder(name)
        spoilt = copy(model, f / "model")
        spoil(spoilt)
        case(name, ["encode-candidates", "--model", spoilt, "--candidates", candidates, "--embeddings", f / "e.npy",
                    "--ids", f / "e.ids"], spoilt / bad_part if bad_part else spoilt, [f / "e.npy", f / "e.ids"],
             extra_names=[str(spoilt)])

    # embeddings, Faiss indexes, ids: build-index and dense-search
    dense = ws.root / MLM_MODEL.rsplit("/", 1)[0]
    f = folder("embeddings")
    notnpy = f / "x.npy"
    notnpy.write_text("not numpy\n")
    case("embeddings: not a NumPy file", ["build-index", "--embeddings", notnpy, "--factory", "Flat", "--out", f / "i.faiss"],
         notnpy, [f / "i.faiss"])
    case("factory: not a Faiss factory string", ["build-index", "--embeddings", dense / "candidates.npy", "--factory",
                                                 "Flatt", "--out", f / "j.faiss"], "Flatt", [f / "j.faiss"])
    case("factory: more lists than vectors", ["build-index", "--embeddings", dense / "candidates.npy", "--factory",
                                              "IVF4096,Flat", "--out", f / "k.faiss"], "IVF4096,Flat", [f / "k.faiss"])
    truncated = copy(dense / "index-flat.faiss", f / "cut.faiss")
    cut(truncated)
    case("index: truncated Faiss file", ["dense-search", "--model", model, "--index", truncated, "--ids",
                                         dense / "candidates.ids", "--queries", test, "--depth", 10, "--run", f / "r.trec"],
         truncated, [f / "r.trec"])
    ids = f / "short.ids"
    ids.write_text("".join(l + "\n" for l in lines_of(dense / "candidates.ids")[:-2]))
    case("ids: fewer than the index holds", ["dense-search", "--model", model, "--index", dense / "index-flat.faiss",
                                             "--ids", ids, "--queries", test, "--depth", 10, "--run", f / "r2.trec"],
         ids, [f / "r2.trec"])
    parts = [f / "p0.npy", f / "p1.npy"]
    import numpy as np
    np.save(parts[0], np.zeros((2, 4), dtype=np.float32))
    np.save(parts[1], np.zeros((2, 5), dtype=np.float32))
    for i, p in enumerate(parts):
        p.with_suffix(".ids").write_text(f"a{i}\nb{i}\n")
    case("shards: of different widths", ["merge-embeddings", "--parts", *parts, "--part-ids",
                                         *[p.with_suffix(".ids") for p in parts], "--embeddings", f / "m.npy", "--ids",
                                         f / "m.ids"], parts[1], [f / "m.npy", f / "m.ids"], extra_names=[str(parts[0])])

    # Lucene indexes: bm25-search
    for name, spoil in [("Lucene: segment overwritten", "zero"), ("Lucene: segments file gone", "drop")]:
        f = folder(name)
        index = copy(art / "bm25/index", f / "index")
        for segment in index.iterdir():
            if spoil == "zero" and segment.name.startswith("_"):
                data = bytearray(segment.read_bytes())
                data[len(data) // 2:] = bytes(len(data) - len(data) // 2)
                segment.write_bytes(bytes(data))
            if spoil == "drop" and segment.name.startswith("segments_"):
                segment.unlink()
        case(name, ["bm25-search", "--index", index, "--queries", art / "collection/queries.tsv", "--run", f / "r.trec",
                    "--k1", 0.9, "--b", 0.4, "--depth", 5, "--threads", 1], index, [f / "r.trec"])

    # training inputs: finetune
    split = art / "splits/50-50"
    encoder = art / "encoders/random-l1"

    def finetune(name, bad, encoder_dir=encoder, cands=candidates, qrels_file=qrels, train=split / "train.tsv", state=None):
        f = folder(name)
        case(name, ["finetune", "--encoder", encoder_dir, "--candidates", cands, "--qrels", qrels_file, "--train", train,
                    "--valid", split / "valid.tsv", "--out", f / "model", "--state-dir", state or f / "state",
                    "--seed", 1, "--steps", 2, "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0.1,
                    "--checkpoint-every", 1, "--query-length", 16, "--doc-length", 32, "--embedding-dim", 8],
             bad, [f / "model"])

    f = folder("training files")
    orphan = f / "qrels.txt"
    trained = lines_of(split / "train.tsv")[0].split("\t")[0]   # a training question's document renamed
    orphan.write_text("".join((l.replace(" 0 ", " 0 nosuch-", 1) if l.split()[0] == trained else l) + "\n"
                              for l in lines_of(qrels)))
    finetune("qrels: a document not among the candidates", orphan, qrels_file=orphan)
    no_train = f / "train.tsv"
    no_train.write_text("z1\tnobody asks this\n")
    finetune("training questions: none judged", no_train, train=no_train)
    weights = copy(encoder, f / "encoder")
    cut(weights / "model.safetensors", 0.3)
    finetune("encoder: truncated weights", weights, encoder_dir=weights)
    state = f / "tampered-state"
    state.mkdir()
    import torch

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {tmp / 'pwned-checkpoint'}",)
    torch.save({"fingerprint": "x", "step": 1, "model": {}, "history": [Payload()]}, state / "checkpoint.pt")
    finetune("checkpoint: tampered (pickled code)", state / "checkpoint.pt", state=state)
    if (tmp / "pwned-checkpoint").exists():
        cases[-1]["outcome"] = "injection executed"
    cut_state = f / "cut-state"
    cut_state.mkdir()
    torch.save({"fingerprint": "x", "step": 1, "model": {}}, cut_state / "checkpoint.pt")
    cut(cut_state / "checkpoint.pt")
    finetune("checkpoint: truncated", cut_state / "checkpoint.pt", state=cut_state)

    # tables: evaluation JSON and the paper's values
    f = folder("tables")
    spoilt = f / "eval.json"
    spoilt.write_text('{"metrics": ')
    rows = ["--row", chang_row(spoilt)]
    table = ["table", "--table", "table3", "--paper", ws.root / "data/papers/chang2020.csv", "--profile", "tiny",
             "--dataset", "enwiki-mini", "--note", "n", "--metrics", "R@1"]
    case("evaluation JSON cut short", [*table, *rows, "--csv", f / "t.csv", "--json", f / "t.json"], spoilt,
         [f / "t.csv", f / "t.json"])
    good = art / "eval/bm25/50-50/lucene.json"
    case("paper values file missing", ["table", "--table", "table3", "--paper", f / "nope.csv", "--profile", "tiny",
                                       "--dataset", "enwiki-mini", "--note", "n", "--metrics", "R@1", "--row",
                                       chang_row(good), "--csv", f / "u.csv", "--json", f / "u.json"],
         f / "nope.csv", [f / "u.csv", f / "u.json"])
    case("a table row with a field missing", [*table, "--row", chang_row(good, split=None), "--csv", f / "v.csv",
                                              "--json", f / "v.json"], "--row", [f / "v.csv", f / "v.json"])

    # passage collections: passages-msmarco on a copy of the tiny MS MARCO folder
    tiny = ws.root / "fixtures/msmarco-tiny"
    for name, spoil, bad_name in [
            ("collection: a repeated passage id", lambda d: (d / "collection.tsv").write_text(
                (d / "collection.tsv").read_text() + (d / "collection.tsv").read_text().splitlines()[0] + "\n"),
             "collection.tsv"),
            ("qrels: a passage not in the collection", lambda d: (d / "qrels.dev.small.tsv").write_text(
                (d / "qrels.dev.small.tsv").read_text() + "999\t0\tnosuch\t1\n"), "qrels.dev.small.tsv"),
            ("queries: a line without text", lambda d: (d / "queries.dev.small.tsv").write_text(
                (d / "queries.dev.small.tsv").read_text() + "77\n"), "queries.dev.small.tsv"),
            ("collection: missing", lambda d: (d / "collection.tsv").unlink(), "collection.tsv")]:
        f = folder(name)
        source = copy(tiny, f / "msmarco")
        spoil(source)
        case(name, ["passages-msmarco", "--source", source, "--seed", 1, "--valid-fraction", 0.1, "--out-dir",
                    f / "reqa", "--split-dir", f / "split"], bad_name, [f / "reqa", f / "split"])

    # fusion and reranking inputs
    f = folder("fusion")
    case("fusion: one run only", ["fuse-runs", "--runs", run, "--method", "rrf", "--out", f / "f.trec"], "--runs",
         [f / "f.trec"])
    empty_run = f / "empty.trec"
    empty_run.write_text("")
    case("fusion: an empty run", ["fuse-runs", "--runs", run, empty_run, "--method", "rrf", "--out", f / "g.trec"],
         empty_run, [f / "g.trec"])
    return cases


# --- faults during runs -------------------------------------------------------------------------------------

def stale_rows(work: Path, models: list[str], split: str = "50-50", index: str = "flat") -> list[str]:
    """Models of table 3 whose chain (model -> candidates -> index -> run -> evaluation -> table) is not current:
    a file missing, or older than the one it was made from."""
    stale = []
    table = work / CHANG3
    for model in models:
        if model == "bm25":
            chain = [work / "artifacts/enwiki-mini/bm25/index", work / "artifacts/enwiki-mini/bm25/run.trec"]
        else:
            dense = work / f"artifacts/enwiki-mini/dense/{model}/{split}"
            chain = [dense / "model", dense / "candidates.npy", dense / f"index-{index}.faiss",
                     dense / f"run-{index}.trec"]
        chain += [work / f"artifacts/enwiki-mini/eval/{model}/{split}/{'lucene' if model == 'bm25' else index}.json",
                  table]
        if any(not p.exists() for p in chain) or any(a.stat().st_mtime > b.stat().st_mtime
                                                       for a, b in zip(chain, chain[1:])):
            stale.append(model)
    return stale


TABLE3_MODELS = ["bm25", "bowmlp-none-d8", "bowmlp-ict+bfs+wlp-d8", "transformer-none-l1-d16",
                 "transformer-mlm-l1-d16", "transformer-ict+bfs+wlp-l1-d16"]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise RuntimeError(f"{path} no longer holds {old!r}")
    path.write_text(text.replace(old, new))


def fault_cases(ws: Workspace, tmp: Path) -> list[dict]:
    cases = []

    def record(name, outcome, detail=""):
        cases.append({"group": "fault", "case": name, "outcome": outcome, "message": str(detail)[:300]})

    def guarded(name, check):
        try:
            record(name, *check())
        except Exception as err:   # a harness problem is reported, not hidden
            record(name, "harness error", f"{type(err).__name__}: {err}")

    def changed_then_killed(name, old, new, kill, target=CHANG3, cores=1, via_dvc=False, signal_snakemake=None):
        work = ws.clone(tmp / re.sub(r"[^a-z0-9]+", "-", name.lower()))
        edit(work / "fixtures/tiny.yaml", old, new)
        if via_dvc:   # the tiny configuration as params.yaml, which DVC tracks
            params = merged(yaml.safe_load((work / "params.yaml").read_text()),
                            yaml.safe_load((work / "fixtures/tiny.yaml").read_text()))
            (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            (work / ".venv/bin").mkdir(parents=True)
            (work / ".venv/bin/snakemake").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m snakemake "$@"\n')
            (work / ".venv/bin/snakemake").chmod(0o755)
            shutil.copytree(ws.src, work / "src")   # a dependency of every dvc.yaml stage
            dvc = Path(sys.executable).with_name("dvc")
            ws.run([dvc, "init", "--no-scm", "-q"], cwd=work)
            stage = "chang2020@table3"
            first = ws.run([dvc, "repro", stage], cwd=work, kill=kill)
            again = ws.run([dvc, "repro", stage], cwd=work)
        elif signal_snakemake:
            proc = subprocess.Popen([sys.executable, "-m", "snakemake", target, *TINY, "--cores", str(cores)], cwd=work,
                                    env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_for_stage(kill, 600) is None:
                proc.kill()
                return "harness error", "the job to interrupt never started"
            proc.send_signal(signal_snakemake)
            proc.wait(timeout=300)
            first = subprocess.CompletedProcess([], proc.returncode or 1, "", "")
            # the recovery in docs/workflow.md: let the orphaned jobs end, unlock, rerun what is marked incomplete
            deadline = time.time() + 300
            while wait_for_stage(kill, 0.1) is not None and time.time() < deadline:
                time.sleep(1)
            ws.snake("--unlock", *TINY, cwd=work)
            again = ws.snake(target, *TINY, "--cores", cores, "--rerun-incomplete", cwd=work)
        else:
            first = ws.snake(target, *TINY, "--cores", cores, cwd=work, kill=kill)
            again = ws.snake(target, *TINY, "--cores", cores, cwd=work)
        if first.returncode == 0:
            return "harness error", "the fault did not stop the first run"
        if again.returncode != 0:
            return "unclear error", (error_lines(again) or [""])[-1]
        stale = stale_rows(work, TABLE3_MODELS)
        shutil.rmtree(work, ignore_errors=True)
        return ("silent wrong result", f"rows not current after the rerun: {', '.join(stale)}") if stale else \
            ("handled", "every row of the table current after the rerun")

    # 1-2: kill -9 during training, resumed: bit-identical weights (stage level, as test_training does)
    guarded("kill -9 during fine-tuning, resumed", lambda: resumed_identical(ws, tmp, "finetune"))
    guarded("kill -9 during MLM pre-training, resumed", lambda: resumed_identical(ws, tmp, "pretrain-mlm"))
    # 3-8: a job that fails part-way through a params change
    guarded("bm25.depth change, bm25_search killed", lambda: changed_then_killed(
        "bm25 depth", "bm25: {k1: 0.9, b: 0.4, depth: 10}", "bm25: {k1: 0.9, b: 0.4, depth: 1}", "bm25-search"))
    guarded("bm25.k1 change through dvc repro, bm25_search killed", lambda: changed_then_killed(
        "bm25 k1 dvc", "bm25: {k1: 0.9,", "bm25: {k1: 1.2,", "bm25-search", via_dvc=True))
    guarded("finetune.lr change, one of five fine-tunings killed", lambda: changed_then_killed(
        "finetune lr", "finetune: {steps: 4, batch_size: 4, lr: 1.0e-3", "finetune: {steps: 4, batch_size: 4, lr: 2.0e-3",
        "artifacts/enwiki-mini/dense/transformer-mlm-l1-d16/50-50/model", cores=2))
    guarded("metrics change, one of six evaluations killed", lambda: changed_then_killed(
        "eval killed", "chang2020:\n", "metrics: [R@1, R@5, R@10, R@50, R@100]\nchang2020:\n",
        "artifacts/enwiki-mini/eval/transformer-none-l1-d16/50-50/flat.json"))
    guarded("faiss.depth change, Ctrl-C during a search", lambda: changed_then_killed(
        "ctrl c", "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 10}",
        "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 8}",
        "artifacts/enwiki-mini/dense/transformer-none-l1-d16/50-50/run-flat.trec", signal_snakemake=signal.SIGINT))
    guarded("faiss change, kill -9 of Snakemake then a rerun", lambda: changed_then_killed(
        "snakemake killed", "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 10}",
        "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 9}",
        "artifacts/enwiki-mini/dense/bowmlp-none-d8/50-50/run-flat.trec", signal_snakemake=signal.SIGKILL))
    # 9: a dry run after a change removes nothing
    guarded("a dry run after a change", lambda: dry_run_keeps(ws, tmp))
    # 10: kill -9 of Snakemake: its orphaned job and a duplicate after --unlock
    guarded("kill -9 of Snakemake, then --unlock and a rerun beside the orphan", lambda: orphan_duplicate(ws, tmp))
    # 11: LTRe's step log across a resume under Snakemake
    guarded("kill -9 during LTRe training, rerun", lambda: ltre_log_after_resume(ws, tmp))
    # 12: edits inside a local_dir collection
    guarded("an edit inside a local_dir collection", lambda: local_dir_edit(ws, tmp))
    # 13: a read-only output folder
    guarded("a read-only output folder", lambda: read_only_output(ws, tmp))
    # 14: an intermediate file damaged between runs
    guarded("candidates cut short between runs", lambda: damaged_between_runs(ws, tmp))
    # 15: kill -9 of an encoding mid-write: no partial output
    guarded("kill -9 during encoding", lambda: killed_encoding(ws, tmp))
    # 16: a virtualenv whose path holds a space
    guarded("a virtualenv path with a space", lambda: spaced_venv(ws, tmp))
    # 17: two fresh copies give byte-identical tables
    guarded("two fresh copies, the same tables", lambda: same_tables(ws, tmp))
    return cases


def wait_for_stage(wanted: str, timeout: float) -> int | None:
    """The pid of the first process whose command line holds `wanted` (a stage's output path)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if wanted.encode() in command and b"towers" in command:
                    return int(entry.name)
        time.sleep(0.2)
    return None


def kill_stages(wanted: str) -> None:
    """Kill -9 every stage process whose command line holds `wanted` (the harness's own clean-up)."""
    while (pid := wait_for_stage(wanted, 0.1)) is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        time.sleep(0.2)


def resumed_identical(ws: Workspace, tmp: Path, stage: str) -> tuple[str, str]:
    import torch
    from safetensors.torch import load_file

    art = ws.root / "artifacts/enwiki-mini"
    f = tmp / f"resume-{stage}"
    f.mkdir()
    if stage == "finetune":
        common = ["finetune", "--encoder", art / "encoders/random-l1", "--candidates", art / "collection/candidates.jsonl",
                  "--qrels", art / "collection/qrels.txt", "--train", art / "splits/50-50/train.tsv", "--valid",
                  art / "splits/50-50/valid.tsv", "--seed", 1, "--steps", 40, "--batch-size", 4, "--lr", 1e-3,
                  "--warmup-ratio", 0.1, "--checkpoint-every", 2, "--query-length", 16, "--doc-length", 32,
                  "--embedding-dim", 8]
        weights = "query/model.safetensors"
    else:
        common = ["pretrain-mlm", "--candidates", art / "collection/candidates.jsonl", "--tokenizer", art / "tokenizer",
                  "--seed", 1, "--steps", 40, "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0.1, "--max-length",
                  32, "--checkpoint-every", 2, "--hidden", 32, "--layers", 1, "--heads", 2, "--intermediate", 64,
                  "--max-positions", 128]
        weights = "model.safetensors"
    whole = ws.stage(*common, "--out", f / "whole", "--state-dir", f / "whole.state")
    if whole.returncode != 0:
        return "unclear error", (whole.stderr.strip().splitlines() or [""])[-1]
    args = [sys.executable, "-m", "towers", *map(str, common), "--out", str(f / "killed"), "--state-dir",
            str(f / "killed.state")]
    proc = subprocess.Popen(args, cwd=ws.root, env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (f / "killed.state/checkpoint.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if (f / "killed").exists():
        return "harness error", "the run ended before the kill"
    again = ws.stage(*common, "--out", f / "killed", "--state-dir", f / "killed.state")
    if again.returncode != 0:
        return "unclear error", (again.stderr.strip().splitlines() or [""])[-1]
    a, b = load_file(str(f / "whole" / weights)), load_file(str(f / "killed" / weights))
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    resumed = "resumed from step" in again.stdout + again.stderr
    return ("handled", "resumed, bit-identical weights") if same and resumed else \
        ("silent wrong result", f"resumed: {resumed}, identical: {same}")


def dry_run_keeps(ws: Workspace, tmp: Path) -> tuple[str, str]:
    work = ws.clone(tmp / "dry")
    edit(work / "fixtures/tiny.yaml", "bm25: {k1: 0.9,", "bm25: {k1: 1.1,")
    before = sorted(p for p in work.rglob("*") if p.is_file() and ".snakemake" not in p.parts)
    plan = ws.snake(CHANG3, *TINY, "-n", cwd=work)
    after = sorted(p for p in work.rglob("*") if p.is_file() and ".snakemake" not in p.parts)
    shutil.rmtree(work, ignore_errors=True)
    if plan.returncode != 0:
        return "unclear error", (error_lines(plan) or [""])[-1]
    return ("handled", "nothing removed") if before == after else \
        ("silent wrong result", f"{len(set(before) - set(after))} files removed by a dry run")


def orphan_duplicate(ws: Workspace, tmp: Path) -> tuple[str, str]:
    """Snakemake killed while a (slow) fine-tuning runs; after --unlock, a rerun must not start a second writer."""
    work = ws.clone(tmp / "orphan")
    edit(work / "fixtures/tiny.yaml", "finetune: {steps: 4,", "finetune: {steps: 3000,")
    target = "artifacts/enwiki-mini/dense/transformer-none-l1-d16/50-50/model"
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", target, *TINY, "--cores", "1"], cwd=work, env=ws.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    orphan = wait_for_stage(target, 300)
    try:
        if orphan is None:
            return "harness error", "the fine-tuning never started"
        time.sleep(3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ws.snake("--unlock", *TINY, cwd=work)
        again = ws.snake(target, *TINY, "--cores", 1, "--rerun-incomplete", cwd=work, timeout=900)
        alive = Path(f"/proc/{orphan}").exists()
        if again.returncode == 124:
            return "silent wrong result", "a second fine-tuning ran beside the orphan"
        if again.returncode == 0:
            return "silent wrong result", "a duplicate finished beside the orphan"
        message = next((l for l in reversed(again.stderr.splitlines()) if "is writing it" in l), "")
        return ("clear error", message) if message and alive else ("unclear error", (error_lines(again) or [""])[-1])
    finally:
        kill_stages(target)
        shutil.rmtree(work, ignore_errors=True)


def ltre_log_after_resume(ws: Workspace, tmp: Path) -> tuple[str, str]:
    steps = 400
    work = ws.clone(tmp / "ltre")
    edit(work / "fixtures/tiny.yaml", "train: {steps: 4, batch_size: 4, lr: 1.0e-3, warmup_ratio: 0.1, checkpoint_every: 2, top_n",
         f"train: {{steps: {steps}, batch_size: 4, lr: 1.0e-3, warmup_ratio: 0.1, checkpoint_every: 20, top_n")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", LTRE_MODEL, *TINY, "--cores", "1"], cwd=work,
                            env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = work / "artifacts/enwiki-mini-passages/train-state/ltre-bm25-flat-dev/checkpoint.pt"
    deadline = time.time() + 600
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)
    kill_stages(LTRE_MODEL)   # the training only, as the out-of-memory killer would
    if proc.wait(timeout=300) == 0:
        return "harness error", "the kill came after training ended"
    steps_log = work / "artifacts/enwiki-mini-passages/ltre/steps/ltre-bm25-flat-dev.jsonl"
    again = ws.snake(LTRE_MODEL, *TINY, "--cores", 1, cwd=work)
    if again.returncode != 0:
        return "unclear error", (error_lines(again) or [""])[-1]
    resumed = "resumed from step" in (work / "logs/enwiki-mini-passages/train_ltre-bm25-flat_dev.log").read_text()
    logged = [json.loads(l)["step"] for l in steps_log.read_text().splitlines()]
    shutil.rmtree(work, ignore_errors=True)
    if logged != list(range(1, steps + 1)):
        return "silent wrong result", f"the step log holds steps {logged[:2]}...{logged[-2:]} ({len(logged)} of {steps})"
    return "handled", f"resumed: {resumed}; all {steps} steps logged once"


def local_dir_edit(ws: Workspace, tmp: Path) -> tuple[str, str]:
    work = ws.clone(tmp / "local")
    (work / "fixtures/local.yaml").write_text(yaml.safe_dump({"datasets": {"tiny-msmarco": {
        "kind": "msmarco-tsv", "local_dir": "fixtures/msmarco-tiny", "max_valid": 1}}}))
    target = "artifacts/tiny-msmarco/collection/stats.json"
    built = ws.snake(target, *TINY, "fixtures/local.yaml", "--cores", 1, cwd=work)
    if built.returncode != 0:
        return "unclear error", (error_lines(built) or [""])[-1]
    queries = work / "fixtures/msmarco-tiny/queries.dev.small.tsv"
    queries.write_text(queries.read_text().replace("\n", " \n", 1))
    plan = ws.snake(target, *TINY, "fixtures/local.yaml", "-n", cwd=work)
    shutil.rmtree(work, ignore_errors=True)
    return ("silent wrong result", "nothing to be done after the edit") if "Nothing to be done" in plan.stdout else \
        ("handled", "the edit replans the collection")


def read_only_output(ws: Workspace, tmp: Path) -> tuple[str, str]:
    folder = tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / ".probe").write_text("")
        (folder / ".probe").unlink()
        folder = Path("/sys/kernel")   # root writes anywhere the permission bits forbid: the kernel's folder refuses
    except OSError:
        pass
    art = ws.root / "artifacts/enwiki-mini"
    out = folder / "eval.json"
    result = ws.stage("evaluate", "--run", art / "bm25/run.trec", "--qrels", art / "collection/qrels.txt", "--queries",
                      art / "splits/50-50/test.tsv", "--metrics", "R@1", "--out", out)
    return classify_failure(result, [str(out)], [out])


def damaged_between_runs(ws: Workspace, tmp: Path) -> tuple[str, str]:
    work = ws.clone(tmp / "damaged")
    candidates = work / "artifacts/enwiki-mini/collection/candidates.jsonl"
    data = candidates.read_bytes()
    candidates.write_bytes(data[:len(data) // 2])   # cut mid-line, as a full disk might
    result = ws.snake(CHANG3, *TINY, "--cores", 1, cwd=work)
    outcome = classify_failure(result, [str(candidates.relative_to(work)), "candidates.jsonl"])
    shutil.rmtree(work, ignore_errors=True)
    return outcome


def killed_encoding(ws: Workspace, tmp: Path) -> tuple[str, str]:
    art = ws.root / "artifacts/enwiki-mini"
    f = tmp / "encode-killed"
    f.mkdir()
    many = f / "many.jsonl"   # the tiny candidates 300 times over: long enough to be killed mid-way
    many.write_text("".join(l.replace('"id": "', f'"id": "r{i}-', 1) + "\n"
                            for i in range(300) for l in (art / "collection/candidates.jsonl").read_text().splitlines()))
    out = tmp / "encode-out"
    args = [sys.executable, "-m", "towers", "encode-candidates", "--model", str(ws.root / MLM_MODEL), "--candidates",
            str(many), "--embeddings", str(out / "e.npy"), "--ids", str(out / "e.ids"), "--batch-size", "1"]
    proc = subprocess.Popen(args, cwd=ws.root, env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(15)
    if proc.poll() is not None:
        return "harness error", "the encoding ended before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    f = out
    if not f.exists():
        return "handled", "nothing that looks finished"
    left = [p.name for p in f.iterdir() if not p.name.startswith(".")]
    return ("partial output", f"left {left}") if left else ("handled", "nothing that looks finished")


def spaced_venv(ws: Workspace, tmp: Path) -> tuple[str, str]:
    python = spaced_python(tmp)
    work = ws.clone(tmp / "spaced")
    shutil.rmtree(work / "artifacts/enwiki-mini/corpus")
    result = ws.run([python, "-m", "snakemake", "artifacts/enwiki-mini/corpus/stats.json", *TINY,
                     "--cores", 1], cwd=work)
    shutil.rmtree(work, ignore_errors=True)
    if result.returncode == 0:
        return "handled", "every job ran"
    return "unclear error", f"a valid setup fails: {(error_lines(result) or [''])[-1][:200]}"


def same_tables(ws: Workspace, tmp: Path) -> tuple[str, str]:
    from .workflow_harness import copy_workflow

    root = tmp / "second"
    root.mkdir()
    copy_workflow(root, ws.src.parent)
    shutil.copytree(ws.src.parent / "tests/fixtures", root / "fixtures")
    done = ws.snake(CHANG2, *TINY, "--cores", 2, cwd=root, timeout=3600)
    if done.returncode != 0:
        return "unclear error", (error_lines(done) or [""])[-1]
    same = all((root / t).read_bytes() == (ws.root / t).read_bytes() for t in (CHANG2, CHANG2.replace(".csv", ".json")))
    shutil.rmtree(root, ignore_errors=True)
    return ("handled", "byte-identical") if same else ("silent wrong result", "the tables differ")


# --- edge cases: alias bombs, repeated keys, grades <= 0, edited artifacts, full disks, byte-order marks ---------

def alias_bomb(key: str = "bm25:\n  k1", levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + f"\n{key}: *a{levels}\n"


def bounded(outcome: tuple[str, str], result, limit: int = 400) -> tuple[str, str]:
    """A clear error whose output runs past `limit` characters a line is not clear."""
    longest = max((len(l) for l in (result.stdout + "\n" + result.stderr).splitlines()), default=0)
    if outcome[0] == "clear error" and longest > limit:
        return "unclear error", f"a line of {longest:,} characters"
    return outcome


def full_disk(tmp: Path) -> Path | None:
    """A mounted tmpfs with no space left (root only), or None."""
    mount = tmp / "full"
    mount.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True).returncode:
        return None
    try:   # unbuffered: a buffered file would raise once more while closing, outside the loop
        with open(mount / ".filler", "wb", buffering=0) as handle:
            while True:
                handle.write(b"\0" * 4096)
    except OSError:   # full
        pass
    return mount


def edge_cases(ws: Workspace, tmp: Path) -> list[dict]:
    cases = []
    art = ws.root / "artifacts/enwiki-mini"

    def record(group, name, outcome, message=""):
        cases.append({"group": group, "case": name, "outcome": outcome, "message": str(message)[:300]})

    def overlay(name, text, names):
        (ws.root / "fixtures/edge.yaml").write_text(text)
        result = ws.snake(CHANG3, *TINY, "fixtures/edge.yaml", "-n", timeout=600)
        record("params", name, *bounded(classify_failure(result, names), result))

    overlay("a config file of nested aliases (billion laughs)", alias_bomb(), ["edge.yaml"])
    overlay("a key given twice in a config file", "bm25:\n  depth: 10\n  k1: 0.9\n  depth: 3\n", ["edge.yaml", "depth"])
    overlay("a NUL byte in profile_note", 'profile_note: "tiny\\0note"\n', ["edge.yaml", "profile_note"])
    overlay("a config file nested 20,000 levels deep", "bm25: " + "[" * 20000 + "]" * 20000 + "\n", ["edge.yaml"])
    (ws.root / "fixtures/edge.yaml").unlink()

    f = tmp / "edge"
    f.mkdir()
    claims = f / "bomb.claims.yaml"
    claims.write_text(alias_bomb("claims"))
    result = ws.stage("claims", "--claims", claims, "--schema", ws.root / "workflow/schemas/claims.schema.yaml",
                      "--table", f"table3={ws.root / CHANG3}", "--profile", "tiny", "--csv", f / "c.csv", "--json",
                      f / "c.json", timeout=600)
    record("input", "a claims file of nested aliases", *bounded(classify_failure(result, [str(claims)], [f / "c.csv"]),
                                                                result))

    # grades <= 0: a test query judged only -1 is no query to score
    beir = f / "beir"
    shutil.copytree(ws.root / "fixtures/beir-tiny", beir)
    (beir / "qrels/test.tsv").write_text((beir / "qrels/test.tsv").read_text() + "q5\td1\t-1\n")
    result = ws.stage("passages-beir", "--source", beir, "--seed", 13, "--out-dir", f / "b/collection", "--split-dir",
                      f / "b/split")
    test = (f / "b/split/test.tsv").read_text() if result.returncode == 0 else ""
    record("input", "BEIR: a test query judged only -1",
           ("silent wrong result", "kept, scored as a miss") if "q5\t" in test else
           ("handled", "left out and counted") if result.returncode == 0 else classify_failure(result, [str(beir)]))

    # byte-order marks
    def with_bom(name, args, bom_file):
        bom_file.write_bytes(b"\xef\xbb\xbf" + bom_file.read_bytes())
        result = ws.stage(*args)
        record("input", name, ("handled", "read as without it") if result.returncode == 0 else
               classify_failure(result, [str(bom_file)]))

    questions = f / "questions.tsv"
    shutil.copy(ws.root / "fixtures/tiny-questions.tsv", questions)
    with_bom("a byte-order mark in questions.tsv", ["reqa-wiki", "--articles", art / "corpus/articles.jsonl",
                                                    "--questions", questions, "--out-dir", f / "q"], questions)
    beir2 = f / "beir2"
    shutil.copytree(ws.root / "fixtures/beir-tiny", beir2)
    with_bom("a byte-order mark in BEIR qrels", ["passages-beir", "--source", beir2, "--seed", 13, "--out-dir",
                                                 f / "b2/collection", "--split-dir", f / "b2/split"],
             beir2 / "qrels/test.tsv")
    msmarco = f / "msmarco"
    shutil.copytree(ws.root / "fixtures/msmarco-tiny", msmarco)
    with_bom("a byte-order mark in an MS MARCO qrels file", [
        "passages-msmarco", "--source", msmarco, "--seed", 1, "--valid-fraction", 0.1, "--out-dir", f / "m/collection",
        "--split-dir", f / "m/split"], msmarco / "qrels.dev.small.tsv")

    # an artifact edited by hand after the build
    work = ws.clone(tmp / "edited")
    run = work / "artifacts/enwiki-mini/bm25/run.trec"
    run.write_text("".join(run.read_text().splitlines(keepends=True)[:-1]))
    result = ws.snake(CHANG3, *TINY, "--cores", 1, cwd=work)
    record("fault", "a BM25 run edited by hand after the build", *classify_failure(result, ["run.trec"]))
    shutil.rmtree(work, ignore_errors=True)

    # a small input the project owns, edited while the clock went back
    work = ws.clone(tmp / "clock-back")
    questions = work / "fixtures/tiny-questions.tsv"
    was = questions.stat()
    questions.write_text(questions.read_text().replace("?", " ?", 1))
    os.utime(questions, ns=(was.st_atime_ns, was.st_mtime_ns - 10**9))
    plan = ws.snake(CHANG3, *TINY, "-n", cwd=work)
    record("fault", "questions.tsv edited, its time moved back",
           ("silent wrong result", "nothing to be done after the edit") if "Nothing to be done" in plan.stdout else
           ("handled", "the edit replans the collection") if plan.returncode == 0 else
           classify_failure(plan, ["tiny-questions.tsv"]))
    shutil.rmtree(work, ignore_errors=True)

    # an input dated in the future
    work = ws.clone(tmp / "future")
    shutil.rmtree(work / "artifacts/enwiki-mini/corpus")
    future = time.time() + 3 * 86400
    os.utime(work / "fixtures/tiny-wiki.xml", (future, future))
    result = ws.snake("artifacts/enwiki-mini/corpus/stats.json", *TINY, "--cores", 1, cwd=work)
    outcome = classify_failure(result, ["tiny-wiki.xml"])
    if outcome[0] == "clear error" and "touch" not in outcome[1]:
        outcome = ("unclear error", outcome[1])   # names the file but not the fix
    record("fault", "an input dated in the future", *outcome)
    shutil.rmtree(work, ignore_errors=True)

    # a full disk: a table, a checkpoint, a Lucene index written where no space is left
    mount = full_disk(tmp)
    names = ["a table written to a full disk", "a checkpoint written to a full disk", "a Lucene index written to a full disk"]
    if mount is None:
        for name in names:
            record("fault", name, "harness error", "no tmpfs could be mounted (needs root)")
        return cases
    try:
        good = art / "eval/bm25/50-50/lucene.json"
        table = ws.stage("table", "--table", "table3", "--paper", ws.root / "data/papers/chang2020.csv", "--profile",
                         "tiny", "--dataset", "enwiki-mini", "--note", "n", "--metrics", "R@1", "--row",
                         chang_row(good), "--csv", mount / "t.csv", "--json", mount / "t.json")
        record("fault", names[0], *classify_failure(table, [str(mount / "t.csv"), str(mount / "t.json")], [mount / "t.csv"]))
        split = art / "splits/50-50"
        model = ws.stage("finetune", "--encoder", art / "encoders/random-l1", "--candidates", art / "collection/candidates.jsonl",
                         "--qrels", art / "collection/qrels.txt", "--train", split / "train.tsv", "--valid",
                         split / "valid.tsv", "--out", mount / "model", "--state-dir", f / "state", "--seed", 1, "--steps",
                         2, "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0.1, "--checkpoint-every", 1,
                         "--query-length", 16, "--doc-length", 32, "--embedding-dim", 8)
        record("fault", names[1], *classify_failure(model, [str(mount / "model")], [mount / "model"]))
        lucene = ws.stage("bm25-index", "--candidates", art / "collection/candidates.jsonl", "--index", mount / "index",
                          "--threads", 1)
        record("fault", names[2], *classify_failure(lucene, [str(mount / "index")], [mount / "index"]))
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
    return cases


# --- the whole run ------------------------------------------------------------------------------------------

CLASSES = ["clear error", "unclear error", "traceback", "silent wrong result", "injection executed", "partial output",
           "handled", "harness error"]


def summary(cases: list[dict]) -> dict:
    def count(group_filter):
        chosen = [c for c in cases if group_filter(c["group"])]
        return {"tried": len(chosen), **{k: sum(c["outcome"] == k for c in chosen) for k in CLASSES}}
    return {"bad_inputs": count(lambda g: g != "fault"), "faults": count(lambda g: g == "fault"),
            "all": count(lambda g: True)}


GROUPS = {"params": run_params, "input": input_cases, "fault": fault_cases, "edge": edge_cases}


def run(cores: int = 2, src: Path | None = None, groups=tuple(GROUPS), keep: Path | None = None) -> dict:
    """Build the tiny workspace from the checkout of `src` (default: this one; its workflow and src/ are
    snapshotted) and try every case. `keep`: a folder that holds (or will hold) the built workspace, reused."""
    began = time.time()
    with tempfile.TemporaryDirectory(prefix="towers-faults-") as name:
        tmp = Path(name)
        home = keep or tmp / "base"
        snapshot = home / "checkout" / "src"
        if not (home / "work" / CHANG3).exists():
            shutil.rmtree(home, ignore_errors=True)
            base = (src or ROOT / "src").parent
            shutil.copytree(base / "src", snapshot, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            for part in ("Snakefile", "params.yaml", "workflow", "data", "config", "profiles", "envs", "dvc.yaml",
                         "tests/fixtures"):
                (shutil.copytree if (base / part).is_dir() else shutil.copy)(base / part, snapshot.parent / part)
            build(home, snapshot, cores)
        ws = Workspace(home / "work", snapshot)
        built = round(time.time() - began, 1)
        cases = [case for group in groups for case in GROUPS[group](ws, tmp)]
    return {"configuration": "tests/fixtures/tiny.yaml", "base_build_seconds": built,
            "seconds": round(time.time() - began, 1), "counts": summary(cases), "cases": cases}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--src", type=Path, default=None, help="another checkout's src/ (e.g. an older commit's)")
    parser.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    parser.add_argument("--groups", default="params,input,fault,edge", help="which groups of cases, comma-separated")
    parser.add_argument("--keep", type=Path, default=None, help="build the workspace here once, and reuse it")
    args = parser.parse_args()
    result = run(args.cores, args.src, args.groups.split(","), args.keep)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps(result["counts"], indent=2))
