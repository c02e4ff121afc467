"""Each paper page's table of verdicts, written from results/claims.csv so the page cannot drift from the build.

    python -m towers.reports.verdict_pages           rewrite the block between the markers of every docs/<paper>.md
    python -m towers.reports.verdict_pages --check   exit 1, naming the page, when a block is not what claims.csv says

A page holds one block, `<!-- verdicts: begin -->` ... `<!-- verdicts: end -->`: a row a claim, its verdict, and each
part it was tested on (the two cells compared, the Holm-corrected p, the part's own verdict). The prose around the
block says why; the numbers live only here."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

BEGIN, END = "<!-- verdicts: begin -->", "<!-- verdicts: end -->"
ROOT = Path(".")


def number(value) -> str:
    """A cell with two decimals, or two significant digits below 0.01 (0 stays 0.00)."""
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g}"


def p_value(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def part_text(row: pd.Series) -> str:
    """One tested part: where, the two sides with their values, the corrected p and the part's verdict."""
    where = row["part"]
    if isinstance(row.get("bound"), str):
        where += f" ({row['bound']})"
    sides = f"{row['higher']} {number(row['value higher'])} vs {row['lower']} {number(row['value lower'])}"
    return f"{where}: {sides}, Holm p {p_value(row['p (Holm)'])}, {row['verdict']}".replace("|", "\\|")


def block(claims: pd.DataFrame, paper: str) -> str:
    """The Markdown table of one paper's claims, in claims.csv's order."""
    rows = ["| claim | verdict | parts: the cells compared, Holm p, the part's verdict |", "|---|---|---|"]
    mine = claims[claims["paper"] == paper]
    for claim, parts in mine.groupby("claim", sort=False):
        first = parts.iloc[0]
        statement = f"**{claim}** {first['statement']}".replace("|", "\\|")
        tested = parts[parts["part"].notna()]
        said = "<br>".join(part_text(row) for _, row in tested.iterrows()) if len(tested) else str(first["reason"])
        rows.append(f"| {statement} | {first['claim verdict']} | {said} |")
    return "\n".join(rows)


def page_of(paper: str, root: Path = ROOT) -> Path:
    return root / "docs" / f"{paper}.md"


def rewritten(text: str, table: str, page: Path) -> str:
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"{page}: needs one '{BEGIN}' and one '{END}'")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def stale_pages(claims: pd.DataFrame, root: Path = ROOT, write: bool = False) -> list[Path]:
    """Pages whose block is not claims.csv's (rewritten when `write`)."""
    stale = []
    for paper in claims["paper"].drop_duplicates():
        page = page_of(paper, root)
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
        stale = stale_pages(pd.read_csv(args.claims), write=not args.check)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    said = ("its verdict table is not results/claims.csv (python -m towers.reports.verdict_pages)" if args.check
            else "rewritten")
    for page in stale:
        print(f"{page}: {said}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
