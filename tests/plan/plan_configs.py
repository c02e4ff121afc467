"""Plans of the embedded default (params.yaml, the mini profile) and of the paper profile, built as the workflow
builds them (towers.plan.Plan of Snakemake's merged config), without Snakemake. (Not a conftest.py: tests import
tests/conftest.py by that name.)"""
import copy
from pathlib import Path

import yaml

from towers.config.params_check import merge_configs
from towers.plan import Plan
from towers.reports import papers as paper_list

ROOT = Path(__file__).resolve().parents[2]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
PAPER = merge_configs(PARAMS, yaml.safe_load((ROOT / "config/paper.yaml").read_text()))
PAPERS = paper_list.load(root=ROOT)


def plan_of(config: dict, **settings) -> Plan:
    return Plan(copy.deepcopy(config), papers=PAPERS, **settings)


def profile_configs() -> dict:
    """The merged configs of the two profiles (copies: a test may change them)."""
    return {"mini": copy.deepcopy(PARAMS), "paper": copy.deepcopy(PAPER)}


def mini_plan() -> Plan:
    return plan_of(PARAMS)


def paper_plan() -> Plan:
    return plan_of(PAPER)
