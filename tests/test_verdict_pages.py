"""Each paper page's verdict table is what results/claims.csv says (towers.reports.verdict_pages)."""
from pathlib import Path

import pandas as pd
import pytest

from towers.reports import verdict_pages

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def claims():
    return pd.read_csv(ROOT / "results/claims.csv")


def test_every_paper_page_holds_the_committed_verdicts(claims):
    assert verdict_pages.stale_pages(claims, ROOT) == [], "run: python -m towers.reports.verdict_pages"


def copy_pages(tmp_path, claims):
    (tmp_path / "docs").mkdir()
    for paper in claims["paper"].unique():
        (tmp_path / "docs" / f"{paper}.md").write_text(verdict_pages.page_of(paper, ROOT).read_text())


def test_a_moved_value_or_verdict_makes_its_page_stale(tmp_path, claims):
    copy_pages(tmp_path, claims)
    moved = claims.copy()
    row = moved.index[(moved["paper"] == "repbert") & moved["part"].notna()][0]
    moved.loc[row, "value higher"] += 1.0
    assert verdict_pages.stale_pages(moved, tmp_path) == [tmp_path / "docs/repbert.md"]
    moved = claims.copy()
    moved.loc[moved["claim"] == "ltre-1", "claim verdict"] = "holds" if (
        claims.loc[claims["claim"] == "ltre-1", "claim verdict"].iloc[0] != "holds") else "contradicted"
    assert verdict_pages.stale_pages(moved, tmp_path, write=True) == [tmp_path / "docs/ltre.md"]
    assert verdict_pages.stale_pages(moved, tmp_path) == []   # rewritten, and nothing else on the page moved
    page = (tmp_path / "docs/ltre.md").read_text()
    assert page.replace(verdict_pages.block(moved, "ltre"), verdict_pages.block(claims, "ltre")) == \
        verdict_pages.page_of("ltre", ROOT).read_text()


def test_a_page_without_its_markers_is_named(tmp_path, claims, capsys):
    copy_pages(tmp_path, claims)
    page = tmp_path / "docs/chang2020.md"
    page.write_text(page.read_text().replace(verdict_pages.END, ""))
    with pytest.raises(ValueError, match=f"^{page}: needs one"):
        verdict_pages.stale_pages(claims, tmp_path)


def test_small_values_keep_their_digits():
    assert verdict_pages.number(0.0042) == "0.0042" and verdict_pages.number(13.125) == "13.12"
    assert verdict_pages.p_value(2.3e-14) == "2.3e-14" and verdict_pages.p_value(0.0349) == "0.035"


def test_each_part_says_the_difference_its_test_detects(claims):
    row = claims[claims["part"].notna()].iloc[0].copy()
    before = row.drop(["detectable", "detectable clustered"], errors="ignore")   # a claims.csv from before
    assert "detectable" not in verdict_pages.part_text(before)
    row["detectable"], row["detectable clustered"] = 0.04123, 0.0475
    assert verdict_pages.part_text(row).endswith(f"{row['verdict']}, detectable 0.041 (0.048 by article)")
    row["detectable clustered"] = float("nan")   # no article known for its queries (or paired over steps)
    assert verdict_pages.part_text(row).endswith(", detectable 0.041 (article unknown)")
    row["unexposed verdict"], row["unexposed n"], row["unexposed p (Holm)"] = "holds", 181, 0.01
    row["unexposed detectable"], row["unexposed detectable clustered"] = 3.456, 251.0
    assert verdict_pages.part_text(row).endswith("holds, detectable 3.5 (250 by article)")
    with_power = claims.assign(**{"detectable": 0.05, "detectable clustered": 0.06})
    without = claims.drop(columns=["detectable", "detectable clustered"], errors="ignore")
    assert "80% power" in verdict_pages.block(with_power, "ltre") and "80% power" not in verdict_pages.block(
        without, "ltre")


def _check(capsys, claims_csv) -> tuple[int, str]:
    """main --check on a claims file against the committed pages: its exit code and the one line it prints."""
    code = verdict_pages.main(["--claims", str(claims_csv), "--check"])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return code, err


