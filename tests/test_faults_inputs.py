"""Bad input that used to get through (issue 29): alias bombs, repeated keys, grades <= 0, edited artifacts,
small inputs tracked by time only, full disks, control characters, byte-order marks, deep config files and
inputs dated in the future. Each ends in one bounded line naming the file and key, or is handled."""
import errno
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from conftest import FIXTURES, ROOT, run_stage
from benchmarks.workflow_harness import copy_workflow

from towers.config.params_check import ParamsError, check, load_sources, merge_configs

SCHEMA = ROOT / "workflow/schemas/params.schema.yaml"
BOUND = 400   # characters of one error line: 300 of a quoted value and the words around it


def alias_bomb(levels: int = 9, key: str = "bm25:\n  k1") -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + f"\n{key}: *a{levels}\n"


def one_line(result, *names):
    text = result.stderr.strip()
    assert result.returncode == 1 and "\n" not in text and "Traceback" not in text, text[-2000:]
    assert len(text) < BOUND and all(str(n) in text for n in names), text
    return text


def params_error(*files) -> str:
    """The params check's line for params.yaml overlaid with `files`, as the Snakefile runs it."""
    with pytest.raises(ParamsError) as caught:
        sources = load_sources([ROOT / "params.yaml", *files])
        check(merge_configs(*(tree for _, tree in sources)), SCHEMA, sources)
    return str(caught.value)


# 1. nested aliases ("billion laughs"): refused before anything expands them, in one short line

def test_an_alias_bomb_in_a_config_file_is_refused_quickly_in_one_short_line(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    began = time.perf_counter()
    message = params_error(bomb)
    assert time.perf_counter() - began < 10
    assert message.startswith(f"{bomb}: bm25.k1") and "aliases expand" in message and len(message) < BOUND


def test_an_alias_bomb_in_a_claims_file_is_refused_in_one_short_line(tmp_path):
    claims = tmp_path / "x.claims.yaml"
    claims.write_text(alias_bomb(key="claims"))
    result = run_stage("claims", "--claims", claims, "--schema", ROOT / "workflow/schemas/claims.schema.yaml",
                       "--table", f"t={tmp_path / 'none.csv'}", "--profile", "tiny", "--csv", tmp_path / "c.csv",
                       "--json", tmp_path / "c.json")
    one_line(result, claims, "aliases expand")


def test_a_schema_message_quotes_at_most_300_characters_of_a_value(tmp_path):
    huge = tmp_path / "huge.yaml"
    huge.write_text(yaml.safe_dump({"bm25": {"k1": ["x" * 50] * 2000}}))   # 100 KB in one wrong-typed value
    message = params_error(huge)
    assert message.startswith(f"{huge}: bm25.k1: ") and len(message) < BOUND


# 2. a key given twice: refused, naming both lines

def test_a_repeated_key_in_a_config_file_is_refused(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text("bm25:\n  depth: 10\n  k1: 0.9\n  depth: 3\n")
    assert params_error(twice) == f"{twice}: bm25.depth: the key is given twice (lines 2 and 4); YAML keeps only one of them"


def test_a_repeated_key_in_a_claims_file_is_refused(tmp_path):
    claims = tmp_path / "x.claims.yaml"
    claims.write_text("paper: x\npaper: y\nclaims: []\n")
    from towers.io import StageError
    from towers.verdicts.claims import load_claims

    with pytest.raises(StageError, match="paper: the key is given twice"):
        load_claims(claims, ROOT / "workflow/schemas/claims.schema.yaml")


# 3. BEIR grades <= 0 are not relevant; a query with no relevant document is left out and counted

def test_a_beir_query_judged_only_not_relevant_is_dropped_and_counted(tmp_path):
    beir = shutil.copytree(FIXTURES / "beir-tiny", tmp_path / "beir")
    qrels = beir / "qrels/test.tsv"
    qrels.write_text(qrels.read_text() + "q5\td1\t-1\nq5\td2\t0\n")   # q5: judged, nothing relevant
    queries = [json.loads(l) for l in (beir / "queries.jsonl").read_text().splitlines()]
    assert "q5" in {q["_id"] for q in queries}
    out = tmp_path / "out"
    done = run_stage("passages-beir", "--source", beir, "--seed", 13, "--out-dir", out / "collection",
                     "--split-dir", out / "splits")
    assert done.returncode == 0, done.stderr
    test = {l.split("\t")[0] for l in (out / "splits/test.tsv").read_text().splitlines()}
    assert test == {"q1", "q3"}
    stats = json.loads((out / "collection/stats.json").read_text())
    assert stats["dropped_without_relevant"] == {"test": 1, "train": 0}
    assert "q5" not in (out / "collection/qrels.txt").read_text()


# 4. an artifact edited after it was written: the next stage that reads it stops, naming it

def _fused_and_judged(tmp_path):
    runs = []
    for name, order in (("a", [1, 2, 3]), ("b", [3, 2, 1])):
        runs.append(tmp_path / f"{name}.trec")
        runs[-1].write_text("".join(f"q{q} Q0 d{d} {r} {10 - r} {name}\n" for q in (1, 2) for r, d in enumerate(order, 1)))
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d3 1\n")
    (tmp_path / "test.tsv").write_text("q1\tfirst\nq2\tsecond\n")
    fused = tmp_path / "out/fused.trec"
    assert run_stage("fuse-runs", "--runs", *runs, "--method", "rrf", "--out", fused).returncode == 0
    return fused


def _evaluate(tmp_path, fused, out="e.json"):
    return run_stage("evaluate", "--run", fused, "--qrels", tmp_path / "qrels.txt", "--queries", tmp_path / "test.tsv",
                     "--metrics", "RR@10", "--out", tmp_path / out)


def test_a_stage_record_holds_a_digest_of_what_it_wrote(tmp_path):
    import hashlib

    fused = _fused_and_judged(tmp_path)
    meta = json.loads((tmp_path / "out/fused.trec.meta.json").read_text())
    assert meta["written"] == {"fused.trec": {"size": fused.stat().st_size,
                                             "sha256": hashlib.sha256(fused.read_bytes()).hexdigest()}}
    assert _evaluate(tmp_path, fused).returncode == 0
    assert json.loads((tmp_path / "e.json.meta.json").read_text())["inputs_checked"] == 1


def test_an_artifact_edited_after_it_was_written_is_refused_by_the_next_stage(tmp_path):
    fused = _fused_and_judged(tmp_path)
    lines = fused.read_text().splitlines(keepends=True)
    fused.write_text("".join(lines[:-1]))   # one line removed by hand
    result = _evaluate(tmp_path, fused)
    one_line(result, fused, "changed after stage fuse-runs wrote it", "delete it")
    assert not (tmp_path / "e.json").exists()
    fused.write_text("".join(lines).replace(" 1 ", " 9 ", 1))   # same size, other content
    one_line(_evaluate(tmp_path, fused), fused, "same size, other content")


def test_sampled_digest_of_a_large_file_sees_a_change_of_length_and_a_sampled_block(tmp_path, monkeypatch):
    from towers import digests

    monkeypatch.setattr(digests, "SAMPLED_FROM", 1 << 16)
    monkeypatch.setattr(digests, "BLOCK", 1 << 10)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1 << 20))
    before = digests.file_digest(big)
    assert set(before) == {"size", "sampled_sha256"}
    data = bytearray(big.read_bytes())
    data[0] ^= 1   # the first block is always sampled
    big.write_bytes(bytes(data))
    assert digests.file_digest(big) != before


