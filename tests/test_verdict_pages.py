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
