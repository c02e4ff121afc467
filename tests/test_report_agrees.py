"""The committed results/report.html (towers.reports.page) says what results/check.csv and claims.csv say: a page
left over from an older build shows verdicts and statuses the CSVs no longer have. Each helper takes (html_text,
check, claims) and returns one line per disagreement, so a test can feed it an altered CSV and see it caught."""
import math
from collections import Counter
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from towers.reports import papers as paper_list
from towers.reports.page import CHECK_STYLE

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DECLARED = paper_list.load(root=ROOT)
OWNER = {t["name"]: p["id"] for p in DECLARED.values() for kind in ("tables", "figures") for t in p[kind]}
FIGURES = {f["name"] for p in DECLARED.values() for f in p["figures"]}   # shown as images: no cells to shade
SUMMARY_STATUSES = ("OK", "OKish", "FAIL", "MISSING")   # what summary_block prints (NEW and -- have no expectation)
SHADE = {style: status for status, style in CHECK_STYLE.items()}
NUMBERS = ("value higher", "value lower", "difference", "p", "p (Holm)")


class Tables(HTMLParser):
    """Every <table> in document order: its rows of cells ({text, style, href}), the h2 id and h3 text above it,
    and for a table inside another's cell, parent = (that table's index, row index)."""

    def __init__(self):
        super().__init__()
        self.tables, self.open, self.h2, self.h3, self.in_h3 = [], [], "", "", False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h2":
            self.h2, self.h3 = attrs.get("id", ""), ""
        elif tag == "h3":
            self.h3, self.in_h3 = "", True
        elif tag == "table":
            parent = (self.open[-1], len(self.tables[self.open[-1]]["rows"]) - 1) if self.open else None
            self.tables.append({"rows": [], "h2": self.h2, "h3": self.h3, "parent": parent})
            self.open.append(len(self.tables) - 1)
        elif tag == "tr" and self.open:
            self.tables[self.open[-1]]["rows"].append([])
        elif tag in ("td", "th") and self.open:
            self.tables[self.open[-1]]["rows"][-1].append({"text": "", "style": attrs.get("style") or "", "href": ""})
        elif tag == "a" and self.cell() is not None and not self.cell()["href"]:
            self.cell()["href"] = attrs.get("href", "")

    def handle_endtag(self, tag):
        if tag == "table" and self.open:
            self.open.pop()
        self.in_h3 = self.in_h3 and tag != "h3"

    def handle_data(self, data):
        if self.in_h3:
            self.h3 += data
        elif self.cell() is not None:
            self.cell()["text"] += data

    def cell(self):
        rows = self.tables[self.open[-1]]["rows"] if self.open else []
        return rows[-1][-1] if rows and rows[-1] else None


@lru_cache(maxsize=4)
def tables_of(html_text: str) -> list[dict]:
    parser = Tables()
    parser.feed(html_text)
    return parser.tables


def texts(row) -> list[str]:
    return [c["text"].strip() for c in row]


def summary_rows(html_text):
    """{paper id: (header texts, cell texts)} of the summary table (the paper is its link's #id)."""
    table = next((t for t in tables_of(html_text) if t["rows"] and texts(t["rows"][0])[0] == "paper"
                  and texts(t["rows"][0])[-1] == "table cells against expected values"), None)
    assert table is not None, "the report has no summary table (paper | verdicts | table cells ...)"
    return {r[0]["href"].lstrip("#"): (texts(table["rows"][0]), texts(r)) for r in table["rows"][1:]}


def verdict_count_problems(html_text, check, claims) -> list[str]:
    # summary_block: one verdict per claim (its first row), counted per paper; an empty cell is 0
    shown = {paper: Counter({v: int(n) for v, n in zip(head[1:-1], cells[1:-1]) if n})
             for paper, (head, cells) in summary_rows(html_text).items()}
    counted = {paper: Counter(claims[claims["paper"] == paper].drop_duplicates("claim")["claim verdict"])
               for paper in dict.fromkeys([*shown, *claims["paper"].unique()])}
    return [f"{paper}: summary shows verdicts {dict(shown.get(paper, {}))}, claims.csv has {dict(n)}"
            for paper, n in counted.items() if shown.get(paper) != n]


