"""The README is a front door: short, no lab diary, links that resolve, and every number it states read back
from the results it comes from (the verdict table: results/claims.csv and results/check.csv; the first screen's
time, cores and scale: benchmarks/results.json and params.yaml)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150
DIARY_WORDS = ("session", "today", "this machine")

# the verdict table's columns, in claims.csv's words
VERDICTS = {"holds": "holds", "same direction, n.s.": "same direction, not significant",
            "not supported": "not supported", "contradicted": "contradicted", "not measurable": "not measurable"}
FIRST_SCREEN = 40     # lines a reader sees before scrolling


def reproduce() -> dict:
    return json.loads((ROOT / "benchmarks/results.json").read_text(encoding="utf-8"))["reproduce"]


def simulated() -> dict:
    """benchmarks/cores.py over the log of the build `reproduce` times (the same commit)."""
    cores = json.loads((ROOT / "benchmarks/results.json").read_text(encoding="utf-8"))["cores_simulated"]
    assert cores["commit"] == reproduce()["commit"], "cores_simulated is of another build than reproduce"
    return cores


def headline() -> dict:
    measured = json.loads((ROOT / "benchmarks/results.json").read_text(encoding="utf-8"))["reproduce_table1"]
    assert measured["targets"] == ["results/table1.csv"] and measured["cores"] == 2, measured.get("targets")
    return measured


def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


# the numbers the first screen states: the phrase that holds each (its number the group) and its source
SOURCED = {
    r"([\d.]+)\s+minutes\s+on\s+\d+\s+cores": lambda: round(reproduce()["clean_run_seconds"] / 60, 1),
    r"minutes\s+on\s+(\d+)\s+cores": lambda: reproduce()["cores"],
    r"cores\s+\(([^)]*kernels)\)": lambda: reproduce()["cpu"],
    r"clean\s+run\s+of\s+`([0-9a-f]{7,40})`": lambda: reproduce()["commit"],
    r"on\s+(\d{4}-\d{2}-\d{2})": lambda: reproduce()["date"],
    r"simulated\s+([\d.]+)\s+minutes\s+on\s+eight\s+cores": lambda: simulated()["simulated_minutes"]["8"],
    r"critical\s+path\s+([\d.]+)\s+minutes": lambda: round(simulated()["critical_path_minutes"], 1),
    r"inference\s+in\s+(bfloat16|float32)\b": lambda: params()["inference_precision"],
    r"(\d+)-layer": lambda: params()["encoder"]["layers"],
    r"(\d+)-wide": lambda: params()["encoder"]["hidden"],
    r"(\d+)-token\s+queries": lambda: params()["two_tower"]["query_length"],
    r"(\d+)-token\s+documents": lambda: params()["two_tower"]["doc_length"],
    r"pre-training:\s+(\d+)\s+steps": lambda: params()["chang2020"]["pretraining"]["steps"],
    # the headline alone: `snakemake results/table1.csv` from a clean clone (benchmarks/reproduce.py --target)
    r"Table\s+1,\s+(\d+)\s+seeds": lambda: len(params()["quadrupletbert"]["seeds"]),
    r"builds\s+in\s+([\d.]+)\s+minutes\s+from\s+a\s+clean\s+clone": lambda: round(headline()["clean_run_seconds"] / 60, 1),
    r"after\s+([\d.]+)\s+minutes\s+of\s+`make\s+setup`": lambda: round(headline()["setup_seconds"] / 60, 1),
}
# names that hold digits but state no number; everything else with a digit outside code, links and the verdict
# table is a number the README states, and is refused
NAMES = ("BM25", "ICLR 2020", "Table 1")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def text() -> str:
    return README.read_text(encoding="utf-8")


def verdict_lines(readme: str) -> list[str]:
    """The lines of the first table after the '## Did it reproduce?' heading."""
    assert "## Did it reproduce?" in readme
    section = readme.split("## Did it reproduce?", 1)[1].split("\n## ", 1)[0]
    lines, started = [], False
    for line in section.splitlines():
        if line.strip().startswith("|"):
            lines.append(line)
            started = True
        elif started:
            break
    return lines


def verdict_table(readme: str) -> tuple[list[str], list[list[str]]]:
    """The verdict table's header and rows (the separator line left out)."""
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in verdict_lines(readme)]
    assert len(cells) >= 3, "the verdict table is missing from 'Did it reproduce?'"
    return cells[0], cells[2:]


