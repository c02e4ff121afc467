"""Deeper judging pools for the enwiki-mini question sets (issue 65; data/enwiki-mini/JUDGING.md, "Deeper pools").

    python -m benchmarks.deeper_pools --build DIR [--sources S ...] [--packets N --packet-dir P]

For each question of questions.tsv and questions-nq.tsv, the sentences beyond its first pool (pools.tsv) that

- state one of its answer strings, normalised (lower case, no punctuation, no articles, no thousands commas),
  anywhere in the question's article ("strings");
- BM25 ranks in its top 30 over sentence and paragraph ("bm25": the build's run over every question);
- all-MiniLM-L6-v2 ranks in its top 30 reading the sentence ("minilm") or the sentence and its paragraph
  ("minilm-paragraph": both over split "all", every question);
- a model trained in the build ranks in its top 10 (Chang et al.'s ICT+BFS+WLP Transformer, Three-T BERT,
  QuadrupletBERT: the 80-20 split's test questions, "trained");
- share the answer's words in another form anywhere in the question's article ("answer-words"): a number of the
  answer in digits or words ("seven-bit" for "7"), or at least half of its other words after Lucene's English
  analyzer (stop words out, Porter stems: "Upanishad" for "the Upanishads").

Writes data/enwiki-mini/pools-deep.tsv (the added sentences, one row a question, the columns of pools.tsv) from
the sources given, and with --packets the judging packets (JSONL: a question, its article, its added sentences
grouped by paragraph, shuffled with a fixed seed so no sentence's place tells its source)."""
from __future__ import annotations

import argparse
import collections
import json
import random
import re
from pathlib import Path


from towers import io
from towers.datasets import judging
from towers.datasets.splits import question_key
from .workflow_harness import ROOT

DATA = ROOT / "data/enwiki-mini"
SETS = {"enwiki-mini": "questions.tsv", "enwiki-mini-nq": "questions-nq.tsv"}
DEPTH = {"bm25": 30, "minilm": 30, "minilm-paragraph": 30, "trained": 10}
TRAINED = ["transformer-ict+bfs+wlp-l2-d128", "threet-bert-m0.1-s13", "quadbert-m0.1-s13"]
SOURCES = ["strings", "bm25", "minilm", "minilm-paragraph", "trained", "answer-words"]
NUMBER_WORDS = {w: str(n) for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS.update({w: str(10 * n) for n, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)})


def states(sentence: str, answer: str) -> bool:
    """The answer, normalised as fact groups normalise it (judging.normalised_answer), appears in the normalised
    sentence as whole words."""
    answer = judging.normalised_answer(answer)
    return bool(answer) and f" {answer} " in f" {judging.normalised_answer(sentence)} "


def answer_words(analyze):
    """A test of whether a sentence states an answer in other words: `analyze` is Lucene's English analyzer (stop
    words out, Porter stems); numbers count in digits or words, and a number of the answer is enough alone."""
    def words(text: str) -> set[str]:
        text = re.sub(r"(?<=\d),(?=\d{3})", "", text)
        return {NUMBER_WORDS.get(w, w) for w in analyze(text)}

    def test(sentence_words: set[str], answer: str) -> bool:
        wanted = words(answer)
        numbers = {w for w in wanted if w.isdigit()}
        rest = wanted - numbers
        return bool(numbers & sentence_words) or (bool(rest) and 2 * len(rest & sentence_words) >= len(rest))
    return words, test


def read_run(path: Path, depth: int) -> dict[str, list[str]]:
    """Each query's top `depth` documents of a TREC run ({} where the build has no such run)."""
    return {qid: [doc for doc, _ in ranked[:depth]] for qid, ranked in io.read_run(path).items()} if path.is_file() else {}


def runs_of(build: Path, dataset: str, source: str) -> list[dict[str, list[str]]]:
    art = build / "artifacts" / dataset
    if source == "bm25":
        return [read_run(art / "bm25/run.trec", DEPTH[source])]
    if source in ("minilm", "minilm-paragraph"):
        return [read_run(art / f"dense/ckpt-{source}/all/run-flat.trec", DEPTH[source])]
    if source == "trained":
        return [read_run(path, DEPTH[source]) for model in TRAINED for path in sorted(art.glob(f"dense/{model}/80-20/run-*.trec"))]
    return []


