"""Did it reproduce? (rules in workflow/rules/verdicts.smk): every results CSV the claims and the check read, and
the claims files of the papers the profile names (claims.papers)."""
from __future__ import annotations

from .paths import collection
from .shell import q


def named_tables(paths):
    """--table name=path for each results CSV (name: its path under results/ without .csv)."""
    names = {p: p[len("results/"):-len(".csv")] for p in paths}
    return " ".join(f"--table {q(f'{names[p]}={p}')}" for p in paths)


def unexposed_stats(config, papers=("repbert", "ltre")):
    """The unexposed test queries of each passage dataset built here from a question set that these papers read
    (its own `dataset`): their verdicts are read on those too. With evaluation_qrels, unexposed.json (no training
    question shares a fact with them); else stats.json (none shares an answer paragraph)."""
    passage_sets = dict.fromkeys(config[paper]["dataset"] for paper in papers
                                 if isinstance(config.get(paper), dict) and "dataset" in config[paper])
    datasets = config["datasets"]
    return [collection(name, "unexposed.json" if datasets[name].get("evaluation_qrels") else "stats.json")
            for name in passage_sets if datasets.get(name, {}).get("kind") == "wikipedia-passages"]


class Verdicts:
    def __init__(self, plan):
        papers = plan.papers
        self.result_csvs = (plan.paper_tables + plan.zeroshot.tables
                            + [f["csv"] for paper in papers.values() for f in paper["figures"]])
        self.claims = plan.config["claims"]
        self.claims_files = [papers[paper]["claims"] for paper in self.claims["papers"]]   # the profile's choice
        self.tables = named_tables(self.result_csvs)
        self.unexposed_stats = unexposed_stats(plan.config)