def table_key(first_cell: str) -> str:
    """The row's results key from its link: docs/chang2020.md -> chang2020."""
    match = LINK.search(first_cell)
    assert match, f"verdict table row without a link to its page: {first_cell!r}"
    return Path(match.group(2)).stem


def tables_of(key: str, tables: pd.Series) -> pd.Series:
    """check.csv's tables of a row: a paper's tables and figures as data/papers/papers.yaml declares them, else
    (the zero-shot reference) those under results/<key>/."""
    from towers.reports import papers

    declared = papers.load(root=ROOT)
    if key in declared:
        return tables[tables.isin([t["name"] for kind in ("tables", "figures") for t in declared[key][kind]])]
    return tables[tables.str.startswith(key + "/")]


def count(cell: str) -> int | None:
    return None if cell in ("–", "-", "—", "") else int(cell.replace(",", ""))


def test_readme_is_short_and_no_diary():
    readme = text()
    assert len(readme.splitlines()) <= MAX_LINES
    for word in DIARY_WORDS:
        assert word not in readme.lower(), f"README says {word!r}: lab-diary prose belongs nowhere, facts in docs/"


def test_readme_links_resolve():
    targets = [t for _, t in LINK.findall(text()) if not re.match(r"[a-z]+:|#", t)]
    assert targets
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def check_verdicts(readme: str) -> None:
    header, rows = verdict_table(readme)
    claims = pd.read_csv(ROOT / "results/claims.csv")
    per_claim = claims.groupby(["paper", "claim"])["claim verdict"].agg(set)
    assert (per_claim.map(len) == 1).all(), "a claim with more than one verdict in results/claims.csv"
    verdict = per_claim.map(lambda s: next(iter(s))).reset_index()
    assert set(verdict["claim verdict"]) <= set(VERDICTS.values()), "a verdict the README's table has no column for"
    assert set(VERDICTS) <= set(header) and "claims" in header
    seen = set()
    for row in rows:
        key = table_key(row[0])
        cells = dict(zip(header, row))
        if key not in set(verdict["paper"]):   # a row without claims (the zero-shot reference)
            assert all(count(cells[c]) is None for c in [*VERDICTS, "claims"]), f"{key}: claims counted for no paper"
            continue
        seen.add(key)
        mine = verdict[verdict["paper"] == key]["claim verdict"]
        assert count(cells["claims"]) == len(mine), f"{key}: claims"
        for column, name in VERDICTS.items():
            assert count(cells[column]) == int((mine == name).sum()), f"{key}: {column}"
    assert seen == set(verdict["paper"]), "a paper of results/claims.csv has no row in the README's table"


def check_cells(readme: str) -> None:
    header, rows = verdict_table(readme)
    check = pd.read_csv(ROOT / "results/check.csv")
    covered = []
    for row in rows:
        key = table_key(row[0])
        tables = tables_of(key, check["table"])
        assert len(tables), f"{key}: no table of it in results/check.csv"
        covered.extend(tables.index)
        ok, of = re.fullmatch(r"([\d,]+) of ([\d,]+)", dict(zip(header, row))["cells OK"]).groups()
        assert count(of) == len(tables), f"{key}: cells checked"
        assert count(ok) == int((check.loc[tables.index, "status"] == "OK").sum()), f"{key}: cells OK"
    assert sorted(covered) == list(check.index), "every checked cell belongs to exactly one row of the table"


def check_sourced(readme: str) -> None:
    """Each number of SOURCED is on the first screen, and wherever the README states it, it is its source's."""
    screen = "\n".join(readme.splitlines()[:FIRST_SCREEN])
    for pattern, source in SOURCED.items():
        assert re.search(pattern, screen), f"the first screen no longer states {pattern!r}"
        for stated in re.findall(pattern, readme):
            expected = source()
            if isinstance(expected, str):   # a commit (its short form) or a date
                assert expected.startswith(stated), f"README says {stated} ({pattern!r}), its source {expected}"
            else:
                assert float(stated) == float(expected), f"README says {stated} ({pattern!r}), its source {expected}"


