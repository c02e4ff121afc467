"""Tables as the papers print them: one row a condition, fixed decimals, one name per measure, the note and what
every row shares said once (in the record; the JSON twin holds numbers only), and a layout that `column -s, -t` keeps in one screen."""
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from towers.reports import papers as paper_list
from towers.reports.common import SCREEN, decimals, layout_problems, non_numbers, printed, read_table, wide_again
from towers.verdicts.cells import disagreement

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = paper_list.tables(paper_list.load(root=ROOT)) + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "results/zeroshot").glob("*.csv"))


def test_decimals_follow_the_papers_precision():
    assert decimals("R@10", percent=True) == 2 and decimals("R@10 paper", percent=True) == 2
    assert decimals("RR@10", percent=False) == 3 and decimals("nDCG@10 paper", percent=False) == 3
    assert decimals("R@100 5-95", percent=True) == 2 and decimals("quality RR@10", percent=False) == 3
    assert decimals("R@1 p", percent=True) is None and decimals("R@1 sd", percent=True) == 2
    assert decimals("queries", percent=True) == 0 and decimals("avg doc tokens paper", percent=True) == 2
    assert decimals("model", percent=True) is None


def cells_of(rows, columns, kind="metric"):
    return [{"row": r, "column": c, "kind": kind} for r in rows for c in columns]


def test_a_column_every_row_shares_is_said_once_and_measures_stay():
    frame = pd.DataFrame({"split": ["5-95", "5-95"], "model": ["A", "B"], "profile": ["mini", "mini"],
                          "queries": [673, 673], "R@1": [0.0, 0.0], "R@1 paper": [1.0, 1.0], "steps": [200, 200]})
    cells = cells_of([{"split": "5-95", "model": m} for m in "AB"], ["R@1"]) + \
        cells_of([{"split": "5-95", "model": m} for m in "AB"], ["steps"], kind="count")
    shown, context = printed(frame, cells, percent=True)
    # a measure stays even where every row has the same value, and so does the paper's beside it
    assert list(shown.columns) == ["model", "R@1", "R@1 paper"]
    assert context == {"split": "5-95", "profile": "mini", "queries": 673, "steps": 200}
    assert shown["R@1"].tolist() == ["0.00", "0.00"] and shown["R@1 paper"].tolist() == ["1.00", "1.00"]
    # the cells still find themselves: labels and counts in the context, values at their printed precision
    cell = {"row": {"split": "5-95", "model": "B"}, "column": "R@1", "value": 0.004, "paper": 1.0}
    assert disagreement(shown, cell, context) == ""
    assert "is 0.006 here but 0.00" in disagreement(shown, {**cell, "value": 0.006}, context)
    assert "split=1-99" in disagreement(shown, {**cell, "row": {"split": "1-99", "model": "B"}}, context)
    assert disagreement(shown, {"row": {"model": "A"}, "column": "steps", "value": 200}, context) == ""
    assert "is 300 here" in disagreement(shown, {"row": {"model": "A"}, "column": "steps", "value": 300}, context)
    # one row: only the profile can be told shared
    one, kept = printed(frame.head(1), cells[:1], percent=True)
    assert kept == {"profile": "mini"} and "split" in one and "queries" in one


def test_a_paper_column_no_row_has_is_not_printed():
    frame = pd.DataFrame({"model": ["A", "B"], "R@1000": [0.5, 0.6], "R@1000 paper": [0.9, None],
                          "R@2000": [0.7, 0.8], "R@2000 paper": [None, None]})
    cells = cells_of([{"model": m} for m in "AB"], ["R@1000", "R@2000"])
    shown, _ = printed(frame, cells, percent=False)
    assert list(shown.columns) == ["model", "R@1000", "R@1000 paper", "R@2000"]
    assert shown["R@1000 paper"].tolist() == ["0.900", ""]


