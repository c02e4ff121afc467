"""The cases of group "input" as data: each a copy of a real artifact (or a file written from nothing), one small
spoiler applied to it, the stage that reads it, and what its one-line error must name. benchmarks.faults_inputs
runs them.

Templates name places in braces: {root} the workspace, {art} its enwiki-mini artifacts, {model} the trained
two-tower model, {dense} the folder of its embeddings and indexes, {tmp}, {inputs} (tmp/inputs), {f} the case's
folder, {x} the spoilt file or folder."""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .faults_harness import chang_row, cut, lines_of

PLACE = re.compile(r"\{(\w+)\}")   # not str.format: a --row template is JSON, braces and all


def fill(template, at: dict):
    """A template with its {places} filled in; numbers pass as they are."""
    return PLACE.sub(lambda m: str(at[m.group(1)]), template) if isinstance(template, str) else template


Spoil = Callable[[Path, dict], None]   # (the spoilt path, the places) -> None


@dataclass(frozen=True)
class Case:
    """One bad input fed to the stage that reads it."""
    name: str
    argv: tuple                   # the stage and its arguments
    outputs: tuple = ()           # what the failed stage must not leave behind
    at: str = ""                  # the spoilt file or folder, {x}; with neither source nor spoil, one never made
    source: str = ""              # a real artifact copied to `at` first
    spoil: Spoil | None = None
    bad: str = "{x}"              # the path (or argument) the one-line error must name
    expect: str = "error"         # or "warn": exit 0 with a warning line naming `bad`
    extra: tuple = ()             # other names the error may give instead of `bad`
    folder: str = ""              # the case's folder {f}, when cases share one (default: its own name)
    marker: str = ""              # a file the spoilt input would create if its code ran


# --- spoilers: small edits of the copied file, or of a member of the copied folder ---------------------------

def cut_to(fraction: float, member: str = "") -> Spoil:
    return lambda path, at: cut(path / member, fraction)


def write(text: str, member: str = "") -> Spoil:
    return lambda path, at: (path / member).write_text(text)


def append(text: str, member: str = "") -> Spoil:
    return lambda path, at: (path / member).write_text((path / member).read_text() + text)


def rewrite(edit: Callable[[list[str]], list[str]], member: str = "") -> Spoil:
    """The file's lines edited as a list, each written back with a newline."""
    def spoil(path, at):
        target = path / member
        target.write_text("".join(l + "\n" for l in edit(lines_of(target))))
    return spoil


def remove(pattern: str) -> Spoil:
    def spoil(path, at):
        for member in path.glob(pattern):
            (shutil.rmtree if member.is_dir() else Path.unlink)(member)
    return spoil


