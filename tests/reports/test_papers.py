"""data/papers/papers.yaml: the papers declared once, what each names present and consistent, and a bad file
refused in one line naming the key."""
import shutil

import pytest
import yaml

from towers.config.params_check import ParamsError, merge_configs
from towers.reports import papers

from conftest import FIXTURES, ROOT

DECLARED = papers.load(root=ROOT)


def test_each_paper_names_its_page_rules_values_and_claims():
    assert {"chang2020", "quadrupletbert", "repbert", "ltre"} <= set(DECLARED)
    for paper in DECLARED.values():
        assert (ROOT / paper["docs"]).is_file() and (ROOT / paper["rules"]).is_file()
        assert yaml.safe_load((ROOT / paper["claims"]).read_text())["paper"] == paper["id"]
        assert all((ROOT / t["values"]).is_file() for t in paper["tables"])
    # QuadrupletBERT's tables stay at results/ top level; a table may name its own values file
    assert papers.tables({"q": DECLARED["quadrupletbert"]}) == ["results/table1.csv", "results/table2.csv"]
    assert papers.values_of(DECLARED["chang2020"], "table5") == "data/papers/chang2020_table5.csv"
    assert papers.values_of(DECLARED["chang2020"], "table3") == "data/papers/chang2020.csv"
    assert [f["csv"] for f in DECLARED["repbert"]["figures"]] == ["results/repbert/figure1.csv",
                                                                 "results/repbert/figure2.csv"]


@pytest.mark.parametrize("overlay", [[], ["config/paper.yaml"], [FIXTURES / "tiny.yaml"]])
def test_every_profile_tests_the_claims_of_declared_papers(overlay):
    config = merge_configs(*(yaml.safe_load((ROOT / path).read_text()) for path in ["params.yaml", *overlay]))
    assert set(config["claims"]["papers"]) <= set(DECLARED)


def edited(tmp_path, edit) -> str:
    """A copy of the project's papers file (and the files it names) with `edit` applied to its tree; the problem
    loading it, or None."""
    for name in ("data/papers", "workflow/rules", "workflow/schemas"):
        shutil.copytree(ROOT / name, tmp_path / name, dirs_exist_ok=True)
    tree = yaml.safe_load((ROOT / papers.PAPERS_FILE).read_text())
    edit(tree)
    (tmp_path / papers.PAPERS_FILE).write_text(yaml.safe_dump(tree, sort_keys=False))
    try:
        papers.load(root=tmp_path)
    except ParamsError as err:
        return str(err)
    return None


def twice(tree):
    tree["papers"].append(dict(tree["papers"][0]))


def shared_target(tree):
    tree["papers"][3]["tables"].append({"path": "results/repbert/table1.csv"})


@pytest.mark.parametrize("edit, expected", [
    (lambda t: None, None),
    (twice, f"data/papers/papers.yaml: papers[{len(DECLARED)}].id: 'chang2020' is declared twice"),
    (shared_target, "data/papers/papers.yaml: papers[3].tables[3].path: results/repbert/table1.csv is a target of "
                    "repbert already"),
    (lambda t: t["papers"][1].update(rules="workflow/rules/nope.smk"),
     "data/papers/papers.yaml: papers[1].rules: workflow/rules/nope.smk: no such file"),
    (lambda t: t["papers"][0]["tables"][0].update(values="data/papers/gone.csv"),
     "data/papers/papers.yaml: papers[0].tables[0].values: data/papers/gone.csv: no such file"),
    (lambda t: t["papers"][2].update(titel="RepBERT"),
     "data/papers/papers.yaml: papers[2]: unknown key 'titel' (did you mean 'title'?)"),
    (lambda t: t["papers"][2]["tables"][0].update(path="results/repbert/table1.tsv"),
     "data/papers/papers.yaml: papers[2].tables[0].path: 'results/repbert/table1.tsv' does not match"),
    (lambda t: t["papers"][2].update(tables=[], figures=[]),
     "data/papers/papers.yaml: papers[2]: repbert has no tables and no figures"),
])
def test_a_bad_papers_file_is_refused_in_one_line(tmp_path, edit, expected):
    found = edited(tmp_path, edit)
    assert found == expected if expected is None else found.startswith(expected), found
    assert found is None or "\n" not in found