def test_fractions_beside_published_values_print_four_decimals():
    frame = pd.DataFrame({"model": ["bm25", "minilm"], "nDCG@10": [0.67891, 0.6412], "nDCG@10 published": [0.6789, None],
                          "R@100": [0.92531, 0.9]})
    shown, _ = printed(frame, cells_of([{"model": m} for m in ("bm25", "minilm")], ["nDCG@10", "R@100"]), percent=False)
    assert shown["nDCG@10"].tolist() == ["0.6789", "0.6412"] and shown["nDCG@10 published"].tolist() == ["0.6789", ""]
    assert shown["R@100"].tolist() == ["0.9253", "0.9000"]
    plain, _ = printed(frame.drop(columns="nDCG@10 published"), cells_of([{"model": "bm25"}, {"model": "minilm"}],
                                                                        ["nDCG@10"]), percent=False)
    assert plain["nDCG@10"].tolist() == ["0.679", "0.641"]


def test_a_cell_holding_a_comma_is_refused():
    frame = pd.DataFrame({"method": ["LTRe, index flat", "ANCE"], "RR@10": [0.1, 0.2]})
    with pytest.raises(ValueError, match="column 'method' holds a comma"):
        printed(frame, cells_of([{"method": "ANCE"}], ["RR@10"]), percent=False)


