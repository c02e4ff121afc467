"""The workflow's planning logic as plain Python: for a config (params.yaml and its overlays, as Snakemake merged
them), what every rule reads and writes and which settings it passes its stage. The rule files build one Plan of
the run's config with Plan.of(workflow) and call its families by name:

    plan.data             datasets: kinds, builders' inputs, downloads, base/corpus/questions, run depths
    plan.bm25, plan.dense retrieval: BM25 runs, encodings, Faiss indexes (LTRe's included), dense searches
    plan.train            tokenizers, encoders, Chang et al.'s model names, the three-tower baselines
    plan.evaluation       the run an evaluation reads, its metrics and recall convention, every table's note
    plan.zeroshot         checkpoints (ckpt-<name>) and the zero-shot tables
    plan.chang2020, plan.quadrupletbert, plan.repbert, plan.ltre: each paper's rows and files, beside its
                          towers.reports.<paper> (the layout) and towers.stages (the command)
    plan.verdicts         the tables the claims and the check read
    plan.software         the interpreter and environments of each rule, and its cluster requests

Nothing here runs Snakemake or changes the config; only towers.plan.files reads files (digests, listings)."""
from __future__ import annotations

import os
import sys
import weakref

from ..reports import papers as paper_list
from .chang2020 import Chang2020
from .datasets import Datasets
from .evaluation import Evaluation
from .files import content_digest, folder_files, folder_listing, future_dated, mark_profile
from .ltre import Ltre
from .paths import ART, DENSE, PASSAGE_SPLIT, collection, collection_files, eval_json, profile_marker
from .quadrupletbert import QuadrupletBert
from .repbert import RepBert
from .retrieval import Bm25, Dense
from .shell import flags, one_of, paper_table, q, row_flags
from .software import Software
from .training import Training
from .verdicts import Verdicts
from .zeroshot import Zeroshot

__all__ = ["ART", "DENSE", "PASSAGE_SPLIT", "Plan", "collection", "collection_files", "content_digest", "eval_json",
           "flags", "folder_files", "folder_listing", "future_dated", "mark_profile", "one_of", "paper_table", "profile_marker", "q", "row_flags"]

_PLANS: list[tuple[weakref.ref, Plan]] = []   # (workflow, its plan); a Workflow is no dict key (it is unhashable)


class Plan:
    def __init__(self, config: dict, *, papers: dict | None = None, python: str = sys.executable, conda: bool = False,
                 envs: str = "envs"):
        self.config = config
        self.profile = config["profile"]
        # the papers, declared once (data/papers/papers.yaml): rule files, targets, published values, claims
        self.papers = paper_list.load() if papers is None else papers
        self.paper_tables = paper_list.tables(self.papers)
        self.paper_figures = paper_list.figures(self.papers)
        # Every table and figure depends on this marker (workflow/rules/common.smk writes it)
        self.profile_marker = profile_marker(self.profile)
        self.software = Software(config, python=python, conda=conda, envs=envs)
        self.data = Datasets(self)
        self.bm25 = Bm25(self)
        self.dense = Dense(self)
        self.train = Training(self)
        self.zeroshot = Zeroshot(self)
        self.evaluation = Evaluation(self)
        self.chang2020 = Chang2020(self)
        self.quadrupletbert = QuadrupletBert(self)
        self.repbert = RepBert(self)
        self.ltre = Ltre(self)
        self.verdicts = Verdicts(self)

    @classmethod
    def of(cls, workflow, papers: dict | None = None) -> Plan:
        """The plan of a Snakemake workflow's config, built once a workflow (the Snakefile builds it, with the papers
        it has checked; every rule file asks for it again)."""
        _PLANS[:] = [(ref, plan) for ref, plan in _PLANS if ref() is not None]
        for ref, plan in _PLANS:
            if ref() is workflow:
                return plan
        conda = "conda" in str(getattr(workflow.deployment_settings, "deployment_method", "")).lower()
        plan = cls(workflow.config, papers=papers, conda=conda, envs=os.path.join(workflow.basedir, "envs"))
        _PLANS.append((weakref.ref(workflow), plan))
        return plan

    def paper_values(self, paper, table):
        """The published values a paper's table sits beside (data/papers/papers.yaml: the table's own, else the
        paper's)."""
        return paper_list.values_of(self.papers[paper], table)
