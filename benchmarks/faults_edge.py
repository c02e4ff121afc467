"""Fault cases, group "edge": nested aliases, keys given twice, a NUL in a params string, byte-order marks, an
artifact edited after the build, clocks moved back or forward, a full disk."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from .faults_harness import CHANG3, TINY, Workspace, bounded, chang_row, classify_failure


def alias_bomb(key: str = "bm25:\n  k1", levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + f"\n{key}: *a{levels}\n"


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
        table = ws.stage("chang2020-table", "--table", "table3", "--paper", ws.root / "data/papers/chang2020.csv",
                         "--profile", "tiny", "--note", "n", "--option", "dataset=enwiki-mini", "--option", "metrics=R@1",
                         "--row", chang_row(good), "--csv", mount / "t.csv", "--json", mount / "t.json")
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
