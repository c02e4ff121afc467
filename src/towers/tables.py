"""Paper tables: reproduced values beside the paper's, one row per (split, method), with the profile."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .io import StageError, read_json

KEY = ["split", "encoder", "pretraining"]


def read_paper(path, dtype=None) -> pd.DataFrame:
    """A paper's numbers, typed in from its text (data/papers/)."""
    try:
        return pd.read_csv(path, dtype=dtype or {"split": str})
    except (OSError, pd.errors.ParserError) as err:
        raise StageError(path, f"cannot read the paper's values ({err})") from None


def paper_values(path, table: str) -> pd.DataFrame:
    frame = read_paper(path)
    frame = frame[frame["table"] == table]
    if frame.empty:
        raise StageError(path, f"no values for {table}")
    return frame


def query_samples(evals, measure: str, scale: float = 1.0) -> dict:
    """Where a metric cell's per-query values are: evaluation JSONs (one per seed, averaged), the measure's name in
    them, and the factor that turns it into the table's unit (100 for percent)."""
    return {"kind": "queries", "files": [str(e) for e in evals], "measure": measure, "scale": scale}


def cell(row: dict, column: str, value, paper=None, samples: dict | None = None, kind: str = "metric") -> dict:
    """One number of a table, as the claims and the expected-value check read it (the stage's meta record):
    the row's labels, the column, the value shown, the paper's value, where its samples come from, and its kind
    (metric: ranking quality; count: a deterministic count or size; timing: seconds or milliseconds)."""
    found = {"row": {k: row_label(v) for k, v in row.items()}, "column": column, "value": value, "kind": kind,
             "paper": None if paper is None or pd.isna(paper) else float(paper)}
    if samples:
        found["samples"] = samples
    return found


def row_label(value) -> str:
    """A row label as text; numbers the way a table shows them (0.1, 5, not 0.10 or 5.0)."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# Claims on training curves (LTRe Figure 3) compare the start of training with its end: the first and the
# last fifth of the steps
WINDOW_FRACTION = 0.2


def window_steps(steps: pd.Series, window: str) -> pd.Series:
    """Which of a run's steps fall in its 'first' or 'last' fifth, or 'all' of it."""
    span = max(1, int(np.ceil(WINDOW_FRACTION * steps.max())))
    return {"first": steps <= span, "last": steps > steps.max() - span, "all": steps > 0}[window]