def check_count_problems(html_text, check, claims, owner=OWNER) -> list[str]:
    problems = []
    for paper, (_, cells) in summary_rows(html_text).items():
        shown = Counter({s: int(n.replace(",", "")) for n, s in (p.split(" ", 1) for p in cells[-1].split(", ") if p)})
        status = Counter(check[check["table"].map(owner.get) == paper]["status"])
        counted = Counter({s: status[s] for s in SUMMARY_STATUSES if status[s]})
        if shown != counted:
            problems.append(f"{paper}: summary shows check {dict(shown)}, check.csv has {dict(counted)}")
    return problems


def agrees_as_printed(text: str, value) -> bool:
    """The printed number is `value` to the digits printed (pandas' to_html: '5.56', '3.406000e-142'; NaN: '')."""
    if pd.isna(value) or text == "":
        return pd.isna(value) and text == ""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    tolerance = 0.5 * 10.0 ** (int(exponent or 0) - decimals)
    return abs(float(text) - float(value)) <= tolerance * (1 + 1e-9) + 4 * math.ulp(float(value))


def claim_problems(html_text, check, claims) -> list[str]:
    # claims_block: one row a claim (badge, id, ...), its parts in a table folded inside that row
    tables, problems, shown = tables_of(html_text), [], set()
    for index, table in enumerate(tables):
        if not table["rows"] or texts(table["rows"][0])[:2] != ["verdict", "claim"] or table["parent"] is not None:
            continue
        for i, row in enumerate(table["rows"][1:], start=1):
            paper, (verdict, claim) = table["h2"], texts(row)[:2]
            shown.add((paper, claim))
            parts = claims[(claims["paper"] == paper) & (claims["claim"] == claim)]
            if parts.empty:
                problems.append(f"{paper} {claim}: in the report, not in claims.csv")
                continue
            expected = parts["claim verdict"].iloc[0]   # the same on every row of a claim
            if verdict != expected:
                problems.append(f"{paper} {claim}: report says {verdict!r}, claims.csv {expected!r}")
            detail = next((t for t in tables if t["parent"] == (index, i)), {"rows": [[]]})
            head, printed = texts(detail["rows"][0]), [texts(r) for r in detail["rows"][1:]]
            if len(printed) != len(parts):
                problems.append(f"{paper} {claim}: report shows {len(printed)} parts, claims.csv has {len(parts)}")
                continue
            for cells, (_, part) in zip(printed, parts.iterrows()):
                where = dict(zip(head, cells))
                if where.get("verdict") != part["verdict"]:
                    problems.append(f"{paper} {claim} {part['part']}: part verdict {where.get('verdict')!r} "
                                    f"in the report, {part['verdict']!r} in claims.csv")
                for column in (c for c in NUMBERS if c in where):
                    if not agrees_as_printed(where[column], part[column]):
                        problems.append(f"{paper} {claim} {part['part']}: {column} printed {where[column]!r}, "
                                        f"claims.csv has {part[column]!r}")
    for paper, claim in sorted(set(map(tuple, claims[["paper", "claim"]].values)) - shown):
        problems.append(f"{paper} {claim}: in claims.csv, not in the report")
    return problems


def shading_problems(html_text, check, claims) -> list[str]:
    # paper_layout shades a cell with CHECK_STYLE[status]; the layout is the first table under a table's <h3>
    layouts = {}
    for table in (t for t in tables_of(html_text) if t["h3"] and t["parent"] is None):
        layouts.setdefault(table["h3"].strip(), table)
    shaded = Counter((name, SHADE[c["style"]]) for name, t in layouts.items()
                     for row in t["rows"] for c in row if c["style"] in SHADE)
    flagged = check[~check["table"].isin(FIGURES) & check["status"].isin(list(CHECK_STYLE))]
    counted = Counter(zip(flagged["table"], flagged["status"]))
    problems = [f"{name}: check.csv has rows for it, the report shows no such table"
                for name in sorted(set(check["table"]) - FIGURES - set(layouts))]
    for key in sorted(set(shaded) | set(counted)):
        # a MISSING cell that no table has any more has no cell to shade: at most that many
        if shaded[key] > counted[key] if key[1] == "MISSING" else shaded[key] != counted[key]:
            problems.append(f"{key[0]}: {shaded[key]} cells shaded {key[1]} in the report, "
                            f"check.csv has {counted[key]} {key[1]} rows")
    return problems