def test_a_file_inside_an_output_folder_is_checked_against_its_stage_record(tmp_path):
    queries = tmp_path / "queries.tsv"
    queries.write_text("".join(f"q{i}\tquestion {i}\n" for i in range(10)))
    assert run_stage("split", "--queries", queries, "--train-fraction", 0.5, "--seed", 1,
                     "--out-dir", tmp_path / "s").returncode == 0
    test = tmp_path / "s/test.tsv"
    test.write_text(test.read_text() + "q99\textra\n")
    (tmp_path / "run.trec").write_text("q0 Q0 d0 1 1.0 t\n")
    (tmp_path / "qrels.txt").write_text("q0 0 d0 1\n")
    result = run_stage("evaluate", "--run", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.txt", "--queries", test,
                       "--metrics", "RR@10", "--out", tmp_path / "e.json")
    one_line(result, test, "changed after stage split wrote it")


# 5. small inputs the project owns: tracked by content, not only by time

@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    work = copy_workflow(tmp_path_factory.mktemp("work"))
    shutil.copytree(FIXTURES, work / "fixtures")
    return work


def snake(work, *args):
    return subprocess.run([sys.executable, "-m", "snakemake", *args, "--configfile", "fixtures/tiny.yaml"], cwd=work,
                          capture_output=True, text=True)


def test_an_edited_question_set_replans_even_when_its_time_goes_back(workflow):
    target = "artifacts/enwiki-mini/collection/stats.json"
    assert snake(workflow, target, "--cores", "1").returncode == 0
    questions = workflow / "fixtures/tiny-questions.tsv"
    was = questions.stat()
    questions.write_text(questions.read_text().replace("?", " ?", 1))
    os.utime(questions, ns=(was.st_atime_ns, was.st_mtime_ns - 10**9))   # a clock set back
    plan = snake(workflow, target, "-n")
    assert plan.returncode == 0 and "reqa" in plan.stdout and "Nothing to be done" not in plan.stdout, plan.stdout