def test_layout_problems_name_what_breaks_the_layout(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text('method,margin,test_queries,MRR@10,RR@10,note\nA,0.1,3,0.25,0.25,"long, note"\n'
                   'B,1,3,0.25,0.3,"long, note"\n')
    problems = layout_problems(bad)
    assert "column 'note' repeats what the record says once" in problems
    assert "column 'MRR@10' is spelt 'RR@10' elsewhere" in problems and "column 'test_queries' has an underscore" in problems
    assert "row 2 holds a comma" in problems and "column 'RR@10' is printed with [1, 2] decimals" in problems
    assert not any("margin" in p for p in problems)   # a label prints as it is named
    good = tmp_path / "good.csv"
    good.write_text("method,RR@10\nA,0.250\nB,0.300\n")
    assert layout_problems(good) == [] and layout_problems(good, width=5) == [
        "13 characters wide in `column -s, -t` (at most 5)"]


@pytest.mark.parametrize("table", COMMITTED)
def test_every_committed_table_reads_like_the_papers(table):
    path = ROOT / table
    assert layout_problems(path) == [], table
    twin = json.loads(path.with_suffix(".json").read_text())
    record = json.loads(Path(f"{path}.meta.json").read_text())
    assert list(twin) == ["rows"] and not non_numbers(twin)   # the text lives in the record alone
    assert record["note"].startswith(("embedded default", "zero-shot")) and record["context"]["profile"] == "mini"
    assert record["labels"]["profile"] == "mini"
    assert record["labels"]["table"] == ("zeroshot" if table.startswith("results/zeroshot/") else path.stem)
    full = read_table(path)   # the shared columns put back for a reader who wants them, a long table wide
    rows = pd.read_csv(path)
    assert set(record["context"]) <= set(full.columns)
    assert len(full) == (len(rows) if "measure" not in rows else len(rows.drop(columns=["measure", "value", "paper"])
                                                                          .drop_duplicates()))


@pytest.mark.skipif(not shutil.which("column"), reason="no `column` here (util-linux)")
def test_column_keeps_the_widest_committed_table_in_one_screen():
    widest = max((ROOT / t for t in COMMITTED), key=lambda p: max(map(len, p.read_text().splitlines())))
    shown = subprocess.run(["column", "-s", ",", "-t", str(widest)], capture_output=True, text=True, check=True)
    lines = shown.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= SCREEN and len(lines) == len(pd.read_csv(widest)) + 1


def wide_frame():
    """Two rows, eight measures with the paper's beside each: wider than a screen."""
    measures = [f"Success@{k}" for k in (1, 5, 10, 20, 50, 100, 200, 500)]
    frame = pd.DataFrame({"split": ["1-99", "1-99"], "encoder": ["Transformer", "BoW-MLP"], "queries": [701, 701]})
    for i, m in enumerate(measures):
        frame[m] = [10.0 + i, 20.0 + i]
        frame[f"{m} paper"] = [30.0 + i, None]
    return frame, measures


def test_a_table_wider_than_a_screen_is_printed_a_row_a_measure():
    frame, measures = wide_frame()
    cells = [{"row": {"split": "1-99", "encoder": e}, "column": m, "value": v, "paper": p, "kind": "metric"}
             for e, values in (("Transformer", frame.iloc[0]), ("BoW-MLP", frame.iloc[1]))
             for m in measures for v, p in [(values[m], None if pd.isna(values[f"{m} paper"]) else values[f"{m} paper"])]]
    cells += [{"row": {"split": "1-99", "encoder": e}, "column": "queries", "value": 701, "kind": "count"}
              for e in ("Transformer", "BoW-MLP")]
    shown, context = printed(frame, cells, percent=True)
    # labels and a count without a paper value stay columns; each measure a row, the paper's value beside it
    assert list(shown.columns) == ["encoder", "measure", "value", "paper"] and context["queries"] == 701
    assert len(shown) == 16 and shown["measure"].tolist()[:2] == ["Success@1", "Success@5"]
    assert shown.iloc[0][["value", "paper"]].tolist() == ["10.00", "30.00"] and shown.iloc[8]["paper"] == ""
    assert all(disagreement(shown, c, context) == "" for c in cells)
    assert "is 12.0 here" in disagreement(shown, {**cells[0], "value": 12.0}, context)
    assert "paper value 31.0" in disagreement(shown, {**cells[0], "paper": 31.0}, context)
    # the report and read_table lay it out wide again, as the paper prints it
    wide = wide_again(shown)
    assert list(wide.columns[:4]) == ["encoder", "Success@1", "Success@1 paper", "Success@5"]
    assert wide["Success@1"].tolist() == ["10.00", "20.00"] and wide["Success@1 paper"].tolist() == ["30.00", ""]


def test_a_long_table_is_held_to_each_measures_decimals(tmp_path):
    long = tmp_path / "long.csv"
    long.write_text("method,measure,value,paper\nA,memory GB,0.003835,4.2\nA,RR@10,0.142,0.329\n"
                    "B,memory GB,0.001775,26.0\nB,RR@10,0.14,0.329\n")
    assert layout_problems(long) == ["column 'value' is printed with [2, 3] decimals for RR@10"]


def test_ltre_table3_prints_the_papers_units():
    assert decimals("memory GB", percent=False) == 6 and decimals("memory GB paper", percent=False) == 1
    assert decimals("train hours", percent=False) == 5 and decimals("train hours paper", percent=False) == 1


# Every measure a committed table names, and what it counts: one name, one measure (ir-measures' names).
NAMES = {"Success": "a query is found when any relevant document is in its top k (ReQA's Recall@k)",
         "R": "the share of a query's relevant documents in its top k",
         "RR": "the reciprocal rank of the first relevant document within the top k (the papers' MRR@10)",
         "nDCG": "graded discounted cumulative gain at k, normalised"}
NOTES = {"Success": "Success@k (ir-measures): a query counts as found when any",
         "R": "R@k (ir-measures): the share of a query's relevant documents"}


def test_one_name_a_measure_in_every_committed_table():
    """A measured column's name is one of NAMES, and a table that prints Success@k or R@k says in its note which
    it counts; a question-set table (ReQA's recall, Chang et al.'s and zero-shot) prints Success@k, never R@k."""
    import re

    for table in COMMITTED:
        record = json.loads(Path(f"{ROOT / table}.meta.json").read_text())
        names = {m[2] for c in record["cells"] if c["kind"] == "metric"
                 if (m := re.match(r"^(quality )?(\w+)@\d+", c["column"]))}
        assert names <= set(NAMES), (table, names - set(NAMES))
        for name in names & set(NOTES):
            assert NOTES[name] in record["note"], (table, name)
        if table.startswith(("results/chang2020/table", "results/zeroshot/enwiki-mini")) and names:
            assert "Success" in names and "R" not in names, table
