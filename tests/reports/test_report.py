"""The report: tables laid out like the paper's, cells the check flags, claims with their verdicts."""
import json
import re

import pandas as pd

from towers.reports import page as report


def write_table(tmp_path, name="t.csv"):
    path = tmp_path / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("model,R@1,R@1 sd,R@1 paper,R@10,R@10 paper\n"
                    "A,8.30,2.40,1.13,16.30,5.28\n"
                    "B,7.50,2.70,6.28,15.20,9.59\n")
    cells = [{"row": {"split": "5-95", "model": m}, "column": c, "value": v, "kind": "metric", "paper": p}
             for m, values in (("A", (8.3, 16.3, 1.13, 5.28)), ("B", (7.5, 15.2, 6.28, 9.59)))
             for c, v, p in (("R@1", values[0], values[2]), ("R@10", values[1], values[3]))]
    (path.parent / f"{name}.meta.json").write_text(json.dumps({
        "cells": cells, "note": "profile words; test: wilcoxon", "context": {"profile": "mini", "split": "5-95"}}))
    return path


def test_each_cell_shows_the_value_its_spread_and_the_papers(tmp_path):
    path = write_table(tmp_path)
    block = report.table_block(path, {("t", "split=5-95; model=B", "R@10"): "FAIL"}, "profile words")
    # one cell: reproduced ± std (paper), as the table prints them; the helper columns are gone
    assert '8.30 ± 2.40 <span class="paper">(1.13)</span>' in block
    assert "R@1 paper" not in block.split("<details>")[0]
    # the caption: what every row shares (the profile aside) and the note's own part, once
    assert block.count("test: wilcoxon") == 1 and "every row: split 5-95; test: wilcoxon" in block
    assert "profile words" not in block and "mini" not in block
    shaded = re.findall(r'<td class="n" style="([^"]+)">([^<]+)<', block)
    assert shaded == [("background:#f6c9c9;font-weight:bold", "15.20 ")]   # only the cell the check failed
    assert "data:image/png;base64," in block   # reproduced against paper values
    assert "<details><summary>raw CSV" in block


def test_claims_block_leads_with_the_verdict(tmp_path):
    claims = pd.DataFrame([
        {"paper": "p", "claim": "p-1", "statement": "A beats B", "source": "Table 1", "part": "t, R@1",
         "verdict": "holds", "claim verdict": "holds", "claim parts": "1 holds", "higher": "A", "lower": "B",
         "value higher": 8.3, "value lower": 7.5, "p (Holm)": 0.001},
        {"paper": "p", "claim": "p-2", "statement": "B beats A", "source": "Table 1", "part": "t, R@1",
         "verdict": "contradicted", "claim verdict": "contradicted", "claim parts": "1 contradicted",
         "higher": "B", "lower": "A", "value higher": 7.5, "value lower": 8.3, "p (Holm)": 0.002}])
    block = report.claims_block(claims)
    rows = block.split("<tr><td><span class=")[1:]   # one a claim (its comparisons fold inside)
    assert "#e3f4e6" in rows[0] and ">holds<" in rows[0] and "A beats B" in rows[0]
    assert "#c0392b" in rows[1] and ">contradicted<" in rows[1]
    assert "A 8.3 vs B 7.5; p (Holm) 0.001" in rows[0]


def test_claim_details_print_numbers_as_the_tables_do():
    claims = pd.DataFrame([{"paper": "p", "claim": "p-1", "statement": "A beats B", "source": "Table 1",
                            "part": "t, R@1", "verdict": "holds", "claim verdict": "holds", "claim parts": "1 holds",
                            "higher": "A", "lower": "B", "value higher": 8.3, "value lower": 7.5, "n": 701.0,
                            "p": 3.014e-144, "p (Holm)": 0.0123456}])
    detail = report.claims_block(claims).split("<details>")[1]
    assert "<td>701</td>" in detail and "<td>3e-144</td>" in detail and "<td>0.012</td>" in detail
    assert "e+" not in detail and "701.0" not in detail and "3.014000e-144" not in detail


def test_a_paper_column_without_a_value_column_of_its_own_is_shown():
    table = pd.DataFrame({"method": ["flat"], "index bytes": ["3835040"], "memory GB paper": ["4.2"],
                          "RR@10": ["0.142"], "RR@10 paper": ["0.329"]})
    layout = report.paper_layout(table, lambda i, c: "")
    assert "<th>memory GB paper</th>" in layout and "4.2" in layout
    assert "<th>RR@10 paper</th>" not in layout and '0.142 <span class="paper">(0.329)</span>' in layout


def test_the_page_opens_with_its_commit_and_the_timed_build(tmp_path):
    record = tmp_path / "results.json"
    record.write_text(json.dumps({"reproduce": {"commit": "abc1234", "date": "2026-11-29", "cores": 2,
                                                "clean_run_seconds": 6069.0}}))
    line = report.build_line(str(record))
    assert "from commit" in line and "UTC" in line
    assert "The complete build of commit abc1234 (2026-11-29) took 101.2 minutes on 2 cores" in line
    assert "complete build" not in report.build_line("")
    assert all(f">{v}<" in report.legend() for v in report.VERDICT_STYLE)


def test_the_rule_graph_is_drawn_either_way(tmp_path, monkeypatch):
    dot = 'digraph snakemake_dag {\n    0[label = "all"];\n    1[label = "table"];\n    1 -> 0\n}\n'
    monkeypatch.setattr(report.shutil, "which", lambda name: None)
    assert report.draw_rulegraph(dot, tmp_path / "a.png").startswith("networkx")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_each_paper_counts_the_cells_of_the_tables_it_declares():
    """Which tables are a paper's comes from the report rule (data/papers/papers.yaml), not from their names: a
    paper's table at results/ top level counts as its own, and a table of no paper counts for none."""
    papers = [{"id": "p", "title": "Paper P", "tables": ["results/p/table1.csv"], "figures": ["results/p/figure1.png"]},
              {"id": "q", "title": "Paper Q", "tables": ["results/table1.csv"], "figures": []}]
    assert report.owners(papers) == {"p/table1": "p", "p/figure1": "p", "table1": "q"}
    claims = pd.DataFrame([{"paper": "q", "claim": "q-1", "claim verdict": "holds"}])
    check = pd.DataFrame({"table": ["table1", "table1", "p/figure1", "zeroshot/x"], "status": ["OK", "FAIL", "OK", "OK"]})
    block = report.summary_block(claims, check, papers)
    rows = block.split("<tr>")[2:]
    assert "Paper P" in rows[0] and rows[0].endswith("<td>1 OK</td></tr>")
    assert "Paper Q" in rows[1] and "<td>1 OK, 1 FAIL</td>" in rows[1] and "<td class='n'>1</td>" in rows[1]