# 6. a full disk: one line naming the output, whatever raised it

@pytest.mark.parametrize("fault", ["oserror", "library"])
def test_a_full_disk_is_one_line_naming_the_output(tmp_path, monkeypatch, fault):
    from towers import stages

    class SafetensorError(Exception):
        pass

    def full(args):
        if fault == "oserror":   # pandas' to_csv: errno 28, no file name
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                              "message: \"No space left on device\" })")

    stages.load_all()
    monkeypatch.setitem(stages.STAGES, "fuse-runs", (full, stages.STAGES["fuse-runs"][1]))
    out = tmp_path / "f.trec"
    result = run_stage("fuse-runs", "--runs", tmp_path / "a", tmp_path / "b", "--method", "rrf", "--out", out)
    one_line(result, out, "no space left on the device")


# 7. a control character in a params string: refused by the params check; no old record beside a new output

def test_a_nul_in_the_profile_note_is_refused(tmp_path):
    note = tmp_path / "note.yaml"
    note.write_text('profile_note: "tiny\\0note"\n')
    assert params_error(note) == f"{note}: profile_note: holds the control character '\\x00' in 'tiny\\x00note'"


def test_a_failed_stage_leaves_no_old_record_beside_its_output(tmp_path):
    fused = _fused_and_judged(tmp_path)
    fused.unlink()   # as Snakemake removes an output before its job reruns
    result = run_stage("fuse-runs", "--runs", tmp_path / "a.trec", tmp_path / "missing.trec", "--method", "rrf",
                       "--out", fused)
    assert result.returncode == 1 and not (tmp_path / "out/fused.trec.meta.json").exists()


# 8. byte-order marks at the start of a file are not part of its first field

def test_byte_order_marks_are_dropped(tmp_path):
    beir = shutil.copytree(FIXTURES / "beir-tiny", tmp_path / "beir")
    for name in ("qrels/test.tsv", "corpus.jsonl", "queries.jsonl"):
        (beir / name).write_bytes(b"\xef\xbb\xbf" + (beir / name).read_bytes())
    done = run_stage("passages-beir", "--source", beir, "--seed", 13, "--out-dir", tmp_path / "b/collection",
                     "--split-dir", tmp_path / "b/splits")
    assert done.returncode == 0, done.stderr
    msmarco = shutil.copytree(FIXTURES / "msmarco-tiny", tmp_path / "msmarco")
    for path in msmarco.iterdir():
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    done = run_stage("passages-msmarco", "--source", msmarco, "--seed", 1, "--valid-fraction", 0.1,
                     "--out-dir", tmp_path / "m/collection", "--split-dir", tmp_path / "m/splits")
    assert done.returncode == 0, done.stderr
    from towers.datasets.reqa import read_questions

    questions = tmp_path / "questions.tsv"
    questions.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "tiny-questions.tsv").read_bytes())
    assert read_questions(questions) == read_questions(FIXTURES / "tiny-questions.tsv")


# 9. a config file nested too deep: refused by the project's loader (Snakemake's own reader of --configfile
#    runs before the Snakefile; docs/workflow.md, troubleshooting)

def test_a_deeply_nested_config_file_is_refused_by_the_loader(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("bm25: " + "[" * 20000 + "]" * 20000 + "\n")
    from towers.config.params_check import read_yaml

    with pytest.raises(ParamsError, match="nested more than 64 levels deep") as caught:
        read_yaml(deep)
    assert str(caught.value).startswith(f"{deep}: bm25") and len(str(caught.value)) < BOUND


# 10. an input dated in the future: named, with the fix, before any job runs

def test_an_input_dated_in_the_future_is_named_with_its_fix(workflow):
    dump = workflow / "fixtures/tiny-wiki.xml"
    shutil.rmtree(workflow / "artifacts/enwiki-mini/corpus", ignore_errors=True)
    future = time.time() + 3 * 86400
    os.utime(dump, (future, future))
    try:
        result = snake(workflow, "artifacts/enwiki-mini/corpus/stats.json", "--cores", "1")
    finally:
        os.utime(dump, None)
    assert result.returncode != 0
    assert "error: fixtures/tiny-wiki.xml: modified in the future" in result.stderr
    assert "touch fixtures/tiny-wiki.xml" in result.stderr and "clock skew" not in result.stderr
    assert not (workflow / "artifacts/enwiki-mini/corpus/stats.json").exists()
