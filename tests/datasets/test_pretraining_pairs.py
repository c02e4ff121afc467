import collections
import itertools
import json
import os
import subprocess
import sys

import pytest

from towers.datasets import pretraining_pairs as pp
from towers.datasets.wiki import normalise_title
from towers.io import StageError, read_json

from conftest import ROOT

ENWIKI_MINI = ROOT / "artifacts" / "enwiki-mini" / "corpus"


def paragraph(*sentences, links=()):
    return {"text": " ".join(sentences), "sentences": list(sentences),
            "links": [{"target": t, "anchor": t.lower()} for t in links]}


def section(title, *paragraphs, level=2):
    return {"title": title, "level": level, "lead": level == 1, "paragraphs": list(paragraphs)}


def lead(*paragraphs):
    return section("", *paragraphs, level=1)


# Links: lighthouse -> Port Elwen (lead), Mara Quill (History), itself (Restoration, with an anchor);
# Port Elwen -> "Old Lighthouse" (a redirect to the lighthouse), Mara Quill; Mara Quill -> lighthouse;
# Quiet cove has no lead, one one-sentence passage and a link outside the corpus.
ARTICLES = [
    {"id": "1", "title": "Harbour lighthouse", "sections": [
        lead(paragraph("The Harbour lighthouse is a stone tower on the pier of Port Elwen.",
                       "It was first lit in 1871.", links=["Port Elwen"])),
        section("History",
                paragraph("The tower was designed by Mara Quill.", "Work began in 1868.",
                          "Granite came from the northern quarry.", links=["Mara Quill"]),
                paragraph("A storm damaged the lantern in 1903.", "It was repaired within a year.")),
        section("Restoration",
                paragraph("The light was automated in 1982.", "The keepers left the tower that spring.",
                          links=["harbour_lighthouse#History"]), level=3)]},
    {"id": "2", "title": "Port Elwen", "sections": [
        lead(paragraph("Port Elwen is a fishing town on the north coast.",
                       "Its old pier ends at a lighthouse.", links=["Old Lighthouse"])),
        section("Economy",
                paragraph("Fishing and boat building employ most of the town.",
                          "The boatyard was founded by the family of Mara Quill.", links=["Mara Quill"]))]},
    {"id": "3", "title": "Mara Quill", "sections": [
        lead(paragraph("Mara Quill was a civil engineer known for coastal works.",
                       "Her best known design is the Harbour lighthouse.", links=["Harbour lighthouse"]))]},
    {"id": "4", "title": "Quiet cove", "sections": [
        section("Geography", paragraph("The cove lies north of a town that no article describes.",
                                       links=["Nowhere town"]))]},
]
REDIRECTS = {"Old Lighthouse": "Harbour lighthouse"}


def write_articles(path, articles):
    path.write_text("".join(json.dumps(a) + "\n" for a in articles))
    return path


@pytest.fixture
def corpus(tmp_path):
    return write_articles(tmp_path / "articles.jsonl", ARTICLES)


def copies(n):
    """`n` copies of ARTICLES with distinct ids, titles and link targets (links stay inside a copy)."""
    def rename(title, c):
        return f"{normalise_title(title)} {c}"
    out = []
    for c in range(n):
        for article in json.loads(json.dumps(ARTICLES)):
            article["id"], article["title"] = f"{article['id']}-{c}", rename(article["title"], c)
            for s in article["sections"]:
                for p in s["paragraphs"]:
                    for link in p["links"]:
                        link["target"] = rename(link["target"], c)
            out.append(article)
    return out


def passages_of(article):
    return [p for s in article["sections"] for p in s["paragraphs"]]


def by_id(articles):
    return {a["id"]: a for a in articles}


def links_to(source, target, redirects, articles):
    """Passages of article `source` holding a link that resolves to article `target`."""
    title = articles[target]["title"]
    found = []
    for p in passages_of(articles[source]):
        for link in p["links"]:
            t = normalise_title(link["target"])
            if t == title or (t not in {a["title"] for a in articles.values()} and redirects.get(t) == title):
                found.append(p["text"])
                break
    return found


def all_pairs(path, seed=0, redirects=REDIRECTS):
    return list(pp.ict_pairs(path, seed)) + list(pp.bfs_pairs(path, seed)) + list(pp.wlp_pairs(path, seed, redirects))