def added_pools(build: Path, sources: list[str]) -> dict[tuple, dict]:
    """(question file, article, question_key) -> {question, article, added: [sentence ids], from: {id: sources}}."""
    first = judging.read_pools(DATA / "pools.tsv")
    out = {}
    if "answer-words" in sources:   # the sets share their articles: each sentence analysed once
        words, stated = answer_words(lucene_analyzer())
        sentence_words = {}
    for dataset, qfile in SETS.items():
        collection = build / "artifacts" / dataset / "collection"
        sentences, by_title = {}, collections.defaultdict(list)
        with open(collection / "candidates.jsonl") as handle:
            for line in handle:
                item = json.loads(line)
                sentences[item["id"]] = item
                by_title[item["title"]].append(item["id"])
        queries = dict(line.rstrip("\n").split("\t", 1) for line in open(collection / "queries.tsv"))
        answers = collections.defaultdict(list)
        article_of = {}
        for line in open(collection / "answers.jsonl"):
            item = json.loads(line)
            answers[item["qid"]].append(item["answer"])
            article_of[item["qid"]] = item["article"]
        runs = {source: runs_of(build, dataset, source) for source in sources if source not in ("strings", "answer-words")}
        for qid, text in queries.items():
            key = (qfile, article_of[qid], question_key(text))
            pooled = set(first.get(key, []))
            found = collections.defaultdict(set)
            if "strings" in sources:
                for cid in by_title[article_of[qid]]:
                    if any(states(sentences[cid]["sentence"], answer) for answer in answers[qid]):
                        found[cid].add("strings")
            if "answer-words" in sources:
                for cid in by_title[article_of[qid]]:
                    if cid not in sentence_words:
                        sentence_words[cid] = words(sentences[cid]["sentence"])
                    if any(stated(sentence_words[cid], answer) for answer in answers[qid]):
                        found[cid].add("answer-words")
            for source, source_runs in runs.items():
                for run in source_runs:
                    for cid in run.get(qid, []):
                        found[cid].add(source)
            added = sorted(c for c in found if c not in pooled)
            out[key] = {"qid": qid, "set": qfile, "article": article_of[qid], "question": text, "added": added,
                        "from": {c: sorted(found[c]) for c in added}, "sentences": sentences}
    return out


def lucene_analyzer():
    from towers.retrieval.bm25 import start_jvm

    start_jvm()
    from pyserini.analysis import Analyzer, get_lucene_analyzer

    return Analyzer(get_lucene_analyzer()).analyze


def write_pools(pools: dict, path: Path) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:   # as pools.tsv: no quoting (no tab in a field)
        handle.write("\t".join(judging.POOL_COLUMNS) + "\n")
        for (qfile, article, _), item in pools.items():
            handle.write("\t".join([qfile, article, item["question"], " ".join(item["added"])]) + "\n")


def paragraph_view(sentences: dict, prefix: str, pooled: set, _index={}) -> dict:
    """A paragraph as its sentences in order, the pooled ones with their id (the others are context only)."""
    if id(sentences) not in _index:   # paragraph id -> its sentence ids, once a collection
        by_paragraph = collections.defaultdict(list)
        for c in sentences:
            by_paragraph[c.rsplit("_", 1)[0]].append(c)
        _index[id(sentences)] = by_paragraph
    ids = sorted(_index[id(sentences)][prefix], key=lambda c: int(c.rsplit("_", 1)[1]))
    return {"title": sentences[ids[0]]["title"],
            "sentences": [[c if c in pooled else "", sentences[c]["sentence"]] for c in ids]}


def packets(pools: dict, count: int, folder: Path, seed: int = 65) -> None:
    """`count` JSONL packets of questions, each with its added sentences grouped by paragraph, shuffled."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    items = [item for item in pools.values() if item["added"]]
    handles = [open(folder / f"packet-{k}.jsonl", "w") for k in range(count)]
    load = [0] * count
    for item in sorted(items, key=lambda i: -len(i["added"])):
        k = load.index(min(load))
        load[k] += len(item["added"])
        paragraphs = collections.defaultdict(list)
        for cid in item["added"]:
            paragraphs[cid.rsplit("_", 1)[0]].append(cid)
        groups = list(paragraphs.items())
        rng.shuffle(groups)
        handles[k].write(json.dumps({
            "questions": item["set"], "article": item["article"], "question": item["question"],
            "paragraphs": [paragraph_view(item["sentences"], prefix, set(ids)) for prefix, ids in groups]},
            ensure_ascii=False) + "\n")
    for handle in handles:
        handle.close()
    print(f"{len(items)} questions, {sum(load)} sentences in {count} packets: {load}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, required=True)
    parser.add_argument("--sources", nargs="+", default=SOURCES, choices=SOURCES)
    parser.add_argument("--out", type=Path, default=DATA / "pools-deep.tsv")
    parser.add_argument("--packets", type=int, default=0)
    parser.add_argument("--packet-dir", type=Path)
    parser.add_argument("--minus", type=Path, help="a pools file whose sentences are left out of the packets")
    args = parser.parse_args(argv)
    pools = added_pools(args.build, args.sources)
    write_pools(pools, args.out)
    counts = collections.Counter(s for item in pools.values() for c in item["added"] for s in item["from"][c])
    print(f"{args.out}: {sum(len(i['added']) for i in pools.values())} added sentences over {len(pools)} questions; "
          f"by source {dict(counts)}")
    if args.packets:
        if args.minus:
            done = judging.read_pools(args.minus)
            for key, item in pools.items():
                item["added"] = [c for c in item["added"] if c not in set(done.get(key, []))]
        packets(pools, args.packets, args.packet_dir)


if __name__ == "__main__":
    main()