def test_a_paper_without_claims_fails_naming_its_page(tmp_path, claims, capsys):
    """Before: its page kept verdicts the claims no longer had and --check passed."""
    without = tmp_path / "claims.csv"
    claims[claims["paper"] != "ltre"].to_csv(without, index=False)
    assert _check(capsys, without) == (2, f"error: docs/ltre.md: {without} has no claims of paper ltre; the page's "
                                          "verdicts cannot be checked or rewritten (build the claims of every paper)")
    claims.head(0).to_csv(without, index=False)   # a header and no claims: the first paper's page is named
    code, said = _check(capsys, without)
    assert code == 2 and said.startswith(f"error: docs/chang2020.md: {without} has no claims of paper chang2020")
    without.write_text("")
    assert _check(capsys, without) == (2, f"error: {without}: empty (not even a header)")
    stray = claims.copy()
    stray.loc[stray.index[-1], "paper"] = "nobody"
    stray.to_csv(without, index=False)
    assert _check(capsys, without) == (2, f"error: {without}: claims of paper 'nobody', which "
                                          "data/papers/papers.yaml does not declare")


def test_a_line_break_or_bar_in_a_claim_stays_in_its_row(tmp_path, claims):
    """Before: a statement's line break split its row, on the page as in what the check compared, and it passed."""
    copy_pages(tmp_path, claims)
    moved = claims.copy()
    moved.loc[moved["claim"] == "ltre-1", "statement"] = "First line\nsecond line | with a bar\r\nand a third."
    moved.loc[moved["claim"] == "ltre-2", "claim verdict"] = "holds\nor not"
    table = verdict_pages.block(moved, "ltre")
    assert len(table.splitlines()) == 2 + moved.loc[moved["paper"] == "ltre", "claim"].nunique()
    assert "| **ltre-1** First line<br>second line \\| with a bar<br>and a third. |" in table
    assert verdict_pages.stale_pages(moved, tmp_path, write=True) == [tmp_path / "docs/ltre.md"]
    assert verdict_pages.stale_pages(moved, tmp_path) == []
    page = (tmp_path / "docs/ltre.md").read_text()
    for claim in moved.loc[moved["paper"] == "ltre", "claim"].unique():   # every claim is one row of its page
        assert sum(line.startswith(f"| **{claim}** ") for line in page.splitlines()) == 1


def test_markers_in_the_wrong_order_are_named(tmp_path, claims):
    copy_pages(tmp_path, claims)
    page = tmp_path / "docs/repbert.md"
    text = page.read_text()
    page.write_text(text.replace(verdict_pages.BEGIN, "@@").replace(verdict_pages.END, verdict_pages.BEGIN)
                    .replace("@@", verdict_pages.END))
    with pytest.raises(ValueError) as caught:   # before: "not enough values to unpack", naming no page
        verdict_pages.stale_pages(claims, tmp_path)
    assert str(caught.value) == f"{page}: '{verdict_pages.END}' comes before '{verdict_pages.BEGIN}'"


@pytest.mark.parametrize("edit, problem", [
    (lambda c: c.drop(columns=["statement"]), "no 'statement' column"),
    (lambda c: c.drop(columns=["p (Holm)"]), "no 'p (Holm)' column"),
    (lambda c: c.astype({"p (Holm)": object}).assign(**{"p (Holm)": ["small"] + [0.5] * (len(c) - 1)}),
     "row 1 (claim chang-1), column 'p (Holm)': 'small' is not a number"),
    (lambda c: c.astype({"value lower": object}).assign(**{"value lower": [1.0, "about 3"] + [0.5] * (len(c) - 2)}),
     "row 2 (claim chang-1), column 'value lower': 'about 3' is not a number"),
])
def test_a_claims_file_without_a_column_or_with_a_word_for_a_number_is_one_line(tmp_path, claims, capsys, edit,
                                                                                problem):
    """Before: a KeyError or a TypeError traceback."""
    bad = tmp_path / "claims.csv"
    edit(claims).to_csv(bad, index=False)
    assert _check(capsys, bad) == (2, f"error: {bad}: {problem}")


@pytest.mark.parametrize("column", ["unexposed n", "unexposed p (Holm)"])
def test_a_word_for_an_unexposed_number_is_one_line_naming_its_row_and_column(tmp_path, claims, capsys, column):
    """Issue 68. Before: "Unknown format code 'f'" naming no file, row or column (n), a TypeError traceback (p)."""
    row = claims.index[claims[column].notna()][0]
    edited = claims.astype({column: object})
    edited.loc[row, column] = "many"
    bad = tmp_path / "claims.csv"
    edited.to_csv(bad, index=False)
    assert _check(capsys, bad) == (
        2, f"error: {bad}: row {row + 1} (claim {claims.loc[row, 'claim']}), column {column!r}: 'many' is not a number")