def prose(readme: str) -> str:
    """The README without what the other tests read or what states no number: code blocks and spans, link
    targets, the verdict table's rows, the first screen's sourced numbers, and names that hold digits."""
    table = set(verdict_lines(readme))
    readme = "\n".join(line for line in readme.splitlines() if line not in table)
    for pattern in SOURCED:
        readme = re.sub(pattern, lambda m: m.group(0).replace(m.group(1), "", 1), readme)
    readme = re.sub(r"```.*?```", "", readme, flags=re.S)
    readme = re.sub(r"`[^`]*`", "", readme)
    readme = LINK.sub(lambda m: m.group(1), readme)
    for name in NAMES:
        readme = readme.replace(name, "")
    return readme


def numbers(readme: str) -> list[str]:
    return re.findall(r"\S*\d\S*", prose(readme))


def test_readme_states_no_other_number():
    stated = numbers(text())
    assert not stated, f"numbers in the README that no test checks (move them to docs/): {stated}"


def test_verdict_counts_match_claims():
    check_verdicts(text())


def test_cell_counts_match_check():
    check_cells(text())


@pytest.mark.parametrize("check, cell, wrong", [(check_verdicts, "| 17 |", "| 18 |"),
                                                (check_verdicts, "| 3 | 4 | 0 |", "| 4 | 3 | 0 |"),
                                                (check_cells, "| 283 of 283 |", "| 283 of 284 |"),
                                                (check_cells, "| 212 of 212 |", "| 211 of 212 |")])
def test_a_wrong_count_fails(check, cell, wrong):
    """The checks can fail: a README whose table says other than the results is refused."""
    readme = text()
    assert cell in readme
    with pytest.raises(AssertionError):
        check(readme.replace(cell, wrong, 1))


def test_first_screen_numbers_match_their_sources():
    check_sourced(text())


@pytest.mark.parametrize("stated, wrong", [("74.0 minutes", "69.0 minutes"), ("on 2 cores", "on 4 cores"),
                                           ("AMD EPYC, AVX512 kernels", "Intel Xeon, AVX2 kernels"),
                                           ("18.48 minutes on eight", "13.48 minutes on eight"), ("`4a0d549`", "`44b82e4`"),
                                           ("critical path 8.5 minutes", "critical path 3.5 minutes"),
                                           ("inference in bfloat16", "inference in float32"),
                                           ("32-token queries", "64-token queries"),
                                           ("pre-training: 800 steps", "pre-training: 400 steps")])
def test_a_wrong_first_screen_number_fails(stated, wrong):
    """The check can fail: a first screen whose time, cores or scale say other than their sources is refused,
    and one that drops them too."""
    readme = text()
    assert stated in readme
    with pytest.raises(AssertionError):
        check_sourced(readme.replace(stated, wrong, 1))
    with pytest.raises(AssertionError):
        check_sourced(readme.replace(stated, "", 1))


def headline_verdict(readme: str) -> str:
    found = re.search(r"\(`qb-3`\)[^*]*?on\s+this\s+profile\s+it\s+is\s+\*\*([a-z ,]+)\*\*", readme)
    assert found, "the first screen no longer says what Table 1's headline claim (qb-3) comes to"
    assert found.start() < len("\n".join(readme.splitlines()[:FIRST_SCREEN])), "qb-3's verdict is below the first screen"
    return found.group(1)


def test_the_first_screen_says_table_1s_verdict_as_the_claims_do():
    claims = pd.read_csv(ROOT / "results/claims.csv")
    verdict = claims.loc[claims["claim"] == "qb-3", "claim verdict"].iloc[0]
    assert headline_verdict(text()) == verdict
    other = "holds" if verdict != "holds" else "contradicted"
    assert headline_verdict(text().replace(f"**{verdict}**", f"**{other}**")) != verdict


def test_a_stray_number_fails():
    assert numbers(text() + "\nBM25 reaches 0.88 here, `0.9` in code.\n") == ["0.88"]


def test_the_layout_matches_the_tree():
    """Every src/towers package is in "Where things live", and every path it names exists."""
    layout = text().split("## Where things live", 1)[1].split("```", 2)[1]
    named = {path for line in layout.strip().splitlines() for path in re.split(r",\s*", line[:38].strip())
             if path.startswith("src/towers/")}
    packages = {f"src/towers/{p.name}/" for p in (ROOT / "src/towers").iterdir() if (p / "__init__.py").is_file()}
    assert packages <= named, sorted(packages - named)
    for line in layout.strip().splitlines():
        for path in re.split(r",\s*", line[:38].strip()):
            if "*" not in path:
                assert (ROOT / path).exists(), path