def zero_second_halves(pattern: str) -> Spoil:
    """The second half of each matching file overwritten with zeros: same size, damaged content."""
    def spoil(path, at):
        for member in path.glob(pattern):
            data = bytearray(member.read_bytes())
            data[len(data) // 2:] = bytes(len(data) - len(data) // 2)
            member.write_bytes(bytes(data))
    return spoil


def foreign(line: str) -> str:
    """A run line whose document is renamed into one of no collection here."""
    return re.sub(r" Q0 (\S+)", r" Q0 x\1", line)


def half_the_test_queries(at: dict) -> set[str]:
    return {l.split()[0] for l in lines_of(Path(fill(TEST, at)))[::2]}


def without_half_the_test_queries(path: Path, at: dict) -> None:
    kept = half_the_test_queries(at)
    rewrite(lambda ls: [l for l in ls if l.split()[0] not in kept])(path, at)


def orphan_a_training_document(path: Path, at: dict) -> None:
    """The qrels of the first training question renamed to documents no candidate has."""
    trained = lines_of(Path(fill(SPLIT, at)) / "train.tsv")[0].split("\t")[0]
    rewrite(lambda ls: [l.replace(" 0 ", " 0 nosuch-", 1) if l.split()[0] == trained else l for l in ls])(path, at)


def shards(*widths: int) -> Spoil:
    """Embedding shards (and their ids) of the given widths, written into the folder."""
    def spoil(path, at):
        import numpy as np   # lazily, as the stages' own imports

        for i, width in enumerate(widths):
            np.save(path / f"p{i}.npy", np.zeros((2, width), dtype=np.float32))
            (path / f"p{i}.ids").write_text(f"a{i}\nb{i}\n")
    return spoil


class Payload:
    """Unpickled, runs a shell command: what a tampered checkpoint could carry."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def checkpoint(tampered: bool) -> Spoil:
    """A training checkpoint: carrying pickled code that creates MARKER, or else cut in half."""
    def spoil(path, at):
        import torch   # lazily: seconds to import

        state = {"fingerprint": "x", "step": 1, "model": {}}
        if tampered:
            torch.save({**state, "history": [Payload(fill(MARKER, at))]}, path)
        else:
            torch.save(state, path)
            cut(path)
    return spoil


# --- the stages, with the arguments the cases share ----------------------------------------------------------

RUN, QRELS = "{art}/bm25/run.trec", "{art}/collection/qrels.txt"
SPLIT, TEST = "{art}/splits/50-50", "{art}/splits/50-50/test.tsv"
CANDIDATES, ENCODER = "{art}/collection/candidates.jsonl", "{art}/encoders/random-l1"
GOOD_EVAL = "{art}/eval/bm25/50-50/lucene.json"
RUN_FILES, QRELS_FILES, TRAINING = "{inputs}/run-files", "{inputs}/qrels-files", "{inputs}/training-files"
MARKER = "{tmp}/pwned-checkpoint"


def parse_wiki(*checksum) -> dict:
    outputs = ("{f}/a.jsonl", "{f}/r.json", "{f}/s.json")
    return dict(at="{f}/dump.xml", source="{root}/fixtures/tiny-wiki.xml", outputs=outputs, argv=(
        "parse-wiki", "--dump", "{x}", *checksum, "--articles", outputs[0], "--redirects", outputs[1],
        "--stats", outputs[2]))


def reqa_wiki(articles="{art}/corpus/articles.jsonl", questions="{x}") -> dict:
    return dict(argv=("reqa-wiki", "--articles", articles, "--questions", questions, "--out-dir", "{f}/reqa"),
                outputs=("{f}/reqa",))


QUESTIONS = dict(**reqa_wiki(), at="{f}/questions.tsv", source="{root}/fixtures/tiny-questions.tsv")
SPLIT_QUERIES = dict(at="{f}/queries.tsv", outputs=("{f}/s",), argv=(
    "split", "--queries", "{x}", "--train-fraction", 0.5, "--seed", 1, "--out-dir", "{f}/s"))


def evaluate(run=RUN, qrels=QRELS, metrics=("R@1",)) -> dict:
    return dict(outputs=("{f}/e.json",), argv=(
        "evaluate", "--run", run, "--qrels", qrels, "--queries", TEST, "--metrics", *metrics, "--candidates",
        CANDIDATES, "--out", "{f}/e.json"))


def encode(model="{model}", candidates=CANDIDATES, out="e") -> dict:
    outputs = (f"{{f}}/{out}.npy", f"{{f}}/{out}.ids")
    return dict(outputs=outputs, argv=("encode-candidates", "--model", model, "--candidates", candidates,
                                       "--embeddings", outputs[0], "--ids", outputs[1]))


def build_index(embeddings: str, factory: str, out: str) -> dict:
    return dict(folder="embeddings", outputs=(f"{{f}}/{out}.faiss",), argv=(
        "build-index", "--embeddings", embeddings, "--factory", factory, "--out", f"{{f}}/{out}.faiss"))


def dense_search(index: str, ids: str, out: str) -> dict:
    return dict(folder="embeddings", outputs=(f"{{f}}/{out}.trec",), argv=(
        "dense-search", "--model", "{model}", "--index", index, "--ids", ids, "--queries", TEST, "--depth", 10,
        "--run", f"{{f}}/{out}.trec"))


BM25_SEARCH = dict(at="{f}/index", source="{art}/bm25/index", outputs=("{f}/r.trec",), argv=(
    "bm25-search", "--index", "{x}", "--queries", "{art}/collection/queries.tsv", "--run", "{f}/r.trec", "--k1", 0.9,
    "--b", 0.4, "--depth", 5, "--threads", 1))


def finetune(encoder=ENCODER, qrels=QRELS, train=SPLIT + "/train.tsv", state="{f}/state") -> dict:
    return dict(outputs=("{f}/model",), argv=(
        "finetune", "--encoder", encoder, "--candidates", CANDIDATES, "--qrels", qrels, "--train", train,
        "--valid", SPLIT + "/valid.tsv", "--out", "{f}/model", "--state-dir", state, "--seed", 1, "--steps", 2,
        "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0.1, "--checkpoint-every", 1, "--query-length", 16,
        "--doc-length", 32, "--embedding-dim", 8))


def table(row: str, paper="{root}/data/papers/chang2020.csv", out="t") -> dict:
    outputs = (f"{{f}}/{out}.csv", f"{{f}}/{out}.json")
    return dict(folder="tables", outputs=outputs, argv=(
        "chang2020-table", "--table", "table3", "--paper", paper, "--profile", "tiny", "--note", "n", "--option",
        "dataset=enwiki-mini", "--option", "metrics=R@1", "--row", row, "--csv", outputs[0], "--json", outputs[1]))


PASSAGES = dict(at="{f}/msmarco", source="{root}/fixtures/msmarco-tiny", outputs=("{f}/reqa", "{f}/split"), argv=(
    "passages-msmarco", "--source", "{x}", "--seed", 1, "--valid-fraction", 0.1, "--out-dir", "{f}/reqa",
    "--split-dir", "{f}/split"))


def fuse(*runs: str, out: str) -> dict:
    return dict(folder="fusion", outputs=(f"{{f}}/{out}.trec",), argv=(
        "fuse-runs", "--runs", *runs, "--method", "rrf", "--out", f"{{f}}/{out}.trec"))


CASES = [
    # MediaWiki dumps: parse-wiki
    Case("dump cut mid-page", **parse_wiki(), spoil=cut_to(0.6)),
    Case("dump empty", **parse_wiki(), spoil=write("")),
    Case("dump not XML", **parse_wiki(), spoil=write("just text, no pages\n")),
    Case("dump of another version (checksum)", **parse_wiki("--sha256", "0" * 64)),
    # question sets and articles: reqa-wiki
    Case("questions: a row pasted twice", **QUESTIONS, spoil=rewrite(lambda ls: [*ls, ls[2]])),
    Case("questions: wrong header", **QUESTIONS, spoil=rewrite(lambda ls: ["article\tquestion\tanswer", *ls[1:]])),
    Case("questions: a row with a field missing", **QUESTIONS,
         spoil=rewrite(lambda ls: [ls[0], ls[1].rsplit("\t", 1)[0], *ls[2:]])),
    Case("questions: an unknown article", **QUESTIONS, spoil=rewrite(lambda ls: [ls[0], "Nowhere\tq?\ta\tb", *ls[1:]])),
    Case("questions: an answer not in its sentence", **QUESTIONS,
         spoil=rewrite(lambda ls: [ls[0], ls[1].replace("\t", "\tX", 2), *ls[2:]])),
    Case("questions: header only", **QUESTIONS, spoil=rewrite(lambda ls: ls[:1])),
    Case("articles cut mid-line", **reqa_wiki(articles="{x}", questions="{root}/fixtures/tiny-questions.tsv"),
         at="{f}/articles.jsonl", source="{art}/corpus/articles.jsonl", spoil=cut_to(0.7)),
    # queries TSV: split
    Case("queries: a repeated id", **SPLIT_QUERIES, spoil=write("q1\tone\nq2\ttwo\nq1\tthree\n")),
    Case("queries: a line without a tab", **SPLIT_QUERIES, spoil=write("q1 one\n")),
    Case("queries: empty", **SPLIT_QUERIES, spoil=write("")),
    # runs, qrels and metrics: evaluate (the spoilt files side by side, each case's output in its own folder)
    Case("run: of other queries", **evaluate(run="{x}"), at=RUN_FILES + "/other-queries.trec", source=RUN,
         spoil=rewrite(lambda ls: [l.replace("q", "z", 1) for l in ls])),
    Case("run: of another collection's documents", **evaluate(run="{x}"), at=RUN_FILES + "/other-docs.trec",
         source=RUN, spoil=rewrite(lambda ls: [foreign(l) for l in ls])),
    Case("run: some documents unknown", **evaluate(run="{x}"), at=RUN_FILES + "/some-docs.trec", source=RUN,
         spoil=rewrite(lambda ls: [foreign(l) if i % 2 else l for i, l in enumerate(ls)]), expect="warn"),
    Case("run: half the test queries missing", **evaluate(run="{x}"), at=RUN_FILES + "/half-queries.trec",
         source=RUN, spoil=without_half_the_test_queries, expect="warn"),
    Case("run: a malformed line", **evaluate(run="{x}"), at=RUN_FILES + "/bad-line.trec", source=RUN,
         spoil=append("q1 Q0 d1 one 1.0 t\n")),
    Case("run: missing", **evaluate(run="{x}"), at=RUN_FILES + "/nope.trec"),
    Case("qrels: none of the test queries judged", **evaluate(qrels="{x}"), at=QRELS_FILES + "/qrels.txt",
         spoil=write("zz 0 d1 1\n")),
    Case("qrels: some test queries unjudged", **evaluate(qrels="{x}"), at=QRELS_FILES + "/some-qrels.txt",
         source=QRELS, spoil=without_half_the_test_queries, expect="warn"),
    Case("qrels: a non-integer grade", **evaluate(qrels="{x}"), at=QRELS_FILES + "/nonint.txt", source=QRELS,
         spoil=append("q1 0 d1 high\n")),
    Case("metrics: an unknown measure", **evaluate(metrics=("Recall@@1",)), bad="Recall@@1"),
    # ReQA candidates JSONL and trained models: encode-candidates
    Case("candidates: a line that is not JSON", **encode(candidates="{x}"), folder="candidates",
         at="{f}/broken.jsonl", source=CANDIDATES, spoil=append('{"id": "x", "sentence": \n')),
    Case("candidates: empty", **encode(candidates="{x}", out="e2"), folder="candidates", at="{f}/empty.jsonl",
         spoil=write("")),
    Case("model: truncated weights", **encode(model="{x}"), at="{f}/model", source="{model}",
         spoil=cut_to(0.3, "query/model.safetensors"), bad="{x}/query", extra=("{x}",)),
    Case("model: truncated heads", **encode(model="{x}"), at="{f}/model", source="{model}",
         spoil=cut_to(0.5, "heads.safetensors"), extra=("{x}",)),
    Case("model: broken towers.json", **encode(model="{x}"), at="{f}/model", source="{model}",
         spoil=write("{", "towers.json"), extra=("{x}",)),
    Case("model: tokenizer missing", **encode(model="{x}"), at="{f}/model", source="{model}",
         spoil=remove("tokenizer"), bad="{x}/tokenizer", extra=("{x}",)),
    # embeddings, Faiss indexes, ids: build-index, dense-search and merge-embeddings
    Case("embeddings: not a NumPy file", **build_index("{x}", "Flat", "i"), at="{f}/x.npy",
         spoil=write("not numpy\n")),
    Case("factory: not a Faiss factory string", **build_index("{dense}/candidates.npy", "Flatt", "j"), bad="Flatt"),
    Case("factory: more lists than vectors", **build_index("{dense}/candidates.npy", "IVF4096,Flat", "k"),
         bad="IVF4096,Flat"),
    Case("index: truncated Faiss file", **dense_search("{x}", "{dense}/candidates.ids", "r"), at="{f}/cut.faiss",
         source="{dense}/index-flat.faiss", spoil=cut_to(0.5)),
    Case("ids: fewer than the index holds", **dense_search("{dense}/index-flat.faiss", "{x}", "r2"),
         at="{f}/short.ids", source="{dense}/candidates.ids", spoil=rewrite(lambda ls: ls[:-2])),
    Case("shards: of different widths", folder="embeddings", at="{f}", spoil=shards(4, 5), bad="{f}/p1.npy",
         extra=("{f}/p0.npy",), outputs=("{f}/m.npy", "{f}/m.ids"), argv=(
             "merge-embeddings", "--parts", "{f}/p0.npy", "{f}/p1.npy", "--part-ids", "{f}/p0.ids", "{f}/p1.ids",
             "--embeddings", "{f}/m.npy", "--ids", "{f}/m.ids")),
    # Lucene indexes: bm25-search
    Case("Lucene: segment overwritten", **BM25_SEARCH, spoil=zero_second_halves("_*")),
    Case("Lucene: segments file gone", **BM25_SEARCH, spoil=remove("segments_*")),
    # training inputs: finetune (the spoilt files side by side, each case's output in its own folder)
    Case("qrels: a document not among the candidates", **finetune(qrels="{x}"), at=TRAINING + "/qrels.txt",
         source=QRELS, spoil=orphan_a_training_document),
    Case("training questions: none judged", **finetune(train="{x}"), at=TRAINING + "/train.tsv",
         spoil=write("z1\tnobody asks this\n")),
    Case("encoder: truncated weights", **finetune(encoder="{x}"), at=TRAINING + "/encoder", source=ENCODER,
         spoil=cut_to(0.3, "model.safetensors")),
    Case("checkpoint: tampered (pickled code)", **finetune(state=TRAINING + "/tampered-state"),
         at=TRAINING + "/tampered-state/checkpoint.pt", spoil=checkpoint(tampered=True), marker=MARKER),
    Case("checkpoint: truncated", **finetune(state=TRAINING + "/cut-state"), at=TRAINING + "/cut-state/checkpoint.pt",
         spoil=checkpoint(tampered=False)),
    # tables: evaluation JSON and the paper's values
    Case("evaluation JSON cut short", **table(chang_row("{x}")), at="{f}/eval.json", spoil=write('{"metrics": ')),
    Case("paper values file missing", **table(chang_row(GOOD_EVAL), paper="{x}", out="u"), at="{f}/nope.csv"),
    Case("a table row with a field missing", **table(chang_row(GOOD_EVAL, split=None), out="v"), bad="--row"),
    # passage collections: passages-msmarco on a copy of the tiny MS MARCO folder
    Case("collection: a repeated passage id", **PASSAGES, spoil=rewrite(lambda ls: [*ls, ls[0]], "collection.tsv"),
         bad="collection.tsv"),
    Case("qrels: a passage not in the collection", **PASSAGES,
         spoil=append("999\t0\tnosuch\t1\n", "qrels.dev.small.tsv"), bad="qrels.dev.small.tsv"),
    Case("queries: a line without text", **PASSAGES, spoil=append("77\n", "queries.dev.small.tsv"),
         bad="queries.dev.small.tsv"),
    Case("collection: missing", **PASSAGES, spoil=remove("collection.tsv"), bad="collection.tsv"),
    # fusion
    Case("fusion: one run only", **fuse(RUN, out="f"), bad="--runs"),
    Case("fusion: an empty run", **fuse(RUN, "{x}", out="g"), at="{f}/empty.trec", spoil=write("")),
]
