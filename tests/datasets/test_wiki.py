import bz2
import subprocess
import sys

import pytest

from towers.datasets import wiki, wiki_parts
from towers.io import StageError, read_json, write_json, write_jsonl

from conftest import FIXTURES, run_stage


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


# --- a multistream dump in parts -------------------------------------------------------------------

from benchmarks.scale_wiki import make_multistream_dump  # noqa: E402


@pytest.fixture
def multistream(tmp_path):
    """The tiny fixture's pages three times over (new titles and ids), two pages a bz2 stream, and its index."""
    return make_multistream_dump(tmp_path / "dump", 3, source=FIXTURES / "tiny-wiki.xml", pages_per_stream=2)


def parse_in_parts(dump, index, parts, out):
    plan = wiki_parts.plan_parts(wiki_parts.stream_offsets(index, dump.stat().st_size), dump.stat().st_size, parts)
    folders = []
    for part in plan:
        redirects, stats = {}, wiki.Statistics()
        pages = wiki.iter_part_pages(dump, part["start"], part["end"])
        folder = out / f"part{part['part']}"
        write_jsonl(folder / "articles.jsonl", (stats.add(a) for a in wiki.iter_articles(dump, redirects, pages=pages,
                                                                                            required=False)))
        write_json(folder / "redirects.json", redirects)
        wiki_parts.write_part_summary(folder, stats, redirects)
        folders.append(folder)
    wiki_parts.merge_parts(folders, out / "articles.jsonl", out / "redirects.json", out / "stats.json")
    return plan


def parse_whole(dump, out):
    redirects, stats = {}, wiki.Statistics()
    write_jsonl(out / "articles.jsonl", (stats.add(a) for a in wiki.iter_articles(dump, redirects)))
    write_json(out / "redirects.json", redirects)
    write_json(out / "stats.json", stats.result(redirects))


def same_files(one, other):
    return all((one / name).read_bytes() == (other / name).read_bytes()
               for name in ("articles.jsonl", "redirects.json", "stats.json"))


def test_synthetic_multistream_dump_is_the_source_repeated(multistream, tmp_path):
    dump, index = multistream
    text = bz2.decompress(dump.read_bytes()).decode()
    source = (FIXTURES / "tiny-wiki.xml").read_text()
    pages = source.count("<page>")
    assert text.count("<page>") == 3 * pages and text.startswith(source[:source.index("  <page>")])
    assert "<title>Harbour lighthouse (2)</title>" in text
    lines = bz2.decompress(index.read_bytes()).decode().splitlines()
    assert len(lines) == 3 * pages and len({line.split(":")[1] for line in lines}) == 3 * pages   # new page ids
    # every offset the index gives starts a bz2 stream holding whole pages
    for offset in sorted({int(line.split(":")[0]) for line in lines}):
        with open(dump, "rb") as handle:
            handle.seek(offset)
            decompressor = bz2.BZ2Decompressor()
            stream = decompressor.decompress(handle.read())
        assert stream.startswith(b"  <page>") and stream.endswith(b"</page>\n")
    one = make_multistream_dump(tmp_path / "one", 1, source=FIXTURES / "tiny-wiki.xml")[0]
    assert bz2.decompress(one.read_bytes()).decode() == source   # factor 1: the source, byte for byte


@pytest.mark.parametrize("parts", [1, 2, 4, 50])
def test_parts_merged_equal_the_whole_dump_in_one_process(multistream, tmp_path, parts):
    dump, index = multistream
    parse_whole(dump, tmp_path / "whole")
    plan = parse_in_parts(dump, index, parts, tmp_path / "parts")
    assert len(plan) == parts and plan[-1]["end"] == dump.stat().st_size
    assert all(a["end"] == b["start"] for a, b in zip(plan, plan[1:]))   # contiguous, nothing read twice
    if parts <= 4:
        assert all(p["streams"] for p in plan)
    assert same_files(tmp_path / "whole", tmp_path / "parts")
    stats = read_json(tmp_path / "parts" / "stats.json")
    assert stats["articles"] == 9 and stats["redirects_dropped"] == 3
    assert 0 < stats["links_to_articles_in_corpus"] <= stats["links"]


