"""benchmarks.gpu_stages' GPU-hours: the saved plan of every paper table's jobs, and per table the GPU-hours from
the measured rates where a job has one, else gpu_hours' FLOP estimate (`gpu_stages record`, `annotate`)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from . import gpu_hours

HERE = Path(__file__).resolve().parent
PLAN = HERE / "gpu_stages_plan.json"


def gpu_hours_of(measured: dict, plan_: dict, flop_rates: dict) -> dict:
    """Per table: GPU-hours from the measurements where a job has one, else gpu_hours.py's FLOP estimate."""
    from . import gpu_stages   # its docstring says the method (it imports this module)

    lengths = doc_lengths()
    tables = {}
    for target, jobs in plan_["tables"].items():
        hours = {"measured": 0.0, "flop_estimate": 0.0}
        counted = {"measured": 0, "flop_estimate": 0}
        for job in jobs:
            rule, command = job["rule"], job["command"]
            value, basis = None, "flop_estimate"
            entry = measured["regimes"].get(job.get("regime", ""), {}).get("as_planned", {})
            if "seconds_a_step" in entry:
                value, basis = entry["seconds_a_step"] * job["steps"] * job["gpus"] / 3600, "measured"
            elif rule in ("encode_candidates", "encode_candidates_shard"):
                rate = encode_rate(measured, command, lengths)
                if rate:
                    dataset = re.search(r"artifacts/([a-z0-9-]+)/", command).group(1)
                    share = 1 / int(gpu_hours.flag(command, "shards", 1))
                    value, basis = gpu_hours.CORPUS[dataset] * share / rate / 3600, "measured"
            elif rule == "rerank" and "--scores" not in command:
                shape = "large" if "large" in gpu_hours.flag(command, "model", "") else "base"
                rate = measured["reranking"].get(shape, {}).get("pairs_per_s")
                if rate:
                    value = gpu_hours.RERANK_QUERIES * int(gpu_hours.flag(command, "depth")) / rate / 3600
                    basis = "measured"
            if value is None:
                flops = gpu_hours.job_work(rule, command, lengths)
                if not flops:
                    continue   # not counted by either basis (BM25, data preparation, bag-of-words models)
                value = gpu_hours.hours(flops, flop_rates)
            hours[basis] += value
            counted[basis] += 1
        total = hours["measured"] + hours["flop_estimate"]
        tables[target] = {"gpu_hours": round(total, 1), "measured_hours": round(hours["measured"], 1),
                          "flop_estimate_hours": round(hours["flop_estimate"], 1), "jobs_measured": counted["measured"],
                          "jobs_flop_estimate": counted["flop_estimate"],
                          "basis": ("no GPU work counted" if not any(counted.values()) else
                                    "measured stage rates" if not counted["flop_estimate"] else
                                    "FLOP estimate at batch 256" if not counted["measured"] else
                                    "measured stage rates where a job has one, FLOP estimate at batch 256 for the rest")}
    return {"device": measured["device"], "date": measured["date"], "dry": measured["dry"],
            "method": gpu_stages.__doc__.split("\n\n")[1].replace("\n", " "), "regimes": measured["regimes"],
            "encoding": measured["encoding"], "reranking": measured["reranking"], "tables": tables}


def doc_lengths() -> dict[str, int]:
    import yaml

    from towers.reports import papers as paper_list

    paper = {**yaml.safe_load((HERE.parent / "params.yaml").read_text()),
             **yaml.safe_load((HERE.parent / "config/paper.yaml").read_text())}
    out = {}
    for p in paper_list.load(root=HERE.parent).values():
        if "doc_length" in p:
            value = paper
            for part in p["doc_length"].split("."):
                value = value[part]
            out[p["id"]] = value
    return out


def encode_rate(measured: dict, command: str, lengths: dict) -> float | None:
    model = re.search(r"dense/([^/]+)/", command)
    if not model or gpu_hours.BAG_OF_WORDS.search(model.group(1)):
        return None
    name = model.group(1)
    length = lengths.get("ltre" if name.startswith("neg-") else "repbert" if name == "repbert" else
                         "quadrupletbert" if name.startswith(("threet-", "quadbert-")) else "chang2020")
    known = {int(k): v["passages_per_s"] for k, v in measured["encoding"].items()}
    fits = [k for k in sorted(known) if length is not None and k >= length]
    return known[fits[0]] if fits else None


def annotate() -> None:
    """benchmarks/results.json's gpu_hours tables with their basis and the small-batch caveat (gpu_hours.basis),
    from the saved plan; their numbers stay as they are."""
    import yaml  # noqa: F401  (doc_lengths)

    from .workflow_harness import RESULTS, record

    results = json.loads(RESULTS.read_text())
    rates = results.get("gpu", {}).get("throughput", {}).get("flops")
    tables = results["gpu_hours"]["tables"]
    plan_ = load_plan()["tables"]
    for target, entry in tables.items():
        entry.update(gpu_hours.basis([(j["rule"], j["command"]) for j in plan_[target]], doc_lengths(), rates))
    record(("gpu_hours", "tables"), tables, replace=True)


def load_plan() -> dict:
    """The saved plan with each table's jobs written out again."""
    plan_ = json.loads(PLAN.read_text())
    return {**plan_, "tables": {t: [plan_["jobs"][i] for i in numbers] for t, numbers in plan_["tables"].items()}}
