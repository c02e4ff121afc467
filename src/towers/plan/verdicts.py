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


def question_files(config) -> list[tuple[str, str, str]]:
    """(dataset, query id prefix, questions TSV) for each dataset whose queries are the questions of a file of this
    project: a wikipedia-qa set's `questions` (q...), an open-domain set's base's, a wikipedia-passages set's
    `questions` (q...) and `test_questions` (n...). The claims read there the article each query was asked of, to
    state power with the questions of one article counted as correlated; other datasets' queries have none."""
    from ..datasets.wiki_passages import QUESTION_PREFIXES

    datasets, found = config["datasets"], []
    for name, spec in datasets.items():
        source = datasets.get(spec.get("base"), {}) if spec.get("kind") == "open-domain" else spec
        if source.get("kind") == "wikipedia-qa":
            found.append((name, "q", source["questions"]))
        elif source.get("kind") == "wikipedia-passages":
            found += [(name, prefix, source[key]) for key, prefix in QUESTION_PREFIXES.items() if source.get(key)]
    return found


def articles_args(files) -> str:
    """--articles DATASET PREFIX TSV for each of question_files."""
    return " ".join(f"--articles {q(name)} {q(prefix)} {q(path)}" for name, prefix, path in files)


class Verdicts:
    def __init__(self, plan):
        papers = plan.papers
        self.result_csvs = (plan.paper_tables + plan.zeroshot.tables
                            + [f["csv"] for paper in papers.values() for f in paper["figures"]])
        self.claims = plan.config["claims"]
        self.claims_files = [papers[paper]["claims"] for paper in self.claims["papers"]]   # the profile's choice
        self.tables = named_tables(self.result_csvs)
        self.unexposed_stats = unexposed_stats(plan.config)
        self.question_files = question_files(plan.config)
        self.questions = list(dict.fromkeys(path for _, _, path in self.question_files))   # the rule's inputs
        self.articles = articles_args(self.question_files)
