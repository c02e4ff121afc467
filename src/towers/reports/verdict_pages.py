"""Each paper page's table of verdicts, written from results/claims.csv so the page cannot drift from the build.

    python -m towers.reports.verdict_pages           rewrite the block between the markers of every docs/<paper>.md
    python -m towers.reports.verdict_pages --check   exit 1, naming the page, when a block is not what claims.csv says

A page holds one block, `<!-- verdicts: begin -->` ... `<!-- verdicts: end -->`: a row a claim, its verdict, and each
part it was tested on (the two cells compared, the Holm-corrected p, the part's own verdict, the smallest difference
its paired test detects at 80% power, also with the questions of one article counted as correlated; where
claims.csv reads it on the unexposed test questions too, that reading beside it). The prose around the
block says why; the numbers live only here. Every paper of data/papers/papers.yaml has a page and claims: a paper
claims.csv lacks is an error (its page would keep verdicts the claims no longer have), as is a claims file missing a
column or holding a p or value that is not a number; each is one line naming the file or page."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from ..config.params_check import ParamsError
from ..verdicts.checks import as_numbers
from .papers import load as load_papers

BEGIN, END = "<!-- verdicts: begin -->", "<!-- verdicts: end -->"
ROOT = Path(".")
COLUMNS = ["paper", "claim", "statement", "part", "bound", "higher", "lower", "value higher", "value lower", "p (Holm)",
           "verdict", "reason", "claim verdict"]          # what a page shows
NUMBER_COLUMNS = ["value higher", "value lower", "p (Holm)"]
UNEXPOSED_NUMBERS = ["unexposed n", "unexposed p (Holm)"]   # only where a paper is read on unexposed questions
# claims.csv made before power was stated per comparison lacks these: its pages say nothing of it
POWER_NUMBERS = ["detectable", "detectable clustered", "unexposed detectable", "unexposed detectable clustered"]


def read_claims(path) -> pd.DataFrame:
    """claims.csv with the columns a page shows, its numbers as numbers; ValueError naming the file and the
    column (and row) otherwise."""
    try:
        claims = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: empty (not even a header)") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"{path}: cannot read it ({str(err).strip()})") from None
    missing = [column for column in COLUMNS if column not in claims]
    if missing:
        raise ValueError(f"{path}: no {missing[0]!r} column")
    for column in NUMBER_COLUMNS + [column for column in UNEXPOSED_NUMBERS + POWER_NUMBERS if column in claims]:
        numbers, bad = as_numbers(claims[column])
        if bad is not None:
            raise ValueError(f"{path}: row {bad + 1} (claim {claims.loc[bad, 'claim']}), column {column!r}: "
                             f"{claims.loc[bad, column]!r} is not a number")
        claims[column] = numbers
    return claims


def cell(text) -> str:
    """A table cell's text: a line break or `|` would split the row (Markdown ends a row at a line end)."""
    return str(text).replace("|", "\\|").replace("\r\n", "<br>").replace("\r", "<br>").replace("\n", "<br>")


def number(value) -> str:
    """A cell with two decimals, or two significant digits below 0.1 (0.049, LTRe's 0.0049 hours; 0 stays 0.00)."""
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


