"""The workflow's planning logic as plain Python: for a config (params.yaml and its overlays, as Snakemake merged
them), what every rule reads and writes and which settings it passes its stage. The rule files build one Plan of
the run's config with Plan.of(workflow) and call its families by name. The families, lowest first; each uses only
those below it (tests/plan/test_plan_layers.py):

    plan.data             datasets: kinds, builders' inputs, downloads, base/corpus/questions/text, run depths
    plan.train            tokenizers, the encoders training starts from, a split's training files
    plan.checkpoints      pretrained checkpoints as models (ckpt-<name>) and their one split
    plan.bm25, plan.dense retrieval: BM25 runs, encodings, Faiss indexes (LTRe's included), dense searches
    plan.evaluation       the run an evaluation reads, its metrics and recall convention, every table's note
    plan.zeroshot         the zero-shot tables, the tables of no paper
    plan.chang2020, plan.quadrupletbert, plan.repbert, plan.ltre: each paper's model names (its grammar), its own
                          training settings and its tables, beside towers.reports.<paper> (the layout) and
                          towers.stages (the stage)
    plan.verdicts         the tables the claims and the check read
    plan.software         the interpreter and environments of each rule, and its cluster requests (uses none)

Every paper's module, and zeroshot's, has one shape (towers.plan.tables.Tables): rows(table), inputs(table),
note(table) and command(table) give the variable parts of the command a table rule's shell spells out. Where a
lower family needs a paper's grammar (LTRe's fixed doc side, searched through its start's indexes; QuadrupletBERT's
recall convention) or settings (the hub models, bag-of-words encoders and indexes a paper names, how deep a passage
set's runs go: module-level functions of the paper's module, towers.plan.gathered), the Plan hands it down when it
builds that family, so that no call runs back up through it and no family reads a paper's section.
Nothing here runs Snakemake or changes the config; only towers.plan.files reads files (digests, listings)."""
from __future__ import annotations

import importlib
import os
import sys
import weakref

from ..reports import papers as paper_list
from .checkpoints import Checkpoints
from .datasets import Datasets
from .evaluation import Evaluation
from .files import content_digest, folder_files, folder_listing, future_dated, mark_profile
from .ltre import index_owner
from .paths import ART, DENSE, PASSAGE_SPLIT, collection, collection_files, eval_json, profile_marker
from .quadrupletbert import is_model as is_quadrupletbert_model
from .retrieval import Bm25, Dense
from .shell import flags, one_of, option_flags, q, row_flags
from .software import Software
from .tables import Tables
from .training import Training
from .verdicts import Verdicts
from .zeroshot import Zeroshot

__all__ = ["ART", "DENSE", "PASSAGE_SPLIT", "Plan", "collection", "collection_files", "content_digest", "eval_json",
           "flags", "folder_files", "folder_listing", "future_dated", "mark_profile", "one_of", "option_flags",
           "profile_marker", "q", "row_flags"]

_PLANS: list[tuple[weakref.ref, Plan]] = []   # (workflow, its plan); a Workflow is no dict key (it is unhashable)


def gathered(modules: list, hook: str, config: dict, empty):
    """What the papers' modules give a shared family through a module-level function `hook(config)` (a list or a
    dict, joined in the papers' order; a paper without it gives nothing): the hub models it names, bag-of-words
    encoders, indexes, how deep a passage set's runs go. A family below the papers reads no paper's section."""
    found = empty
    for module in modules:
        if hasattr(module, hook):
            given = getattr(module, hook)(config)
            found = found + given if isinstance(found, list) else {**found, **given}
    return found


def paper_plan(module) -> type:
    """The Tables class a paper's module (towers.plan.<paper>) defines: a paper declared in data/papers/papers.yaml
    is planned by its own module, named by its id, with no line here."""
    found = [c for c in vars(module).values()
             if isinstance(c, type) and issubclass(c, Tables) and c.__module__ == module.__name__]
    if len(found) != 1:
        raise ValueError(f"{module.__name__} defines {len(found)} Tables classes, not one")
    return found[0]


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
        # what the papers' modules give the shared families (module-level functions of the config)
        modules = [importlib.import_module(f".{paper}", __name__) for paper in self.papers]
        self.software = Software(config, python=python, conda=conda, envs=envs,
                                 hub_models=gathered(modules, "hub_models", config, []))
        # the families, lowest first (tests/plan/test_plan_layers.py)
        self.data = Datasets(self, passage_runs=gathered(modules, "passage_runs", config, {}))
        self.train = Training(self, bag_of_words=gathered(modules, "bag_of_words", config, {}))
        self.checkpoints = Checkpoints(self)
        self.bm25 = Bm25(self)
        self.dense = Dense(self, index_owner=index_owner,   # LTRe's grammar, handed down
                           indexes=gathered(modules, "indexes", config, {}))
        self.evaluation = Evaluation(self, is_quadrupletbert_model=is_quadrupletbert_model)   # QuadrupletBERT's
        self.zeroshot = Zeroshot(self)
        for paper, module in zip(self.papers, modules):   # each paper's tables: plan.chang2020, ...
            setattr(self, paper, paper_plan(module)(self))
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
