"""Did it reproduce? (rules in workflow/rules/verdicts.smk): every results CSV the claims and the check read, and
the claims files of the papers the profile names (claims.papers)."""
from __future__ import annotations

from .paths import collection
from .shell import q


def named_tables(paths):
    """--table name=path for each results CSV (name: its path under results/ without .csv)."""
    names = {p: p[len("results/"):-len(".csv")] for p in paths}
    return " ".join(f"--table {q(f'{names[p]}={p}')}" for p in paths)


class Verdicts:
    def __init__(self, plan):
        papers = plan.papers
        self.result_csvs = (plan.paper_tables + plan.zeroshot.tables
                            + [f["csv"] for paper in papers.values() for f in paper["figures"]])
        self.claims = plan.config["claims"]
        self.claims_files = [papers[paper]["claims"] for paper in self.claims["papers"]]   # the profile's choice
        self.tables = named_tables(self.result_csvs)
        # passage datasets built here from a question set: their verdicts are read on the unexposed test queries too
        passage_sets = dict.fromkeys(plan.config[paper]["dataset"] for paper in ("repbert", "ltre") if paper in plan.config)
        self.unexposed_stats = [collection(name, "stats.json") for name in passage_sets
                                if plan.config["datasets"].get(name, {}).get("kind") == "wikipedia-passages"]
