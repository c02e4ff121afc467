"""Fault cases, group "input": bad input files of every format the stages read, truncated, malformed,
inconsistent or missing, each fed to the stage that reads it."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from .faults_harness import MLM_MODEL, Workspace, chang_row, classify_failure, cut, lines_of


def input_cases(ws: Workspace, tmp: Path) -> list[dict]:
    """Each case: a folder with copies of real artifacts, one of them spoilt, and the stage that reads it."""
    art = ws.root / "artifacts/enwiki-mini"
    model = ws.root / MLM_MODEL
    cases = []

    def case(name, args, bad, outputs, expect="error", extra_names=()):
        result = ws.stage(*args)
        if expect == "warn":
            warned = any(l.startswith("warning: ") and str(bad) in l for l in result.stderr.splitlines())
            outcome = "handled" if result.returncode == 0 and warned else (
                "silent wrong result" if result.returncode == 0 else classify_failure(result, [str(bad)])[0])
            last = (result.stderr.strip().splitlines() or [""])[-1]
        else:
            outcome, last = classify_failure(result, [str(bad), *extra_names], outputs)
        cases.append({"group": "input", "case": name, "outcome": outcome, "message": last[:300]})

    def folder(name) -> Path:
        path = tmp / "inputs" / re.sub(r"[^a-z0-9]+", "-", name.lower())
        path.mkdir(parents=True)
        return path

    def copy(src: Path, dst: Path) -> Path:
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
        return dst

    dump = ws.root / "fixtures/tiny-wiki.xml"
    questions = ws.root / "fixtures/tiny-questions.tsv"

    # MediaWiki dumps: parse-wiki
    for name, spoil in [("dump cut mid-page", lambda p: cut(p, 0.6)), ("dump empty", lambda p: p.write_text("")),
                        ("dump not XML", lambda p: p.write_text("just text, no pages\n")),
                        ("dump of another version (checksum)", None)]:
        f = folder(name)
        bad = copy(dump, f / "dump.xml")
        sha = []
        if spoil:
            spoil(bad)
        else:
            sha = ["--sha256", "0" * 64]
        case(name, ["parse-wiki", "--dump", bad, *sha, "--articles", f / "a.jsonl", "--redirects", f / "r.json",
                    "--stats", f / "s.json"], bad, [f / "a.jsonl", f / "r.json", f / "s.json"])

    # question sets: reqa-wiki
    header, *rows = lines_of(questions)
    for name, text in [("questions: a row pasted twice", [header, *rows, rows[1]]),
                       ("questions: wrong header", ["article\tquestion\tanswer", *rows]),
                       ("questions: a row with a field missing", [header, rows[0].rsplit("\t", 1)[0], *rows[1:]]),
                       ("questions: an unknown article", [header, "Nowhere\tq?\ta\tb", *rows]),
                       ("questions: an answer not in its sentence", [header, rows[0].replace("\t", "\tX", 2), *rows[1:]]),
                       ("questions: header only", [header])]:
        f = folder(name)
        bad = f / "questions.tsv"
        bad.write_text("\n".join(text) + "\n")
        case(name, ["reqa-wiki", "--articles", art / "corpus/articles.jsonl", "--questions", bad, "--out-dir", f / "reqa"],
             bad, [f / "reqa"])
    f = folder("articles cut mid-line")
    bad = copy(art / "corpus/articles.jsonl", f / "articles.jsonl")
    cut(bad, 0.7)
    case("articles cut mid-line", ["reqa-wiki", "--articles", bad, "--questions", questions, "--out-dir", f / "reqa"],
         bad, [f / "reqa"])

    # queries TSV: split
    for name, text in [("queries: a repeated id", "q1\tone\nq2\ttwo\nq1\tthree\n"),
                       ("queries: a line without a tab", "q1 one\n"), ("queries: empty", "")]:
        f = folder(name)
        bad = f / "queries.tsv"
        bad.write_text(text)
        case(name, ["split", "--queries", bad, "--train-fraction", 0.5, "--seed", 1, "--out-dir", f / "s"], bad, [f / "s"])

    # runs, qrels and test queries: evaluate
    run, qrels = art / "bm25/run.trec", art / "collection/qrels.txt"
    test, candidates = art / "splits/50-50/test.tsv", art / "collection/candidates.jsonl"

    def evaluate(name, run_file, qrels_file=qrels, test_file=test, bad=None, expect="error", metrics=("R@1",)):
        f = folder(name)
        case(name, ["evaluate", "--run", run_file, "--qrels", qrels_file, "--queries", test_file, "--metrics", *metrics,
                    "--candidates", candidates, "--out", f / "e.json"], bad or run_file, [f / "e.json"], expect)

    f = folder("run files")
    other = f / "other-queries.trec"
    other.write_text("".join(l.replace("q", "z", 1) + "\n" for l in lines_of(run)))
    evaluate("run: of other queries", other)
    foreign = f / "other-docs.trec"
    foreign.write_text("".join(re.sub(r" Q0 (\S+)", r" Q0 x\1", l) + "\n" for l in lines_of(run)))
    evaluate("run: of another collection's documents", foreign)
    partial = f / "some-docs.trec"
    partial.write_text("".join((re.sub(r" Q0 (\S+)", r" Q0 x\1", l) if i % 2 else l) + "\n"
                               for i, l in enumerate(lines_of(run))))
    evaluate("run: some documents unknown", partial, expect="warn")
    half = f / "half-queries.trec"
    kept = {l.split()[0] for l in lines_of(test)[::2]}
    half.write_text("".join(l + "\n" for l in lines_of(run) if l.split()[0] not in kept))
    evaluate("run: half the test queries missing", half, expect="warn")
    bad_line = f / "bad-line.trec"
    bad_line.write_text(run.read_text() + "q1 Q0 d1 one 1.0 t\n")
    evaluate("run: a malformed line", bad_line)
    evaluate("run: missing", f / "nope.trec")
    g = folder("qrels files")
    unjudged = g / "qrels.txt"
    unjudged.write_text("zz 0 d1 1\n")
    evaluate("qrels: none of the test queries judged", run, qrels_file=unjudged, bad=unjudged)
    some = g / "some-qrels.txt"
    some.write_text("".join(l + "\n" for l in lines_of(qrels) if l.split()[0] not in kept))
    evaluate("qrels: some test queries unjudged", run, qrels_file=some, bad=some, expect="warn")
    nonint = g / "nonint.txt"
    nonint.write_text(qrels.read_text() + "q1 0 d1 high\n")
    evaluate("qrels: a non-integer grade", run, qrels_file=nonint, bad=nonint)
    evaluate("metrics: an unknown measure", run, metrics=("Recall@@1",), bad="Recall@@1")

    # ReQA candidates JSONL and trained models: encode-candidates
    f = folder("candidates")
    broken = copy(candidates, f / "broken.jsonl")
    broken.write_text(candidates.read_text() + '{"id": "x", "sentence": \n')
    case("candidates: a line that is not JSON", ["encode-candidates", "--model", model, "--candidates", broken,
                                                 "--embeddings", f / "e.npy", "--ids", f / "e.ids"], broken,
         [f / "e.npy", f / "e.ids"])
    empty = f / "empty.jsonl"
    empty.write_text("")
    case("candidates: empty", ["encode-candidates", "--model", model, "--candidates", empty, "--embeddings", f / "e2.npy",
                               "--ids", f / "e2.ids"], empty, [f / "e2.npy", f / "e2.ids"])
    for name, spoil, bad_part in [("model: truncated weights", lambda m: cut(m / "query/model.safetensors", 0.3), "query"),
                                  ("model: truncated heads", lambda m: cut(m / "heads.safetensors", 0.5), ""),
                                  ("model: broken towers.json", lambda m: (m / "towers.json").write_text("{"), ""),
                                  ("model: tokenizer missing", lambda m: shutil.rmtree(m / "tokenizer"), "tokenizer")]:
        f = folder(name)
        spoilt = copy(model, f / "model")
        spoil(spoilt)
        case(name, ["encode-candidates", "--model", spoilt, "--candidates", candidates, "--embeddings", f / "e.npy",
                    "--ids", f / "e.ids"], spoilt / bad_part if bad_part else spoilt, [f / "e.npy", f / "e.ids"],
             extra_names=[str(spoilt)])

    # embeddings, Faiss indexes, ids: build-index and dense-search
    dense = ws.root / MLM_MODEL.rsplit("/", 1)[0]
    f = folder("embeddings")
    notnpy = f / "x.npy"
    notnpy.write_text("not numpy\n")
    case("embeddings: not a NumPy file", ["build-index", "--embeddings", notnpy, "--factory", "Flat", "--out", f / "i.faiss"],
         notnpy, [f / "i.faiss"])
    case("factory: not a Faiss factory string", ["build-index", "--embeddings", dense / "candidates.npy", "--factory",
                                                 "Flatt", "--out", f / "j.faiss"], "Flatt", [f / "j.faiss"])
    case("factory: more lists than vectors", ["build-index", "--embeddings", dense / "candidates.npy", "--factory",
                                              "IVF4096,Flat", "--out", f / "k.faiss"], "IVF4096,Flat", [f / "k.faiss"])
    truncated = copy(dense / "index-flat.faiss", f / "cut.faiss")
    cut(truncated)
    case("index: truncated Faiss file", ["dense-search", "--model", model, "--index", truncated, "--ids",
                                         dense / "candidates.ids", "--queries", test, "--depth", 10, "--run", f / "r.trec"],
         truncated, [f / "r.trec"])
    ids = f / "short.ids"
    ids.write_text("".join(l + "\n" for l in lines_of(dense / "candidates.ids")[:-2]))
    case("ids: fewer than the index holds", ["dense-search", "--model", model, "--index", dense / "index-flat.faiss",
                                             "--ids", ids, "--queries", test, "--depth", 10, "--run", f / "r2.trec"],
         ids, [f / "r2.trec"])
    parts = [f / "p0.npy", f / "p1.npy"]
    import numpy as np
    np.save(parts[0], np.zeros((2, 4), dtype=np.float32))
    np.save(parts[1], np.zeros((2, 5), dtype=np.float32))
    for i, p in enumerate(parts):
        p.with_suffix(".ids").write_text(f"a{i}\nb{i}\n")
    case("shards: of different widths", ["merge-embeddings", "--parts", *parts, "--part-ids",
                                         *[p.with_suffix(".ids") for p in parts], "--embeddings", f / "m.npy", "--ids",
                                         f / "m.ids"], parts[1], [f / "m.npy", f / "m.ids"], extra_names=[str(parts[0])])

    # Lucene indexes: bm25-search
    for name, spoil in [("Lucene: segment overwritten", "zero"), ("Lucene: segments file gone", "drop")]:
        f = folder(name)
        index = copy(art / "bm25/index", f / "index")
        for segment in index.iterdir():
            if spoil == "zero" and segment.name.startswith("_"):
                data = bytearray(segment.read_bytes())
                data[len(data) // 2:] = bytes(len(data) - len(data) // 2)
                segment.write_bytes(bytes(data))
            if spoil == "drop" and segment.name.startswith("segments_"):
                segment.unlink()
        case(name, ["bm25-search", "--index", index, "--queries", art / "collection/queries.tsv", "--run", f / "r.trec",
                    "--k1", 0.9, "--b", 0.4, "--depth", 5, "--threads", 1], index, [f / "r.trec"])

    # training inputs: finetune
    split = art / "splits/50-50"
    encoder = art / "encoders/random-l1"

    def finetune(name, bad, encoder_dir=encoder, cands=candidates, qrels_file=qrels, train=split / "train.tsv", state=None):
        f = folder(name)
        case(name, ["finetune", "--encoder", encoder_dir, "--candidates", cands, "--qrels", qrels_file, "--train", train,
                    "--valid", split / "valid.tsv", "--out", f / "model", "--state-dir", state or f / "state",
                    "--seed", 1, "--steps", 2, "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0.1,
                    "--checkpoint-every", 1, "--query-length", 16, "--doc-length", 32, "--embedding-dim", 8],
             bad, [f / "model"])

    f = folder("training files")
    orphan = f / "qrels.txt"
    trained = lines_of(split / "train.tsv")[0].split("\t")[0]   # a training question's document renamed
    orphan.write_text("".join((l.replace(" 0 ", " 0 nosuch-", 1) if l.split()[0] == trained else l) + "\n"
                              for l in lines_of(qrels)))
    finetune("qrels: a document not among the candidates", orphan, qrels_file=orphan)
    no_train = f / "train.tsv"
    no_train.write_text("z1\tnobody asks this\n")
    finetune("training questions: none judged", no_train, train=no_train)
    weights = copy(encoder, f / "encoder")
    cut(weights / "model.safetensors", 0.3)
    finetune("encoder: truncated weights", weights, encoder_dir=weights)
    state = f / "tampered-state"
    state.mkdir()
    import torch

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {tmp / 'pwned-checkpoint'}",)
    torch.save({"fingerprint": "x", "step": 1, "model": {}, "history": [Payload()]}, state / "checkpoint.pt")
    finetune("checkpoint: tampered (pickled code)", state / "checkpoint.pt", state=state)
    if (tmp / "pwned-checkpoint").exists():
        cases[-1]["outcome"] = "injection executed"
    cut_state = f / "cut-state"
    cut_state.mkdir()
    torch.save({"fingerprint": "x", "step": 1, "model": {}}, cut_state / "checkpoint.pt")
    cut(cut_state / "checkpoint.pt")
    finetune("checkpoint: truncated", cut_state / "checkpoint.pt", state=cut_state)

    # tables: evaluation JSON and the paper's values
    f = folder("tables")
    spoilt = f / "eval.json"
    spoilt.write_text('{"metrics": ')
    rows = ["--row", chang_row(spoilt)]
    table = ["chang2020-table", "--table", "table3", "--paper", ws.root / "data/papers/chang2020.csv", "--profile",
             "tiny", "--note", "n", "--option", "dataset=enwiki-mini", "--option", "metrics=R@1"]
    case("evaluation JSON cut short", [*table, *rows, "--csv", f / "t.csv", "--json", f / "t.json"], spoilt,
         [f / "t.csv", f / "t.json"])
    good = art / "eval/bm25/50-50/lucene.json"
    case("paper values file missing", ["chang2020-table", "--table", "table3", "--paper", f / "nope.csv", "--profile",
                                       "tiny", "--note", "n", "--option", "dataset=enwiki-mini", "--option",
                                       "metrics=R@1", "--row", chang_row(good), "--csv", f / "u.csv", "--json",
                                       f / "u.json"],
         f / "nope.csv", [f / "u.csv", f / "u.json"])
    case("a table row with a field missing", [*table, "--row", chang_row(good, split=None), "--csv", f / "v.csv",
                                              "--json", f / "v.json"], "--row", [f / "v.csv", f / "v.json"])

    # passage collections: passages-msmarco on a copy of the tiny MS MARCO folder
    tiny = ws.root / "fixtures/msmarco-tiny"
    for name, spoil, bad_name in [
            ("collection: a repeated passage id", lambda d: (d / "collection.tsv").write_text(
                (d / "collection.tsv").read_text() + (d / "collection.tsv").read_text().splitlines()[0] + "\n"),
             "collection.tsv"),
            ("qrels: a passage not in the collection", lambda d: (d / "qrels.dev.small.tsv").write_text(
                (d / "qrels.dev.small.tsv").read_text() + "999\t0\tnosuch\t1\n"), "qrels.dev.small.tsv"),
            ("queries: a line without text", lambda d: (d / "queries.dev.small.tsv").write_text(
                (d / "queries.dev.small.tsv").read_text() + "77\n"), "queries.dev.small.tsv"),
            ("collection: missing", lambda d: (d / "collection.tsv").unlink(), "collection.tsv")]:
        f = folder(name)
        source = copy(tiny, f / "msmarco")
        spoil(source)
        case(name, ["passages-msmarco", "--source", source, "--seed", 1, "--valid-fraction", 0.1, "--out-dir",
                    f / "reqa", "--split-dir", f / "split"], bad_name, [f / "reqa", f / "split"])

    # fusion and reranking inputs
    f = folder("fusion")
    case("fusion: one run only", ["fuse-runs", "--runs", run, "--method", "rrf", "--out", f / "f.trec"], "--runs",
         [f / "f.trec"])
    empty_run = f / "empty.trec"
    empty_run.write_text("")
    case("fusion: an empty run", ["fuse-runs", "--runs", run, empty_run, "--method", "rrf", "--out", f / "g.trec"],
         empty_run, [f / "g.trec"])
    return cases