def build_table(rows: list[dict], paper_csv, table: str, metrics: list[str], profile: str, dataset: str,
                note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: {'split','encoder','pretraining','eval': path to an evaluation JSON}.

    Metrics are reported in percent, like the paper; the paper's value sits in '<metric> paper'."""
    paper = paper_values(paper_csv, table).set_index(KEY)
    records, twin, cells = [], {"table": table, "profile": profile, "dataset": dataset, "rows": {}}, []
    for row in rows:
        result = read_json(row["eval"])
        record = {k: row[k] for k in KEY}
        record.update(profile=profile, dataset=dataset, test_queries=result["queries"])
        key = (row["split"], row["encoder"], row["pretraining"])
        twin_row = {}
        for metric in metrics:
            value = round(100 * result["metrics"][metric], 2)
            record[metric] = value
            record[f"{metric} paper"] = paper.loc[key, metric] if key in paper.index and metric in paper else None
            twin_row[metric] = value
            cells.append(cell({k: row[k] for k in KEY}, metric, value, record[f"{metric} paper"],
                              query_samples([row["eval"]], metric, 100)))
        records.append(record)
        twin["rows"]["/".join(key)] = twin_row
    frame = pd.DataFrame(records)
    frame["note"] = note   # the twin stays numeric for `dvc metrics`; the CSV carries the note
    return frame, twin, cells


def seed_summary(paths: list, metrics: list[str]) -> tuple[dict, dict, dict, int]:
    """Mean and sample standard deviation over seeds (in %), and each query's value averaged over seeds."""
    results = [read_json(p) for p in paths]
    values = {m: [100 * r["metrics"][m] for r in results] for m in metrics}
    mean = {m: float(np.mean(v)) for m, v in values.items()}
    std = {m: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for m, v in values.items()}
    qids = sorted(results[0]["per_query"])
    for path, r in zip(paths, results):
        if sorted(r["per_query"]) != qids:
            raise StageError(path, "evaluated on other queries than the other seeds")
    per_query = {m: np.array([np.mean([r["per_query"][q][m] for r in results]) for q in qids]) for m in metrics}
    return mean, std, per_query, len(qids)


def paired_p_value(a: np.ndarray, b: np.ndarray, test: str) -> float:
    """Two-sided paired test over per-query values; 1.0 when the two never differ."""
    from scipy import stats

    if np.allclose(a, b):
        return 1.0
    if test == "wilcoxon":
        return float(stats.wilcoxon(a, b, zero_method="wilcox").pvalue)
    if test == "ttest":
        return float(stats.ttest_rel(a, b).pvalue)
    raise ValueError(f"unknown test {test!r}")


SEEDED_KEY = ["dataset", "paper_dataset", "split", "model", "margin", "index"]


def seeded_table(rows: list[dict], paper_csv, table: str, metrics: list[str], profile: str, note: str,
                 compare: tuple[str, str] | None, test: str, alpha: float,
                 exact_index: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: SEEDED_KEY fields plus 'evals' (one evaluation JSON per seed).

    Each metric gets the mean over seeds, its standard deviation and the paper's value; rows of
    model compare[0] get the p-value of a paired test against compare[1] on the same dataset,
    split and index; rows on another index than `exact_index` get the recall lost against it."""
    paper = paper_values(paper_csv, table)
    paper["margin"] = paper["margin"].map(lambda m: "" if pd.isna(m) else f"{float(m):g}")
    by_margin = paper["margin"].ne("").any()   # Table 2's rows are margins; Table 1's are not
    paper = paper.set_index(["dataset", "split", "model", "margin"])
    summaries = {tuple(r[k] for k in SEEDED_KEY): seed_summary(r["evals"], metrics) for r in rows}
    by_model = {(k[0], k[2], k[3], k[4], k[5]): v for k, v in summaries.items()}
    records, twin, cells = [], {"table": table, "profile": profile, "rows": {}}, []
    # the metrics twin names a row without its margin unless the margin is what tells rows apart
    # (Table 2), so `dvc metrics diff` pairs a row with itself when Table 1's margin is edited
    unmargined = {tuple(r[k] for k in SEEDED_KEY if k != "margin") for r in rows}
    twin_fields = [k for k in SEEDED_KEY if k != "margin" or len(unmargined) < len(rows)]
    for r in rows:
        key = tuple(r[k] for k in SEEDED_KEY)
        mean, std, per_query, queries = summaries[key]
        record = {k: r[k] for k in SEEDED_KEY}
        record.update(seeds=len(r["evals"]), test_queries=queries, profile=profile)
        paper_key = (r["paper_dataset"], r["split"], r["model"], r["margin"] if by_margin else "")
        other = by_model.get((r["dataset"], r["split"], compare[1], r["margin"], r["index"])) if compare else None
        exact = by_model.get((r["dataset"], r["split"], r["model"], r["margin"], exact_index))
        for m in metrics:
            record[m] = round(mean[m], 2)
            record[f"{m} std"] = round(std[m], 2)
            record[f"{m} paper"] = float(paper.loc[paper_key, m]) if paper_key in paper.index else None
            cells.append(cell({k: r[k] for k in SEEDED_KEY}, m, record[m], record[f"{m} paper"],
                              query_samples(r["evals"], m, 100)))
            if compare and r["model"] == compare[0] and other is not None:
                record[f"{m} p vs {compare[1]}"] = round(paired_p_value(per_query[m], other[2][m], test), 4)
            if r["index"] != exact_index and exact is not None:
                record[f"{m} lost to quantization"] = round(exact[0][m] - mean[m], 2)
        if compare and r["model"] == compare[0] and other is not None:
            marks = [f"{m} {'higher' if mean[m] > other[0][m] else 'lower'}" for m in metrics
                     if record[f"{m} p vs {compare[1]}"] < alpha]
            record[f"significant vs {compare[1]}"] = ", ".join(marks) or "none"
        records.append(record)
        twin["rows"]["/".join(str(r[k]) for k in twin_fields if r[k] != "")] = {m: record[m] for m in metrics}
    frame = pd.DataFrame(records)
    frame["note"] = f"{note}; test: {test}, two-sided, alpha {alpha}"
    return frame, twin, cells


PAIR_COLUMNS = {"pairs": "pairs", "tokens": "tokens", "avg_query_tokens": "avg query tokens",
                "avg_doc_tokens": "avg doc tokens"}


def pairs_table(stats: list[dict], paper_csv, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Chang et al. Table 1: one row per pre-training task, each statistic beside the paper's."""
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
            record[f"{label} paper"] = None if value is None else int(value) if key in ("pairs", "tokens") else float(value)
            cells.append(cell({"task": task}, label, record[label], record[f"{label} paper"], kind="count"))
        records.append(record)
        twin["rows"][task] = {label: record[label] for label in PAIR_COLUMNS.values()}
    frame = pd.DataFrame(records)
    frame["note"] = note
    return frame, twin, cells


REQA_COLUMNS = {"queries": "queries", "candidates": "candidates", "tuples": "tuples",
                "avg_query_tokens": "avg query tokens", "avg_doc_tokens": "avg doc tokens"}
REQA_COUNTS = ("queries", "candidates", "tuples")
REQA_DOC_TOKENS_NOTE = ("tokens: WordPiece of the dataset's tokenizer (the profile's vocabulary), no special tokens;"
                        " doc tokens = sentence + paragraph tokens of each candidate (the pair the doc tower reads),"
                        " averaged over candidates")


def reqa_table(rows: list[dict], paper_csv, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Chang et al. Table 2: one row per (dataset, paper dataset), each ReQA statistic beside the paper's.

    rows: {'dataset', 'paper_dataset', 'stats': a reqa-statistics JSON}. A dataset standing in for
    another one of the paper (the embedded default for both SQuAD and NQ) says so in its note."""
    paper = read_paper(paper_csv)
    missing = [c for c in ["dataset", "name", *REQA_COLUMNS] if c not in paper]
    if missing:
        raise StageError(paper_csv, f"no {missing[0]!r} column")
    paper = paper.set_index("dataset")
    records, twin, cells = [], {"table": "table2", "profile": profile, "rows": {}}, []
    for row in rows:
        stats = read_json(row["stats"])
        absent = [k for k in REQA_COLUMNS if not isinstance(stats, dict) or k not in stats]
        if absent:
            raise StageError(row["stats"], f"no {absent[0]!r}; not a reqa-statistics output")
        if row["paper_dataset"] not in paper.index:
            raise StageError(paper_csv, f"no values for dataset {row['paper_dataset']!r}")
        values = paper.loc[row["paper_dataset"]]
        record = {"dataset": row["dataset"], "paper_dataset": row["paper_dataset"], "profile": profile}
        for key, label in REQA_COLUMNS.items():
            record[label] = int(stats[key]) if key in REQA_COUNTS else round(float(stats[key]), 2)
            record[f"{label} paper"] = int(values[key]) if key in REQA_COUNTS else float(values[key])
            cells.append(cell({"dataset": row["dataset"], "paper_dataset": row["paper_dataset"]}, label, record[label],
                              record[f"{label} paper"], kind="count"))
        stands_in = (f"; {row['dataset']} stands in for {values['name']}"
                     if row["dataset"] != row["paper_dataset"] else "")
        record["note"] = f"{note}{stands_in}; {REQA_DOC_TOKENS_NOTE}"
        records.append(record)
        key = f"{row['dataset']}/{row['paper_dataset']}"
        twin["rows"][key] = {label: record[label] for label in REQA_COLUMNS.values()}
    return pd.DataFrame(records), twin, cells


ABLATION_KEY = ["index", "layers", "pretraining", "emb_dim"]


def ablation_table(rows: list[dict], paper_csv, metric: str, profile: str, dataset: str,
                   note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Chang et al. Table 5: one row per ablation configuration (index, layers, pre-training, embedding
    dimension), `metric` for each split beside the paper's. rows: ABLATION_KEY, 'split', 'eval'.
    The paper's row is found by index, since a scaled-down profile changes layers and dimensions."""
    paper = read_paper(paper_csv)
    if "index" not in paper:
        raise StageError(paper_csv, "no 'index' column")
    paper = paper.set_index(paper["index"].astype(str))
    records: dict[str, dict] = {}
    twin = {"table": "table5", "profile": profile, "dataset": dataset, "metric": metric, "rows": {}}
    cells = []
    for row in rows:
        record = records.setdefault(row["index"], {**{k: row[k] for k in ABLATION_KEY}, "profile": profile,
                                                   "dataset": dataset})
        for k in ("layers", "pretraining", "emb_dim"):
            if row["index"] in paper.index:
                record[f"{k} paper"] = paper.loc[row["index"], k]
        value = round(100 * read_json(row["eval"])["metrics"][metric], 2)
        record[f"{metric} {row['split']}"] = value
        has_paper = row["index"] in paper.index and row["split"] in paper
        record[f"{metric} {row['split']} paper"] = float(paper.loc[row["index"], row["split"]]) if has_paper else None
        cells.append(cell({k: row[k] for k in ABLATION_KEY}, f"{metric} {row['split']}", value,
                          record[f"{metric} {row['split']} paper"], query_samples([row["eval"]], metric, 100)))
        twin["rows"].setdefault(f"{row['index']}/{row['layers']}/{row['pretraining']}/{row['emb_dim']}", {})[
            f"{metric} {row['split']}"] = value
    frame = pd.DataFrame(list(records.values()))
    frame["note"] = note
    return frame, twin, cells


def zeroshot_table(rows: list[dict], published: list[dict], dataset: str, split: str, metrics: list[str],
                   profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """results/zeroshot/<dataset>.csv: BM25 and pretrained checkpoints over a dataset's evaluation queries.

    rows: {'model', 'label', 'caveat', 'eval'}; published: {'model', 'metric', 'value', 'source'}, values
    published elsewhere for a row, shown in '<metric> published' (a column only where one is given)."""
    known = {row["model"] for row in rows}
    for value in published:
        if value["model"] not in known:
            raise StageError("--published", f"model {value['model']!r} is not a row of this table ({', '.join(known)})")
        if value["metric"] not in metrics:
            raise StageError("--published", f"metric {value['metric']!r} is not one of {', '.join(metrics)}")
    given = {(p["model"], p["metric"]): p for p in published}
    published_metrics = [m for m in metrics if any(metric == m for _, metric in given)]
    records, twin, cells = [], {"table": "zeroshot", "dataset": dataset, "split": split, "profile": profile, "rows": {}}, []
    for row in rows:
        result = read_json(row["eval"])
        missing = [m for m in metrics if m not in result["metrics"]]
        if missing:
            raise StageError(row["eval"], f"no {missing[0]} in this evaluation (evaluate with it in the metrics list)")
        record = {"dataset": dataset, "split": split, "model": row["model"], "label": row["label"],
                  "queries": result["queries"]}
        for m in metrics:
            record[m] = round(result["metrics"][m], 4)
            if m in published_metrics:
                value = given.get((row["model"], m))
                record[f"{m} published"] = float(value["value"]) if value else None
        record["published source"] = "; ".join(f"{p['metric']}: {p['source']}" for (model, _), p in given.items()
                                               if model == row["model"])
        record["caveat"] = row["caveat"]
        record["profile"] = profile
        records.append(record)
        twin["rows"][row["model"]] = {m: record[m] for m in metrics}
        cells += [cell({"model": row["model"]}, m, record[m], given[(row["model"], m)]["value"]
                       if (row["model"], m) in given else None, query_samples([row["eval"]], m)) for m in metrics]
    frame = pd.DataFrame(records)
    frame["note"] = note
    return frame, twin, cells
