"""Chang et al. 2020's tables (results/chang2020/): the pre-training pairs (Table 1), the ReQA collections
(Table 2), the main and open-domain results (Tables 3, 4, 6: one row per split, encoder and pre-training)
and the ablation (Table 5); reproduced values beside the paper's."""
from __future__ import annotations

import pandas as pd

from ..io import StageError, read_json
from ..verdicts.cells import cell, count_text, query_samples
from .common import LABELS, Layout, Option, labels, measure_names, paper_values, read_paper

KEY = ["split", "encoder", "pretraining"]


def build_table(rows: list[dict], paper_csv, table: str, profile: str, note: str, *, dataset: str,
                metrics: list[str]) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: {'split','encoder','pretraining','eval': path to an evaluation JSON}.

    Metrics are reported in percent, like the paper, each under the ir-measures name it was computed as
    (measure_names: ReQA's R@k is Success@k); the paper's value sits in '<name> paper'."""
    paper = paper_values(paper_csv, table).set_index(KEY)
    names = measure_names([row["eval"] for row in rows], metrics)
    records, twin, cells = [], {"table": table, "profile": profile, "dataset": dataset, "rows": {}}, []
    for row in rows:
        result = read_json(row["eval"])
        record = {k: row[k] for k in KEY}
        record.update(profile=profile, dataset=dataset, queries=result["queries"])
        key = (row["split"], row["encoder"], row["pretraining"])
        twin_row = {}
        for metric in metrics:
            value, name = round(100 * result["metrics"][metric], 2), names[metric]
            record[name] = value
            record[f"{name} paper"] = paper.loc[key, metric] if key in paper.index and metric in paper else None
            twin_row[name] = value
            cells.append(cell({k: row[k] for k in KEY}, name, value, record[f"{name} paper"],
                              query_samples([row["eval"]], metric, 100)))
        records.append(record)
        twin["rows"]["/".join(key)] = twin_row
    frame = pd.DataFrame(records)
    frame["note"] = note   # said once, in the record (stages.tables.write_table)
    return frame, twin, cells


PAIR_COLUMNS = {"pairs": "pairs", "tokens": "tokens", "avg_query_tokens": "avg query tokens",
                "avg_doc_tokens": "avg doc tokens"}


def pairs_table(rows: list[dict], paper_csv, table: str, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Chang et al. Table 1: one row per pre-training task (rows: {'stats': its pretraining-pairs statistics}),
    each statistic beside the paper's."""
    stats = [read_json(row["stats"]) for row in rows]
    paper = read_paper(paper_csv)
    if "task" not in paper:
        raise StageError(paper_csv, "no 'task' column")
    paper = paper.set_index("task")
    records, twin, cells = [], {"table": "table1", "profile": profile, "rows": {}}, []
    for s in stats:
        task = s["task"].upper()
        record = {"task": task, "profile": profile}
        for key, label in PAIR_COLUMNS.items():
            record[label] = round(s[key], 2)
            value = paper.loc[task, key] if task in paper.index else None
            value = None if value is None else int(value) if key in ("pairs", "tokens") else float(value)
            # printed as the paper prints its counts (50.2M pairs, 11.2B tokens); the cell keeps the number
            record[f"{label} paper"] = count_text(value) if key in ("pairs", "tokens") else value
            cells.append(cell({"task": task}, label, record[label], value, kind="count"))
        records.append(record)
        twin["rows"][task] = {label: record[label] for label in PAIR_COLUMNS.values()}
    frame = pd.DataFrame(records)
    frame["note"] = note
    return frame, twin, cells


REQA_COLUMNS = {"queries": "queries", "candidates": "candidates", "tuples": "tuples",
                "avg_query_tokens": "query tokens", "avg_doc_tokens": "doc tokens"}


REQA_COUNTS = ("queries", "candidates", "tuples")


REQA_DOC_TOKENS_NOTE = ("query tokens, doc tokens: averages, in WordPiece of the dataset's tokenizer (the profile's"
                        " vocabulary), no special tokens; doc tokens = sentence + paragraph tokens of each candidate"
                        " (the pair the doc tower reads)")


def reqa_table(rows: list[dict], paper_csv, table: str, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Chang et al. Table 2: one row per paper dataset, each ReQA statistic beside the paper's.

    rows: {'dataset', 'paper_dataset', 'stats': a reqa-statistics JSON}; a row is named by the paper's dataset,
    and a dataset standing in for it (the embedded default for both SQuAD and NQ) says so in the note."""
    paper = read_paper(paper_csv)
    missing = [c for c in ["dataset", "name", *REQA_COLUMNS] if c not in paper]
    if missing:
        raise StageError(paper_csv, f"no {missing[0]!r} column")
    paper = paper.set_index("dataset")
    records, twin, cells, stands_in = [], {"table": "table2", "profile": profile, "rows": {}}, [], []
    for row in rows:
        stats = read_json(row["stats"])
        absent = [k for k in REQA_COLUMNS if not isinstance(stats, dict) or k not in stats]
        if absent:
            raise StageError(row["stats"], f"no {absent[0]!r}; not a reqa-statistics output")
        if row["paper_dataset"] not in paper.index:
            raise StageError(paper_csv, f"no values for dataset {row['paper_dataset']!r}")
        values = paper.loc[row["paper_dataset"]]
        name = {"dataset": row["paper_dataset"]}
        record = {**name, "profile": profile}
        for key, label in REQA_COLUMNS.items():
            record[label] = int(stats[key]) if key in REQA_COUNTS else round(float(stats[key]), 2)
            record[f"{label} paper"] = int(values[key]) if key in REQA_COUNTS else float(values[key])
            cells.append(cell(name, label, record[label], record[f"{label} paper"], kind="count"))
        if row["dataset"] != row["paper_dataset"]:
            stands_in.append(f"{row['dataset']} stands in for {values['name']}")
        records.append(record)
        key = f"{row['dataset']}/{row['paper_dataset']}"
        twin["rows"][key] = {label: record[label] for label in REQA_COLUMNS.values()}
    frame = pd.DataFrame(records)
    frame["note"] = "; ".join([note, *stands_in, REQA_DOC_TOKENS_NOTE])
    return frame, twin, cells


ABLATION_KEY = ["index", "layers", "pretraining", "emb_dim"]


def ablation_table(rows: list[dict], paper_csv, table: str, profile: str, note: str, *, dataset: str,
                   metric: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Chang et al. Table 5: one row per ablation configuration (index, layers, pre-training, embedding
    dimension), `metric` for each split beside the paper's. rows: ABLATION_KEY, 'split', 'eval'.
    The paper's row is found by index, since a scaled-down profile changes layers and dimensions."""
    paper = read_paper(paper_csv)
    if "index" not in paper:
        raise StageError(paper_csv, "no 'index' column")
    paper = paper.set_index(paper["index"].astype(str))
    name = measure_names([row["eval"] for row in rows], [metric])[metric]   # as build_table names it
    records: dict[str, dict] = {}
    twin = {"table": "table5", "profile": profile, "dataset": dataset, "metric": name, "rows": {}}
    cells = []
    for row in rows:
        record = records.setdefault(row["index"], {**labels(row, ABLATION_KEY), "profile": profile,
                                                   "dataset": dataset})
        if row["index"] in paper.index:
            for field in ("layers", "pretraining", "emb_dim"):
                record[f"{LABELS.get(field, field)} paper"] = paper.loc[row["index"], field]
        value, column = round(100 * read_json(row["eval"])["metrics"][metric], 2), f"{name} {row['split']}"
        record[column] = value
        has_paper = row["index"] in paper.index and row["split"] in paper
        record[f"{column} paper"] = float(paper.loc[row["index"], row["split"]]) if has_paper else None
        cells.append(cell(labels(row, ABLATION_KEY), column, value, record[f"{column} paper"],
                          query_samples([row["eval"]], metric, 100)))
        twin["rows"].setdefault(f"{row['index']}/{row['layers']}/{row['pretraining']}/{row['emb_dim']}", {})[
            column] = value
    frame = pd.DataFrame(list(records.values()))
    frame["note"] = note
    return frame, twin, cells


EVALUATION = Layout((*KEY, "eval"), build_table, percent=True, options=(Option("dataset"), Option("metrics", many=True)))
LAYOUTS = {"table1": Layout(("stats",), pairs_table), "table2": Layout(("dataset", "paper_dataset", "stats"), reqa_table),
           "table3": EVALUATION, "table4": EVALUATION, "table6": EVALUATION,
           "table5": Layout((*ABLATION_KEY, "split", "eval"), ablation_table, percent=True,
                            options=(Option("dataset"), Option("metric")))}
