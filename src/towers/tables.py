"""Paper tables: reproduced values beside the paper's, one row per (split, method), with the profile."""
from __future__ import annotations

import pandas as pd

from .io import StageError, read_json

KEY = ["split", "encoder", "pretraining"]


def paper_values(path, table: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype={"split": str})
    except (OSError, pd.errors.ParserError) as err:
        raise StageError(path, f"cannot read the paper's values ({err})") from None
    frame = frame[frame["table"] == table]
    if frame.empty:
        raise StageError(path, f"no values for {table}")
    return frame


def build_table(rows: list[dict], paper_csv, table: str, metrics: list[str], profile: str, dataset: str,
                note: str) -> tuple[pd.DataFrame, dict]:
    """rows: {'split','encoder','pretraining','eval': path to an evaluation JSON}.

    Metrics are reported in percent, like the paper; the paper's value sits in '<metric> paper'."""
    paper = paper_values(paper_csv, table).set_index(KEY)
    records, twin = [], {"table": table, "profile": profile, "dataset": dataset, "rows": {}}
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
        records.append(record)
        twin["rows"]["/".join(key)] = twin_row
    frame = pd.DataFrame(records)
    frame["note"] = note   # the twin stays numeric for `dvc metrics`; the CSV carries the note
    return frame, twin
