"""The zero-shot table (results/zeroshot/<dataset>.csv): BM25 and pretrained checkpoints on a dataset's
evaluation queries, beside published values where params give them."""
from __future__ import annotations

import pandas as pd

from ..io import StageError, read_json
from ..verdicts.cells import cell, query_samples
from .common import Layout, Option, measure_names


def zeroshot_table(rows: list[dict], paper_csv, table: str, profile: str, note: str, *, split: str,
                   metrics: list[str], published: list[dict]) -> tuple[pd.DataFrame, dict, list[dict]]:
    """results/zeroshot/<dataset>.csv (the table's name is the dataset's; no paper's values): BM25 and pretrained
    checkpoints over a dataset's evaluation queries.

    rows: {'model', 'label', 'caveat', 'eval'}; published: {'model', 'metric', 'value', 'source'}, values
    published elsewhere for a row, shown in '<metric> published' (a column only where one is given)."""
    dataset, known = table, {row["model"] for row in rows}
    for value in published:
        try:
            float(value["value"])
        except ValueError:
            raise StageError("--option published", f"published value {value['value']!r} is not a number") from None
        if value["model"] not in known:
            raise StageError("--option published", f"model {value['model']!r} is not a row of this table ({', '.join(known)})")
        if value["metric"] not in metrics:
            raise StageError("--option published", f"metric {value['metric']!r} is not one of {', '.join(metrics)}")
    given = {(p["model"], p["metric"]): p for p in published}
    published_metrics = [m for m in metrics if any(metric == m for _, metric in given)]
    names = measure_names([row["eval"] for row in rows], metrics)   # R@100 on a question set: Success@100
    records, said, cells = [], [], []
    twin = {"table": "zeroshot", "dataset": dataset, "split": split, "profile": profile, "rows": {}}
    for row in rows:
        result = read_json(row["eval"])
        missing = [m for m in metrics if m not in result["metrics"]]
        if missing:
            raise StageError(row["eval"], f"no {missing[0]} in this evaluation (evaluate with it in the metrics list)")
        record = {"dataset": dataset, "split": split, "model": row["model"], "label": row["label"],
                  "queries": result["queries"]}
        for m in metrics:
            record[names[m]] = round(result["metrics"][m], 4)
            if m in published_metrics:
                value = given.get((row["model"], m))
                record[f"{names[m]} published"] = float(value["value"]) if value else None
        sources = [f"{names[p['metric']]} published in {p['source']}" for (model, _), p in given.items() if model == row["model"]]
        said += [f"{row['label']}: {text}" for text in [row["caveat"], *sources] if text]
        record["profile"] = profile
        records.append(record)
        twin["rows"][row["model"]] = {names[m]: record[names[m]] for m in metrics}
        cells += [cell({"model": row["model"]}, names[m], record[names[m]], given[(row["model"], m)]["value"]
                       if (row["model"], m) in given else None, query_samples([row["eval"]], m)) for m in metrics]
    frame = pd.DataFrame(records)
    frame["note"] = "; ".join([note, *said])   # caveats and sources said once, not in a column
    return frame, twin, cells


# one layout, whatever the dataset: its table is named after it
LAYOUTS = {"*": Layout(("model", "label", "caveat", "eval"), zeroshot_table, paper=False, may_be_empty=("caveat",),
                       options=(Option("split"), Option("metrics", many=True),
                                Option("published", many=True, fields=("model", "metric", "value", "source"),
                                       optional=True)))}