def test_parts_run_as_parallel_jobs_and_merge_as_one_process_parses(multistream, tmp_path):
    """The stages as a cluster runs them: a plan, one process a part started side by side, a merge."""
    dump, index = multistream
    assert run_stage("parse-wiki", "--dump", dump, "--articles", tmp_path / "whole/articles.jsonl",
                     "--redirects", tmp_path / "whole/redirects.json", "--stats", tmp_path / "whole/stats.json").returncode == 0
    plan = tmp_path / "parts/plan.json"
    done = run_stage("wiki-parts", "--dump", dump, "--index", index, "--parts", 3, "--out", plan)
    assert done.returncode == 0, done.stderr
    folders = [tmp_path / f"parts/{k:03d}" for k in range(3)]
    jobs = [subprocess.Popen([sys.executable, "-m", "towers", "parse-wiki-part", "--dump", str(dump), "--plan", str(plan),
                              "--part", str(k), "--out-dir", str(folder)], stderr=subprocess.PIPE, text=True)
            for k, folder in enumerate(folders)]
    for job in jobs:
        assert job.wait() == 0, job.stderr.read()
    meta = read_json(folders[0] / "articles.jsonl.meta.json")
    assert meta["cpu_seconds"] > 0 and meta["peak_rss_mb"] > 0
    done = run_stage("merge-wiki-parts", "--parts", *folders, "--articles", tmp_path / "parts/articles.jsonl",
                     "--redirects", tmp_path / "parts/redirects.json", "--stats", tmp_path / "parts/stats.json")
    assert done.returncode == 0, done.stderr
    assert same_files(tmp_path / "whole", tmp_path / "parts")


def test_merged_statistics_resolve_links_across_parts_and_repeated_redirects(tmp_path):
    """A link in one part to an article (or a redirect) of another counts; a title redirected in two parts
    keeps the later target, as one process over both would."""
    def article(title, *targets):
        return {"id": title, "title": title, "sections": [{"title": "", "level": 1, "lead": True, "paragraphs": [
            {"text": "Some words here.", "sentences": ["Some words here."],
             "links": [{"target": t, "anchor": t} for t in targets]}]}]}

    parts = [([article("A", "B", "R", "Nowhere")], {"R": "Nowhere", "S": "A"}),
             ([article("B", "A", "S", "R")], {"R": "A"})]
    whole, redirects, folders = wiki.Statistics(), {}, []
    for k, (articles, part_redirects) in enumerate(parts):
        stats = wiki.Statistics()
        for x in articles:
            stats.add(x)
            whole.add(x)
        redirects.update(part_redirects)
        folder = tmp_path / f"p{k}"
        write_jsonl(folder / "articles.jsonl", articles)
        write_json(folder / "redirects.json", part_redirects)
        wiki_parts.write_part_summary(folder, stats, part_redirects)
        folders.append(folder)
    merged = wiki_parts.merge_parts(folders, tmp_path / "a.jsonl", tmp_path / "r.json", tmp_path / "s.json")
    assert merged == whole.result(redirects)
    assert merged["links_to_articles_in_corpus"] == 5 and merged["redirects_dropped"] == 2   # R -> A wins
    assert read_json(tmp_path / "r.json") == {"R": "A", "S": "A"}


def test_a_wrong_index_or_plan_is_one_line(multistream, tmp_path):
    dump, index = multistream
    size = dump.stat().st_size
    other = tmp_path / "other-index.txt"
    other.write_text(f"{size + 10}:1:Far away\n")
    with pytest.raises(StageError, match=r"other-index.txt: line 1: offset .* past the dump's"):
        wiki_parts.stream_offsets(other, size)
    shifted = tmp_path / "shifted-index.txt"
    shifted.write_text(f"{wiki_parts.stream_offsets(index, size)[1] + 3}:1:Off by three\n")
    with pytest.raises(StageError, match="no bz2 stream where the index says"):
        list(wiki.iter_part_pages(dump, int(shifted.read_text().split(":")[0]), size))
    first, second = wiki_parts.stream_offsets(index, size)[:2]
    with pytest.raises(StageError, match="falls inside a bz2 stream"):
        list(wiki.iter_part_pages(dump, int(first), int(second) - 5))
    plan = tmp_path / "plan.json"
    assert run_stage("wiki-parts", "--dump", dump, "--index", index, "--parts", 2, "--out", plan).returncode == 0
    done = run_stage("parse-wiki-part", "--dump", FIXTURES / "tiny-wiki.xml", "--plan", plan, "--part", 0,
                     "--out-dir", tmp_path / "p")
    assert done.returncode == 1 and done.stderr.strip().startswith(f"error: {plan}: planned for a dump of {size} bytes")
    done = run_stage("parse-wiki-part", "--dump", dump, "--plan", plan, "--part", 2, "--out-dir", tmp_path / "p")
    assert done.returncode == 1 and "error: --part: 2 is not one of the plan's 2 parts" in done.stderr
