import bz2

import pytest

from towers.datasets import wiki
from towers.io import StageError

from conftest import FIXTURES


def test_articles_sections_and_redirects(tiny_articles):
    articles, redirects = tiny_articles
    assert [a["title"] for a in articles] == ["Harbour lighthouse", "Port Elwen", "Mara Quill"]
    assert redirects == {"Old Lighthouse": "Harbour lighthouse"}
    lighthouse = articles[0]
    assert [(s["title"], s["level"], s["lead"]) for s in lighthouse["sections"]] == [
        ("", 1, True), ("History", 2, False), ("Restoration", 3, False)]


def test_markup_is_dropped(tiny_articles):
    articles, _ = tiny_articles
    text = " ".join(p["text"] for a in articles for s in a["sections"] for p in s["paragraphs"])
    for leftover in ["Infobox", "Cited in", "Coastal Review", "dusk", "list item", "references that must",
                     "Category", "Phare", "'''", "[[", "{{", "<ref"]:
        assert leftover not in text
    # "See also" holds only a list: the section disappears.
    assert [s["title"] for s in articles[1]["sections"]] == ["", "Economy"]


def test_links_keep_targets_and_anchors(tiny_articles):
    articles, _ = tiny_articles
    links = [l for s in articles[0]["sections"] for p in s["paragraphs"] for l in p["links"]]
    assert {"target": "Mara Quill", "anchor": "Mara Quill"} in links
    assert {"target": "Port Elwen", "anchor": "harbour board"} in links
    assert all(not l["target"].startswith(("File:", "Category:", "Fr:")) for l in links)
    market = articles[1]["sections"][1]["paragraphs"][1]
    assert market["links"] == [{"target": "Old Lighthouse", "anchor": "old pier"}]


def test_sentences_split_paragraphs(tiny_articles):
    articles, _ = tiny_articles
    lead = articles[0]["sections"][0]["paragraphs"][0]
    assert lead["sentences"] == ["The Harbour lighthouse is a stone tower on the northern pier of Port Elwen.",
                                 "It was designed by the engineer Mara Quill and first lit in 1871."]


def test_statistics_count_everything(tiny_articles):
    stats = wiki.statistics(*tiny_articles)
    assert stats["articles"] == 3 and stats["redirects_dropped"] == 1
    assert stats["sections"] == 7 and stats["lead_sections"] == 3
    assert stats["paragraphs"] == 9 and stats["sentences"] == 17
    # the link to the redirect "Old Lighthouse" resolves to an article of the corpus
    assert stats["links_to_articles_in_corpus"] == stats["links"]


def test_title_normalisation():
    assert wiki.normalise_title("abraham_lincoln#Early life") == "Abraham lincoln"


def test_bz2_and_broken_dumps(tmp_path):
    packed = tmp_path / "dump.xml.bz2"
    packed.write_bytes(bz2.compress((FIXTURES / "tiny-wiki.xml").read_bytes()))
    assert len(wiki.parse_dump(packed)[0]) == 3
    broken = tmp_path / "broken.xml"
    broken.write_text((FIXTURES / "tiny-wiki.xml").read_text()[:900])
    with pytest.raises(StageError, match="broken.xml: not a readable MediaWiki XML dump"):
        wiki.parse_dump(broken)
