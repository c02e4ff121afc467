"""The papers the workflow reproduces, as data/papers/papers.yaml declares them (workflow/schemas/papers.schema.yaml).

The Snakefile (rule files, targets), verdicts.smk, the report rule, the tests, the benchmarks and dvc.yaml's
generator read them here; a stage never does: its rule passes what it needs. A problem is one line naming the
file, the key and what is wrong, e.g. `data/papers/papers.yaml: papers[3].tables[3].path: results/repbert/table1.csv
is a target of repbert already`."""
from __future__ import annotations

from pathlib import Path

from ..config.config_yaml import PAPERS_FILE
from ..config.params_check import ParamsError, bounded, dotted, load_schema, read_yaml, schema_problems, text_problems

SCHEMA_FILE = "workflow/schemas/papers.schema.yaml"


def target_name(path: str) -> str:
    """A target's name in results/, claims and the check: results/chang2020/table3.csv -> chang2020/table3."""
    return str(Path(path).with_suffix(""))[len("results/"):]


def load(path=PAPERS_FILE, root=".") -> dict[str, dict]:
    """{id: paper} in the file's order, each paper as declared with, per table, `name` (target_name) and `values`
    (its own, else the paper's), per figure `name`. Raises ParamsError (one line) for a file that does not match
    the schema, an id or a target path given twice, a paper without targets, or a rule, values or claims file
    that is not there."""
    root = Path(root)
    where = str(path)
    tree = read_yaml(str(root / path), lambda _, problem: ParamsError(f"{where}: {problem}"))
    problems = text_problems(tree) or schema_problems(tree, load_schema(str(root / SCHEMA_FILE)))

    def fail(keys, problem):
        raise ParamsError(f"{where}: {dotted(keys)}: {problem}")

    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        fail(problems[0][0], problems[0][1] + more)
    papers: dict[str, dict] = {}
    owner: dict[str, str] = {}   # every output path -> the paper that declares it
    for i, declared in enumerate(tree["papers"]):
        at = ["papers", i]
        if declared["id"] in papers:
            fail([*at, "id"], f"{declared['id']!r} is declared twice")
        if not declared["tables"] and not declared["figures"]:
            fail(at, f"{declared['id']} has no tables and no figures")
        for key in ("rules", "values", "claims"):
            if not (root / declared[key]).is_file():
                fail([*at, key], f"{bounded(declared[key], 120)}: no such file")
        paper = {**declared, "tables": [], "figures": []}
        for kind in ("tables", "figures"):
            for j, target in enumerate(declared[kind]):
                for key in ("path", "csv"):
                    if key in target and target[key] in owner:
                        fail([*at, kind, j, key], f"{target[key]} is a target of {owner[target[key]]} already")
                    if key in target:
                        owner[target[key]] = declared["id"]
                if kind == "tables" and "values" in target and not (root / target["values"]).is_file():
                    fail([*at, kind, j, "values"], f"{bounded(target['values'], 120)}: no such file")
                entry = {**target, "name": target_name(target["path"])}
                if kind == "tables":
                    entry["values"] = target.get("values", declared["values"])
                paper[kind].append(entry)
        papers[declared["id"]] = paper
    return papers


def tables(papers: dict[str, dict]) -> list[str]:
    """Every paper's table CSVs, in the file's order."""
    return [t["path"] for paper in papers.values() for t in paper["tables"]]


def figures(papers: dict[str, dict]) -> list[str]:
    """Every paper's figure PNGs, in the file's order."""
    return [f["path"] for paper in papers.values() for f in paper["figures"]]


def targets(paper: dict) -> list[str]:
    """A paper's tables and figures (what `snakemake all` builds of it)."""
    return [t["path"] for t in paper["tables"]] + [f["path"] for f in paper["figures"]]


def values_of(paper: dict, name: str) -> str:
    """The published values file a paper's table (by its name under results/) sits beside."""
    for table in paper["tables"]:
        if table["name"] == name or Path(table["path"]).stem == name:
            return table["values"]
    raise KeyError(f"{PAPERS_FILE}: {paper['id']} declares no table {name!r}")


def in_words(count: int) -> str:
    """4 -> 'four' (a title's or a sentence's count of papers); from 13 on, digits."""
    words = "no one two three four five six seven eight nine ten eleven twelve".split()
    return words[count] if 0 <= count < len(words) else str(count)