def problems_of(html_text, check, claims) -> list[str]:
    return [p for helper in (verdict_count_problems, check_count_problems, claim_problems, shading_problems)
            for p in helper(html_text, check, claims)]


@pytest.fixture(scope="module")
def committed():
    check = pd.read_csv(RESULTS / "check.csv", keep_default_na=False, na_values={"difference": [""]})  # as read_check
    return (RESULTS / "report.html").read_text(), check, pd.read_csv(RESULTS / "claims.csv")


def test_report_agrees_with_check_and_claims(committed):
    problems = problems_of(*committed)
    if problems:   # pytest.fail, not assert: the message alone, without the CSVs' repr
        pytest.fail(f"results/report.html disagrees with check.csv/claims.csv in {len(problems)} places (rebuild "
                    "it: snakemake results/report.html):\n" + "\n".join(problems[:40]), pytrace=False)


def caught(committed, check=None, claims=None) -> list[str]:
    """The disagreements an altered copy adds to those of the committed CSVs."""
    html_text, original_check, original_claims = committed
    before = set(problems_of(html_text, original_check, original_claims))
    after = problems_of(html_text, original_check if check is None else check,
                        original_claims if claims is None else claims)
    return [p for p in after if p not in before]


def test_a_changed_claim_verdict_is_caught(committed):
    claims = committed[2].copy()
    paper, claim, verdict = claims.iloc[0][["paper", "claim", "claim verdict"]]
    other = next(v for v in claims["claim verdict"].unique() if v != verdict)
    claims.loc[(claims["paper"] == paper) & (claims["claim"] == claim), "claim verdict"] = other
    new = caught(committed, claims=claims)
    assert any(p.startswith(f"{paper} {claim}: report says {verdict!r}") for p in new), new
    assert any(p.startswith(f"{paper}: summary shows verdicts") for p in new), new


def test_a_changed_number_is_caught(committed):
    claims = committed[2].copy()
    row = claims["p (Holm)"].first_valid_index()
    claims.loc[row, "p (Holm)"] = claims.loc[row, "p (Holm)"] * 10 + 0.01
    paper, claim = claims.loc[row, ["paper", "claim"]]
    assert any(p.startswith(f"{paper} {claim} ") and "p (Holm) printed" in p for p in caught(committed, claims=claims))


def test_a_cell_turned_fail_is_caught(committed):
    check = committed[1].copy()
    row = check[(check["status"] == "OK") & check["table"].map(OWNER).notna() & ~check["table"].isin(FIGURES)].index[0]
    check.loc[row, "status"] = "FAIL"
    table = check.loc[row, "table"]
    new = caught(committed, check=check)
    assert any(p.startswith(f"{OWNER[table]}: summary shows check") for p in new), new
    assert any(p.startswith(f"{table}: ") and "FAIL" in p for p in new), new


def unread_changes(record: dict, root: Path = ROOT) -> list[str]:
    """The files the report stage read (its record's `read` digests) that differ now, or are gone."""
    from towers.digests import file_digest

    read = record.get("counts", {}).get("read")
    if not read:
        return ["the report's record names no files it read (made before it recorded them: rebuild it)"]
    return [f"{path}: changed since the report read it" if (root / path).exists() else f"{path}: gone"
            for path, sha in read.items() if not (root / path).exists() or file_digest(root / path)["sha256"] != sha]


def test_the_report_was_made_from_the_committed_tables_figures_and_verdicts():
    """Every table's numbers, not only the claims': the page was made from exactly the committed files."""
    import json

    problems = unread_changes(json.loads((RESULTS / "report.html.meta.json").read_text()))
    assert not problems, "results/report.html is stale (snakemake results/report.html):\n" + "\n".join(problems)


def test_an_edited_table_after_the_report_is_caught(tmp_path):
    (tmp_path / "results").mkdir()
    table = tmp_path / "results/table1.csv"
    table.write_text("a,b\n1,2\n")
    from towers.digests import file_digest

    record = {"counts": {"read": {"results/table1.csv": file_digest(table)["sha256"]}}}
    assert unread_changes(record, tmp_path) == []
    table.write_text("a,b\n1,3\n")
    assert unread_changes(record, tmp_path) == ["results/table1.csv: changed since the report read it"]
