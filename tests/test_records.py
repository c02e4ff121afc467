"""Stage records (`<output>.meta.json`) that are damaged or edited: the changed-after-written guard needs them whole,
and the verdicts take their numbers from the tables, not from the records."""
import json

from conftest import run_stage

from towers.digests import Records


def _stderr_line(result) -> str:
    text = result.stderr.strip()
    assert result.returncode == 1 and "Traceback" not in text and "\n" not in text, text[-2000:]
    return text


def _fused(tmp_path):
    runs = []
    (tmp_path / "out").mkdir()
    for name, order in (("a", [1, 2, 3]), ("b", [3, 2, 1])):
        runs.append(tmp_path / f"out/{name}.trec")   # beside the fused run: its record is a candidate
        runs[-1].write_text("".join(f"q{q} Q0 d{d} {r} {10 - r} {name}\n" for q in (1, 2) for r, d in enumerate(order, 1)))
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d3 1\n")
    (tmp_path / "test.tsv").write_text("q1\tfirst\nq2\tsecond\n")
    fused = tmp_path / "out/fused.trec"
    assert run_stage("fuse-runs", "--runs", *runs, "--method", "rrf", "--out", fused).returncode == 0
    return runs, fused


def _evaluate(tmp_path, run):
    return run_stage("evaluate", "--run", run, "--qrels", tmp_path / "qrels.txt", "--queries", tmp_path / "test.tsv",
                     "--metrics", "RR@10", "--out", tmp_path / "e.json")


def test_a_truncated_record_stops_the_stage_that_reads_its_output(tmp_path):
    """A run with a line deleted and its record truncated: before, the record was skipped and the run evaluated."""
    runs, fused = _fused(tmp_path)
    record = tmp_path / "out/fused.trec.meta.json"
    fused.write_text("".join(fused.read_text().splitlines(keepends=True)[:-1]))
    record.write_text(record.read_text()[:40])
    assert _stderr_line(_evaluate(tmp_path, fused)).startswith(
        f"error: {record}: unreadable stage record (not complete JSON: ")
    assert _stderr_line(_evaluate(tmp_path, fused)).endswith(f"; rebuild {tmp_path / 'out/fused.trec'}")
    assert not (tmp_path / "e.json").exists()
    record.write_text("")   # truncated to nothing
    assert _stderr_line(_evaluate(tmp_path, fused)) == (
        f"error: {record}: unreadable stage record (not complete JSON: Expecting value: line 1 column 1 (char 0)); "
        f"rebuild {tmp_path / 'out/fused.trec'}")
    record.write_text("[]")
    assert _stderr_line(_evaluate(tmp_path, fused)) == (
        f"error: {record}: unreadable stage record (not a stage record); rebuild {tmp_path / 'out/fused.trec'}")
    # a record beside the input (another output of its folder) may list it too: needed as well
    record.unlink()
    other = tmp_path / "out/other.trec.meta.json"
    other.write_text("{")
    assert _stderr_line(_evaluate(tmp_path, fused)).startswith(f"error: {other}: unreadable stage record")
    # the output a stage is rebuilding may have a damaged record of its own: the stage replaces it
    other.unlink()
    record.write_text("{")
    assert run_stage("fuse-runs", "--runs", *runs, "--method", "rrf", "--out", fused).returncode == 0
    assert _evaluate(tmp_path, fused).returncode == 0
    assert json.loads((tmp_path / "e.json.meta.json").read_text())["inputs_checked"] == 1


def test_a_record_replaced_beside_the_input_while_read_is_passed_over(tmp_path):
    """check-cells lists results/ while the claims job rewrites its record there (a race seen in a build)."""
    table = tmp_path / "table1.csv"
    table.write_text("a\n1\n")
    beside = tmp_path / "claims.csv.meta.json"
    beside.write_text("{}")
    records = Records()
    assert beside in records.candidates(table)
    beside.unlink()   # the other job removes its old record before it writes the new one
    assert records.meta(beside) == {}
    assert records.find(table) is None