def test_ict_query_is_a_sentence_removed_from_its_passage(corpus):
    pairs = list(pp.ict_pairs(corpus, seed=3))
    articles = by_id(ARTICLES)
    # every passage with two or more sentences gives one pair; Quiet cove's single sentence gives none
    assert len(pairs) == 7 and {p["task"] for p in pairs} == {"ict"}
    for pair in pairs:
        assert pair["query_article"] == pair["doc_article"]
        assert pair["title"] == articles[pair["query_article"]]["title"]
        source = [p for p in passages_of(articles[pair["query_article"]]) if pair["query"] in p["sentences"]]
        assert len(source) == 1
        rest = [s for s in source[0]["sentences"] if s != pair["query"]]
        assert pair["doc"] == " ".join(rest) and pair["query"] not in pair["doc"]


def test_bfs_query_from_the_lead_doc_from_the_same_article(corpus):
    pairs = list(pp.bfs_pairs(corpus, seed=5))
    articles = by_id(ARTICLES)
    assert sorted(p["query_article"] for p in pairs) == ["1", "2", "3"]   # Quiet cove has no lead
    for pair in pairs:
        article = articles[pair["query_article"]]
        assert pair["doc_article"] == pair["query_article"] and pair["title"] == article["title"]
        assert pair["query"] in article["sections"][0]["paragraphs"][0]["sentences"]
        assert pair["query"] not in pair["doc"]
        if len(passages_of(article)) > 1:
            assert pair["doc"] in [p["text"] for p in passages_of(article)[1:]]
    # Mara Quill has a single passage: the doc is its other lead sentence, never the query alone
    quill = next(p for p in pairs if p["query_article"] == "3")
    assert {quill["query"], quill["doc"]} == set(articles["3"]["sections"][0]["paragraphs"][0]["sentences"])


def test_bfs_several_pairs_per_article_use_different_passages(corpus):
    pairs = [p for p in pp.bfs_pairs(corpus, seed=0, per_article=5) if p["query_article"] == "1"]
    assert len(pairs) == 3 and len({p["doc"] for p in pairs}) == 3


def test_wlp_docs_link_to_the_query_article(corpus):
    articles = by_id(ARTICLES)
    every = list(pp.wlp_pairs(corpus, seed=0, redirects=REDIRECTS, per_article=10))
    assert sorted((p["query_article"], p["doc_article"]) for p in every) == [
        ("1", "2"), ("1", "3"), ("2", "1"), ("3", "1"), ("3", "2")]   # ("1", "1") would be the self-link
    for pair in every:
        assert pair["query_article"] != pair["doc_article"]
        assert pair["title"] == articles[pair["doc_article"]]["title"]   # the linking article's title
        assert pair["query"] in articles[pair["query_article"]]["sections"][0]["paragraphs"][0]["sentences"]
        assert pair["doc"] in links_to(pair["doc_article"], pair["query_article"], REDIRECTS, articles)
    # without the redirect, Port Elwen's "Old Lighthouse" link leads nowhere
    plain = list(pp.wlp_pairs(corpus, seed=0, per_article=10))
    assert ("1", "2") not in {(p["query_article"], p["doc_article"]) for p in plain} and len(plain) == 4
    # by default one pair per linked-to article
    one = list(pp.wlp_pairs(corpus, seed=0, redirects=REDIRECTS))
    assert sorted(p["query_article"] for p in one) == ["1", "2", "3"]


def test_wlp_resolves_titles_as_a_dict_of_titles_would(tmp_path):
    """Titles are kept as digests: a title held by two articles names the first; a redirect titled like an
    article is ignored; of two redirects that normalise alike, the later counts; the spill file is removed."""
    linker = {"id": "9", "title": "Linker", "sections": [lead(
        paragraph("This passage links to the twin town.", "It says nothing more.", links=["Twin"]),
        paragraph("This passage names the lighthouse by an old name.", "And the quill.",
                  links=["Old_lighthouse", "Mara Quill"]),
        paragraph("This passage links through a redirect named like an article.", "It is ignored.",
                  links=["Port Elwen redirect"]))]}
    twins = [{"id": f"t{k}", "title": "Twin", "sections": [lead(paragraph(f"Twin {k} is a town.", "It has a pier."))]}
             for k in (1, 2)]
    path = write_articles(tmp_path / "articles.jsonl", [*ARTICLES, *twins, linker])
    redirects = {"Old lighthouse": "Port Elwen", "Old_lighthouse": "Harbour lighthouse",   # the later wins
                 "Mara Quill": "Port Elwen",               # titled like an article: ignored
                 "Port Elwen redirect": "Quiet cove"}      # to an article without a lead: no pair
    spill = tmp_path / "spill"
    spill.mkdir()
    pairs = [p for p in pp.wlp_pairs(path, seed=0, redirects=redirects, per_article=10, spill_dir=spill)
             if p["doc_article"] == "9"]
    assert sorted((p["query_article"], p["doc"].split(" ")[2]) for p in pairs) == [
        ("1", "names"), ("3", "names"), ("t1", "links")]
    assert list(spill.iterdir()) == []