def p_value(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def power_text(row: pd.Series, prefix: str = "") -> str:
    """', detectable 0.041 (0.047 by article)': the smallest difference the part's paired test detects at 80%
    power, and with the questions of one article correlated; '' for a part with no paired test (or a claims.csv
    made before power was stated per comparison)."""
    size = row.get(f"{prefix}detectable")
    if not present(size):
        return ""
    clustered = row.get(f"{prefix}detectable clustered")
    by_article = f"{significant(clustered)} by article" if present(clustered) else "article unknown"
    return f", detectable {significant(size)} ({by_article})"


def significant(value) -> str:
    """Two significant digits, without an exponent where the number is not tiny (0.041, 3.4, 250)."""
    return f"{float(f'{value:.2g}'):g}"


def part_text(row: pd.Series) -> str:
    """One tested part: where, the two sides with their values, the corrected p, the part's verdict and the
    difference its test detects."""
    where = row["part"]
    if isinstance(row.get("bound"), str):
        where += f" ({row['bound']})"
    sides = f"{row['higher']} {number(row['value higher'])} vs {row['lower']} {number(row['value lower'])}"
    text = f"{where}: {sides}, Holm p {p_value(row['p (Holm)'])}, {row['verdict']}{power_text(row)}"
    if isinstance(row.get("unexposed verdict"), str) and row["unexposed verdict"]:
        text += (f"; on the {row['unexposed n']:.0f} unexposed test questions: Holm p "
                 f"{p_value(row['unexposed p (Holm)'])}, {row['unexposed verdict']}{power_text(row, 'unexposed ')}")
    return cell(text)


def block(claims: pd.DataFrame, paper: str) -> str:
    """The Markdown table of one paper's claims, in claims.csv's order."""
    header = "the cells compared, Holm p, the part's verdict"
    if "detectable" in claims:
        header += (", the smallest difference its paired test detects at 80% power (by article: an article's "
                   "questions correlated)")
    rows = [f"| claim | verdict | parts: {header} |", "|---|---|---|"]
    mine = claims[claims["paper"] == paper]
    for claim, parts in mine.groupby("claim", sort=False):
        first = parts.iloc[0]
        statement = cell(f"**{claim}** {first['statement']}")
        tested = parts[parts["part"].notna()]
        said = "<br>".join(part_text(row) for _, row in tested.iterrows()) if len(tested) else cell(first["reason"])
        verdict = first["claim verdict"]
        if isinstance(first.get("unexposed claim verdict"), str) and first["unexposed claim verdict"]:
            verdict += f"<br>unexposed test questions: {first['unexposed claim verdict']}"
        rows.append(f"| {statement} | {cell(verdict)} | {said} |")
    return "\n".join(rows)


def page_of(paper: str, root: Path = ROOT) -> Path:
    return root / "docs" / f"{paper}.md"


def rewritten(text: str, table: str, page: Path) -> str:
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"{page}: needs one '{BEGIN}' and one '{END}'")
    if text.index(END) < text.index(BEGIN):
        raise ValueError(f"{page}: '{END}' comes before '{BEGIN}'")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def stale_pages(claims: pd.DataFrame, root: Path = ROOT, write: bool = False, papers: dict | None = None,
                source="results/claims.csv") -> list[Path]:
    """Pages whose block is not claims.csv's (rewritten when `write`): every page of `papers` (default:
    data/papers/papers.yaml's), under `root`. ValueError for a paper without claims (`source`: the claims' file,
    for the message), claims of an undeclared paper, or a page that is missing or has no block."""
    papers = load_papers() if papers is None else papers
    undeclared = [paper for paper in claims["paper"].drop_duplicates() if paper not in papers]
    if undeclared:
        raise ValueError(f"{source}: claims of paper {undeclared[0]!r}, which data/papers/papers.yaml does not declare")
    stale = []
    for paper, declared in papers.items():
        page = root / declared["docs"]
        if not (claims["paper"] == paper).any():
            raise ValueError(f"{page}: {source} has no claims of paper {paper}; the page's verdicts cannot be checked "
                             "or rewritten (build the claims of every paper)")
        if not page.is_file():
            raise ValueError(f"{page}: no such page (the docs of paper {paper} in data/papers/papers.yaml)")
        text = page.read_text()
        new = rewritten(text, block(claims, paper), page)
        if new != text:
            stale.append(page)
            if write:
                page.write_text(new)
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=Path, default=Path("results/claims.csv"))
    parser.add_argument("--check", action="store_true", help="only say which pages differ (exit 1)")
    args = parser.parse_args(argv)
    try:
        stale = stale_pages(read_claims(args.claims), write=not args.check, source=args.claims)
    except (OSError, ValueError, ParamsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    said = (f"its verdict table is not {args.claims} (python -m towers.reports.verdict_pages)" if args.check
            else "rewritten")
    for page in stale:
        print(f"{page}: {said}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
