"""RepBERT's tables and figures (results/repbert/): reproduced values beside the paper's.

table1: first-stage retrieval, RR@10 (the paper's MRR@10) and R@1000 on the dev queries and measured latency;
table2: reranking RR@10 at each depth for each first-stage run;
table3/table4: run fusion (alternating merge, eq. 6, and beyond the paper RRF and CombSUM), RR@10 and
R@1000, with R@2000 of the untruncated merge;
figure1: recall at depths per first-stage run, and reranking RR@10 by depth;
figure2: the consistency factor C(f, n) (eq. 5) against BM25's top 1000, by depth."""
from __future__ import annotations

import pandas as pd

from ..io import read_json
from ..verdicts.cells import cell, query_samples
from .common import Layout, metric, paper_value, read_paper

def table1(rows: list[dict], paper_csv, table: str, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: {'method', 'eval', 'latency'}."""
    paper = read_paper(paper_csv, dtype=str)
    records, twin, cells, hardware = [], {"table": "table1", "profile": profile, "rows": {}}, [], []
    for row in rows:
        latency = read_json(row["latency"])
        hw = latency["hardware"]
        record = {"method": row["method"], "profile": profile, "queries": read_json(row["eval"])["queries"]}
        for name in ("RR@10", "R@1000"):
            record[name] = round(metric(row["eval"], name), 4)
            record[f"{name} paper"] = paper_value(paper, "table1", method=row["method"], metric=name)
            cells.append(cell({"method": row["method"]}, name, record[name], record[f"{name} paper"],
                              query_samples([row["eval"]], name)))
        record["ms/query"] = latency["ms_per_query"]
        record["ms/query paper"] = paper_value(paper, "table1", method=row["method"], metric="ms/query")
        cells.append(cell({"method": row["method"]}, "ms/query", record["ms/query"], record["ms/query paper"],
                          {"kind": "latency", "file": str(row["latency"])}, kind="timing"))
        hardware.append(f"{row['method']} on {hw['cpu']} ({hw['threads']} thread(s), {hw['device']})")
        records.append(record)
        twin["rows"][row["method"]] = {k: record[k] for k in ("RR@10", "R@1000", "ms/query")}
    frame = pd.DataFrame(records)
    frame["note"] = (f"{note}; latency: one query at a time, encode + search, model and index loaded; "
                     + "; ".join(hardware))
    return frame, twin, cells


def table2(rows: list[dict], paper_csv, table: str, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: {'method', 'depth', 'eval'} for the reranked runs."""
    paper = read_paper(paper_csv, dtype=str)
    records, twin, cells = [], {"table": "table2", "profile": profile, "rows": {}}, []
    for row in rows:
        value = round(metric(row["eval"], "RR@10"), 4)
        records.append({"first stage": row["method"], "depth": int(row["depth"]), "profile": profile,
                        "RR@10": value,
                        "RR@10 paper": paper_value(paper, "table2", method=row["method"], depth=row["depth"])})
        twin["rows"][f"{row['method']}/{row['depth']}"] = {"RR@10": value}
        cells.append(cell({"first stage": row["method"], "depth": row["depth"]}, "RR@10", value,
                          records[-1]["RR@10 paper"], query_samples([row["eval"]], "RR@10")))
    frame = pd.DataFrame(records)
    frame["note"] = note + "; reranker: a cross-encoder over the first-stage run's top-k"
    return frame, twin, cells


def fusion_table(rows: list[dict], paper_csv, table: str, profile: str,
                 note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Tables 3 (RR@10) and 4 (R@1000): rows {'first', 'second', 'fusion', 'eval'}; a single run has
    second '' and fusion 'none'; the untruncated alternating merge adds R@2000 ('union')."""
    paper = read_paper(paper_csv, dtype=str)
    name = {"table3": "RR@10", "table4": "R@1000"}[table]
    alone = {r["first"]: metric(r["eval"], name) for r in rows if r["fusion"] == "none"}
    records, twin, cells = [], {"table": table, "profile": profile, "metric": name, "rows": {}}, []
    for row in rows:
        measure = "R@2000" if row["fusion"] == "union" else name
        value = metric(row["eval"], measure)
        record = {"first": row["first"], "second": row["second"], "fusion": row["fusion"], "profile": profile,
                  measure: round(value, 4),
                  f"{measure} paper": paper_value(paper, table, first=row["first"], second=row["second"] or "-")
                  if row["fusion"] in ("none", "alternate") else None,
                  "vs first alone (%)": round(100 * (value / alone[row["first"]] - 1), 1) if alone.get(row["first"]) else None}
        records.append(record)
        twin["rows"]["/".join(x for x in (row["fusion"], row["first"], row["second"]) if x)] = {measure: record[measure]}
        cells.append(cell({k: row[k] for k in ("first", "second", "fusion")}, measure, record[measure],
                          record[f"{measure} paper"], query_samples([row["eval"]], measure)))
    frame = pd.DataFrame(records)
    frame = frame[[c for c in frame.columns if c != "vs first alone (%)"] + ["vs first alone (%)"]]
    frame["note"] = note + "; vs first alone: the change against the first run's own value; alternate = RepBERT eq. 6 (interleave, drop later duplicates, top 1000); union = " \
                           "the same without truncation; rrf k=60; combsum over min-max normalised scores"
    return frame, twin, cells


FUSION = Layout(("first", "second", "fusion", "eval"), fusion_table, may_be_empty=("second",))
LAYOUTS = {"table1": Layout(("method", "eval", "latency"), table1), "table2": Layout(("method", "depth", "eval"), table2),
           "table3": FUSION, "table4": FUSION}


def recall_curve(rows: list[dict], depths: list[int]) -> pd.DataFrame:
    """Figure 1a: R@k of each first-stage run; rows {'method', 'eval'}."""
    return pd.DataFrame([{"method": r["method"], "depth": k, "recall": round(metric(r["eval"], f"R@{k}"), 4)}
                         for r in rows for k in depths])


def curve_cells(frame: pd.DataFrame, column: str, samples) -> list[dict]:
    """A figure's points as cells: rows {method, depth}; `samples(method, depth)` says where each point's
    per-query values are."""
    return [cell({"method": r["method"], "depth": int(r["depth"])}, column, None if pd.isna(r[column]) else float(r[column]),
                 samples=samples(r["method"], int(r["depth"]))) for _, r in frame.iterrows()]