def test_no_pair_pairs_a_text_with_itself(corpus):
    for pair in all_pairs(corpus):
        assert pair["query"] and pair["doc"] and pair["query"] != pair["doc"]
        assert pair["query"] not in pair["doc"]


def test_seeded_output(corpus, tmp_path):
    assert all_pairs(corpus, seed=0) == all_pairs(corpus, seed=0)
    assert all_pairs(corpus, seed=0) != all_pairs(corpus, seed=1)
    mixed = write_articles(tmp_path / "copies.jsonl", copies(5))
    assert list(pp.generate_pairs(mixed, seed=2)) == list(pp.generate_pairs(mixed, seed=2))
    assert list(pp.generate_pairs(mixed, seed=2)) != list(pp.generate_pairs(mixed, seed=3))


def test_output_does_not_depend_on_the_hash_salt(corpus):
    script = ("import json, sys; from towers.datasets import pretraining_pairs as pp; "
              "print(json.dumps(list(pp.generate_pairs(sys.argv[1], redirects={'Old Lighthouse': 'Harbour lighthouse'}))))")
    outputs = set()
    for salt in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", script, str(corpus)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": salt})
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1


def test_mixture_draws_all_three_tasks(tmp_path):
    path = write_articles(tmp_path / "copies.jsonl", copies(10))
    mixed = list(pp.generate_pairs(path, "ict+bfs+wlp", seed=0, redirects=REDIRECTS))
    counts = collections.Counter(p["task"] for p in mixed)
    assert set(counts) == {"ict", "bfs", "wlp"}
    # it stops when a drawn stream is exhausted, so one stream is used up: ICT has 70 pairs, BFS and WLP 30
    assert counts["ict"] == 70 or counts["bfs"] == 30 or counts["wlp"] == 30
    assert len(list(pp.generate_pairs(path, "ict+bfs+wlp", seed=0, limit=7))) == 7
    assert len(list(pp.generate_pairs(path, "bfs", limit=4))) == 4


def test_mixture_of_streams_is_uniform_and_stops_when_one_ends():
    endless = [itertools.repeat({"task": name}) for name in ("a", "b", "c")]
    counts = collections.Counter(p["task"] for p in pp.mix_pairs(endless, seed=0, limit=3000))
    assert sum(counts.values()) == 3000 and all(900 < n < 1100 for n in counts.values())
    short = [[{"task": "a"}] * 5, [{"task": "b"}] * 1000, [{"task": "c"}] * 1000]
    counts = collections.Counter(p["task"] for p in pp.mix_pairs(short, seed=0))
    assert counts["a"] == 5 and counts["b"] < 100


def test_pair_statistics_by_hand(tmp_path):
    from transformers import AutoTokenizer

    from towers.modeling.tokenizer import train_wordpiece

    train_wordpiece(["the harbour light burned whale oil", "the keeper lit the lamp"] * 3, tmp_path, 100, 1, True)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    pairs = [{"query": "The keeper", "doc": "lit the lamp", "title": "Lamp"},            # 2 + 3 tokens
             {"query": "harbour light", "doc": "the keeper lit the whale oil", "title": "Oil"}]   # 2 + 6
    assert tok.tokenize("the keeper lit the whale oil") == ["the", "keeper", "lit", "the", "whale", "oil"]
    assert pp.pair_statistics(pairs, tok, batch_size=1) == {
        "pairs": 2, "tokens": 13, "avg_query_tokens": 2.0, "avg_doc_tokens": 4.5}
    assert pp.pair_statistics([], tok)["pairs"] == 0


def test_bad_input_is_one_line(tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(ARTICLES[0]) + "\n{not json\n")
    with pytest.raises(StageError, match="broken.jsonl: line 2 is not valid JSON"):
        list(pp.ict_pairs(broken))
    odd = write_articles(tmp_path / "odd.jsonl", [{"id": "1", "text": "no sections"}])
    with pytest.raises(StageError, match="odd.jsonl: line 1 is not a parsed article"):
        list(pp.wlp_pairs(odd))
    with pytest.raises(ValueError, match="tasks must be"):
        pp.generate_pairs(odd, "ict+mlm")


@pytest.mark.skipif(not (ENWIKI_MINI / "articles.jsonl").exists(), reason="enwiki-mini corpus not built")
def test_enwiki_mini_pairs_follow_links():
    path = ENWIKI_MINI / "articles.jsonl"
    redirects = read_json(ENWIKI_MINI / "redirects.json") if (ENWIKI_MINI / "redirects.json").exists() else {}
    redirects = {normalise_title(k): normalise_title(v) for k, v in redirects.items()}
    articles = by_id(pp.read_articles(path))
    counts = collections.Counter(p["task"] for p in pp.generate_pairs(path, "ict+bfs+wlp", limit=300, redirects=redirects))
    assert set(counts) == {"ict", "bfs", "wlp"}
    wlp = list(pp.wlp_pairs(path, redirects=redirects))
    assert wlp
    for pair in wlp:
        assert pair["query_article"] != pair["doc_article"]
        assert pair["doc"] in links_to(pair["doc_article"], pair["query_article"], redirects, articles)


def test_wlp_resolves_targets_to_corpus_articles_with_a_lead(tmp_path):
    articles = json.loads(json.dumps(ARTICLES))
    articles[2]["sections"][0]["paragraphs"][0]["links"] += [{"target": "Quiet cove"}, {"target": "Cove"}]
    path = write_articles(tmp_path / "articles.jsonl", articles)
    # "Cove" redirects to the lead-less Quiet cove; a redirect titled like an article ("Port Elwen") is ignored
    redirects = {**REDIRECTS, "Cove": "Quiet cove", "Port Elwen": "Mara Quill"}
    every = list(pp.wlp_pairs(path, seed=0, redirects=redirects, per_article=10))
    assert sorted((p["query_article"], p["doc_article"]) for p in every) == [
        ("1", "2"), ("1", "3"), ("2", "1"), ("3", "1"), ("3", "2")]


def test_wlp_memory_does_not_follow_links_outside_the_corpus(tmp_path):
    import tracemalloc

    def corpus(name, outside):
        articles = [{"id": str(i), "title": f"Article {i}", "sections": [
            lead(paragraph(f"Article {i} is the {i}th article.", "It has a lead.",
                           links=[f"Article {(i + 1) % 200}"] + [outside(i, k) for k in range(100)]))]}
                    for i in range(200)]
        return write_articles(tmp_path / name, articles)

    def peak(path):
        tracemalloc.start()
        try:
            pairs = list(pp.wlp_pairs(path, seed=0))
            return len(pairs), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    # 20,000 distinct outside targets against one repeated 20,000 times: same pairs, about the same peak
    many, one = peak(corpus("many.jsonl", lambda i, k: f"Elsewhere {i} {k}")), peak(corpus("one.jsonl", lambda i, k: "Elsewhere"))
    assert many[0] == one[0] == 200
    assert many[1] < one[1] + 2**20


def test_wlp_notices_a_file_changed_between_passes(corpus, monkeypatch):
    read = pp.read_articles

    def changing(after, articles):
        calls = []

        def read_then_change(path):
            yield from read(path)
            calls.append(path)
            if len(calls) == after:
                write_articles(corpus, articles)
        return read_then_change

    monkeypatch.setattr(pp, "read_articles", changing(1, ARTICLES[:3]))   # an article dropped after the titles pass
    with pytest.raises(StageError, match="changed between WLP's passes"):
        list(pp.wlp_pairs(corpus, redirects=REDIRECTS))
    write_articles(corpus, ARTICLES)
    shortened = json.loads(json.dumps(ARTICLES))
    for article in shortened:
        article["sections"] = article["sections"][:1]
    monkeypatch.setattr(pp, "read_articles", changing(2, shortened))   # passages dropped after the links pass
    with pytest.raises(StageError, match="changed between WLP's passes"):
        list(pp.wlp_pairs(corpus, seed=0, redirects=REDIRECTS, per_article=10))
