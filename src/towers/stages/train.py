"""Stages that train: tokenizers, MLM encoders, two-tower, margin, RepBERT, LTRe and
cross-encoder training."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..io import StageError, answers_only, atomic_path, read_jsonl, read_qrels, require_file, sha256_of, with_relevant
from ..training.settings import (CrossEncoder, InBatch, LearningToRetrieve, Margin, MaskedLM, NegativeSampling, Schedule,
                        Settings, Speed)
from . import arg, stage
from .common import (candidate_texts, load_candidates, load_embeddings, read_split, require_texts, seed_everything,
                     set_threads)


def arch_args():
    return (arg("--hidden", type=int, required=True), arg("--layers", type=int, required=True),
            arg("--heads", type=int, required=True), arg("--intermediate", type=int, required=True),
            arg("--max-positions", type=int, required=True))


def arch_of(a) -> dict:
    return {name: getattr(a, name) for name in ("hidden", "layers", "heads", "intermediate", "max_positions")}


def trained(a, train: Callable, save: Callable[[Path], None]) -> tuple:
    """A training stage's tail: `train(run)` trains in place for the run its flags name (run_args) and reports,
    `save(folder)` writes the model into a temporary folder, renamed to `--out` when done; then the training state
    (checkpoints, step log) goes, the log published beside the model."""
    from ..training import loop

    with atomic_path(a.out) as tmp:
        report = train(loop.Run(a.seed, a.state_dir, a.log, a.stop_after_step, speed := Speed.of(a)))
        save(tmp)
    loop.finish(a.state_dir)
    applied = {**speed.as_dict(), "compile": int(bool(speed.compile) and loop.device().type == "cuda")}   # as run
    return a.out, {**report, "speed": applied}   # the record's flags are None where TOWERS_SPEED set the switches


def start_key(start) -> str:
    """What names a training start in the checkpoint fingerprint: a folder's digest, a hub name as it is."""
    from ..training import loop

    return loop.folder_digest(start) if Path(start).is_dir() else str(start)


def start_towers(start, towers: dict, seed: int) -> tuple:
    """Two towers from `start` (an encoder folder or hub name, or a saved two-tower model to continue), their
    tokenizer, and how they are saved."""
    from ..modeling.models import TwoTower

    model, tokenizer, towers = TwoTower.start(start, towers, seed)
    positions = getattr(model.query.encoder.config, "max_position_embeddings", None)
    longest = max(towers["query_length"], towers["doc_length"])
    if positions is not None and longest > positions:
        raise StageError(start, f"the encoder has {positions} positions, fewer than the {longest} tokens asked for")
    return model, tokenizer, towers_saver(model, tokenizer)


def towers_saver(model, tokenizer) -> Callable[[Path], None]:
    return lambda folder: model.cpu().save(folder, tokenizer)


def unique_paragraphs(path) -> list[str]:
    """The paragraphs of ReQA candidates, passages of a passage collection, or the paragraphs of parsed
    articles (a pre-training corpus)."""
    texts = (c["paragraph"] if "paragraph" in c else c["contents"] if "contents" in c else   # passages
             [p["text"] for section in c.get("sections", []) for p in section["paragraphs"]]
             for c in read_jsonl(path))
    return list(dict.fromkeys(t for text in texts for t in ([text] if isinstance(text, str) else text)))


def paragraph_sentences(candidates_path) -> list[list[str]]:
    """Each paragraph's sentences in order (candidates are written paragraph by paragraph)."""
    grouped: dict[str, list[str]] = {}
    for c in read_jsonl(candidates_path):
        grouped.setdefault(c["paragraph"], []).append(c["sentence"])
    return list(grouped.values())


@stage("tokenizer", arg("--candidates", required=True), arg("--out", required=True), arg("--vocab-size", type=int, required=True),
       arg("--min-frequency", type=int, default=2), arg("--lowercase", type=int, default=1),
       arg("--hub-model", default=""))
def tokenizer(a):
    if a.hub_model:   # paper profile: the hub model's own vocabulary
        from transformers import AutoTokenizer

        with atomic_path(a.out) as tmp:
            AutoTokenizer.from_pretrained(a.hub_model).save_pretrained(tmp)
        return a.out, {"hub_model": a.hub_model}
    from ..modeling.tokenizer import train_wordpiece

    with atomic_path(a.out) as tmp:
        size = train_wordpiece(unique_paragraphs(a.candidates), tmp, a.vocab_size, a.min_frequency, bool(a.lowercase))
    return a.out, {"vocab_size": size}


@stage("init-random", arg("--tokenizer", required=True), arg("--out", required=True), arg("--seed", type=int, required=True),
       arg("--hub-model", default=""), *arch_args())
def init_random(a):
    from ..modeling.models import random_encoder

    arch = arch_of(a)
    if a.hub_model:   # the hub model's architecture, fresh weights
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(a.hub_model)
        # --layers still applies: Chang et al.'s ablation has 4-layer towers of BERT-base's shape
        arch = {"hidden": cfg.hidden_size, "layers": a.layers, "heads": cfg.num_attention_heads,
                "intermediate": cfg.intermediate_size, "max_positions": cfg.max_position_embeddings}
    with atomic_path(a.out) as tmp:
        random_encoder(a.tokenizer, tmp, arch, a.seed)
    return a.out, {"arch": arch}


def run_args(settings: type[Settings]) -> tuple:
    """A training stage's flags: its regime's settings, then where it keeps its state, its seed and its step log, and
    how its steps run on a GPU (Speed)."""
    return (*settings.flags(), arg("--state-dir", required=True), arg("--seed", type=int, required=True),
            arg("--log", default=None), arg("--stop-after-step", type=int, default=None), *Speed.flags())


@stage("pretrain-mlm", arg("--candidates", required=True), arg("--tokenizer", required=True), arg("--out", required=True),
       arg("--hub-model", default=""), *run_args(MaskedLM),
       arg("--nsp", type=int, default=0, help="1: add Next Sentence Prediction on sentence pairs of each paragraph"),
       arg("--init-hub-model", default="", help="continue pre-training from this hub checkpoint"),
       *arch_args())
def pretrain_mlm(a):
    if a.hub_model:   # paper profile: an MLM-pre-trained checkpoint from the hub
        from transformers import AutoModel, AutoTokenizer

        from ..training import distributed

        distributed.finish()   # nothing to train: under the launcher the leader alone saves it

        with atomic_path(a.out) as tmp:
            AutoModel.from_pretrained(a.hub_model).save_pretrained(tmp)
            AutoTokenizer.from_pretrained(a.hub_model).save_pretrained(tmp)
        return a.out, {"hub_model": a.hub_model}
    from transformers import AutoTokenizer

    from ..training import loop, mlm

    seed_everything(a.seed)
    tokenizer = AutoTokenizer.from_pretrained(a.tokenizer)
    arch = arch_of(a)
    model = mlm.new_model(tokenizer, arch, a.seed, bool(a.nsp), a.init_hub_model)
    origin = {"arch": arch, "init": a.init_hub_model, "tokenizer": loop.folder_digest(a.tokenizer)}
    return trained(a, lambda run: mlm.pretrain(
        model, tokenizer, unique_paragraphs(a.candidates), MaskedLM.of(a), run, origin,
        paragraph_sentences(a.candidates) if a.nsp else None), lambda folder: mlm.save_encoder(model, tokenizer, folder))


def split_pairs(split_tsv, qrels, candidates_by_id, qrels_path="qrels", candidates_path="candidates") -> list[dict]:
    pairs = []
    for qid, text, relevant in with_relevant(read_split(split_tsv), qrels):
        for doc_id in relevant:
            if doc_id not in candidates_by_id:
                raise StageError(qrels_path, f"question {qid} of {split_tsv}: its document {doc_id} is not in "
                                             f"{candidates_path}")
            c = candidates_by_id[doc_id]
            pairs.append({"query": text, "doc_id": doc_id, "sentence": c["sentence"], "paragraph": c["paragraph"]})
    return pairs


DOC_TEXTS = ["sentence", "sentence+paragraph", "contents"]   # what a doc tower reads: models.doc_input


def tower_args():
    return (arg("--query-length", type=int, required=True), arg("--doc-length", type=int, required=True),
            arg("--embedding-dim", type=int, required=True, help="projection size; 0 = none (the encoder's width)"),
            arg("--pooling", default="cls"), arg("--shared", type=int, default=0), arg("--normalize", type=int, default=0),
            arg("--doc-text", default="sentence+paragraph", choices=DOC_TEXTS),
            arg("--head", default="linear", choices=["linear", "mlp"], help="after pooling: linear, or BoW-MLP's tanh MLP"))


def towers_of(a) -> dict:
    return {"pooling": a.pooling, "embedding_dim": a.embedding_dim, "shared": bool(a.shared),
            "normalize": bool(a.normalize), "query_length": a.query_length, "doc_length": a.doc_length,
            "doc_text": a.doc_text, "head": a.head}


@stage("finetune", arg("--encoder", required=True, help="encoder folder, or a pre-trained two-tower model"), arg("--candidates", required=True), arg("--qrels", required=True),
       arg("--train", required=True), arg("--valid", required=True), arg("--out", required=True),
       *run_args(InBatch), *tower_args())
def finetune(a):
    """Two towers, sampled softmax over in-batch documents (Chang et al.)."""
    from ..training import inbatch

    seed_everything(a.seed)
    candidates = {c["id"]: c for c in read_jsonl(a.candidates)}
    qrels = answers_only(read_qrels(a.qrels))
    pairs = split_pairs(a.train, qrels, candidates, a.qrels, a.candidates)
    if not pairs:
        raise StageError(a.train, "no training questions with a relevant candidate")
    valid = split_pairs(a.valid, qrels, candidates, a.qrels, a.candidates)
    model, tokenizer, save = start_towers(a.encoder, towers_of(a), a.seed)
    return trained(a, lambda run: inbatch.finetune(model, tokenizer, pairs, valid, InBatch.of(a), run,
                                                        start_key(a.encoder)), save)


@stage("pretrain-two-tower", arg("--start", required=True, help="encoder folder the towers start from"),
       arg("--pairs", required=True, nargs="+", help="one pairs JSONL per task; several = their uniform mixture"),
       arg("--title-tasks", nargs="*", default=["ict"], help="tasks whose doc is (title, passage)"),
       arg("--out", required=True), *run_args(InBatch), *tower_args())
def pretrain_two_tower(a):
    """Two towers pre-trained on ICT/BFS/WLP pairs with sampled softmax over in-batch documents (Chang et al.)."""
    from ..datasets.pretraining_pairs import PairFile
    from ..training import inbatch

    seed_everything(a.seed)
    tasks = {}
    for path in a.pairs:
        pairs = PairFile(path)
        task = pairs[0]["task"]
        if task in tasks:
            raise StageError(path, f"a second file of task {task!r}")
        tasks[task] = pairs
    model, tokenizer, save = start_towers(a.start, towers_of(a), a.seed)
    return trained(a, lambda run: inbatch.pretrain(model, tokenizer, tasks, InBatch.of(a), run, start_key(a.start),
                                                        a.title_tasks), save)


@stage("checkpoint-model",
       arg("--source", required=True, help="a hub name, a local folder (HF or sentence-transformers layout), or "
                                          "package:<module> (a Python package that ships the model folder)"),
       arg("--out", required=True), arg("--doc-text", required=True, choices=DOC_TEXTS),
       arg("--pooling", default=None, help="default: the checkpoint's (1_Pooling/config.json), else cls"),
       arg("--normalize", type=int, default=None, help="default: 1 when modules.json has Normalize"),
       arg("--query-length", type=int, default=None, help="default: its max_seq_length, else the encoder's limit"),
       arg("--doc-length", type=int, default=None), arg("--query-prefix", default=None, help="default: its query prompt"),
       arg("--doc-prefix", default=None, help="default: its document prompt"),
       arg("--lowercase", type=int, default=None, help="default: its do_lower_case"),
       arg("--label", default=""), arg("--caveat", default=""))
def checkpoint_model(a):
    """A pretrained encoder checkpoint as a model folder of this project, evaluated as it is (not trained)."""
    from ..modeling.checkpoint import convert

    overrides = {"pooling": a.pooling, "normalize": None if a.normalize is None else bool(a.normalize),
                 "query_length": a.query_length, "doc_length": a.doc_length, "query_prefix": a.query_prefix,
                 "doc_prefix": a.doc_prefix, "lowercase": None if a.lowercase is None else bool(a.lowercase)}
    with atomic_path(a.out) as tmp:
        config = convert(a.source, tmp, a.doc_text, overrides, a.label, a.caveat)
    return a.out, {k: v for k, v in config.items() if k != "checkpoint"} | {"read_from": config["checkpoint"]["read_from"],
                                                                             "folder": config["checkpoint"]["folder"]}


@stage("init-bow", arg("--out", required=True), arg("--buckets", type=int, required=True), arg("--dim", type=int, required=True),
       arg("--max-features", type=int, default=256), arg("--seed", type=int, required=True),
       arg("--char-ngram", type=int, default=3, help="0 = no character n-grams"),
       arg("--word-bigrams", type=int, default=1, help="0 = word unigrams only (Chang et al.'s BoW-MLP)"))
def init_bow(a):
    """Random hashed bag-of-words embeddings: word uni(/bi)grams (+ char n-grams, Huang et al. 2020's text towers)."""
    from ..modeling.models import random_bag_of_words

    with atomic_path(a.out) as tmp:
        random_bag_of_words(tmp, a.buckets, a.dim, a.max_features, a.seed, a.char_ngram, bool(a.word_bigrams))
    return a.out, {"buckets": a.buckets, "dim": a.dim}


def split_examples(split_tsv, qrels, index_of: dict[str, int]) -> list[dict]:
    """A split's questions with the candidate indices of their gold sentences."""
    examples = []
    for qid, text, relevant in with_relevant(read_split(split_tsv), qrels):
        positives = sorted(index_of[d] for d in relevant if d in index_of)
        if positives:
            examples.append({"qid": qid, "query": text, "positives": positives})
    return examples


@stage("train-margin", arg("--start", required=True, help="encoder folder, or a saved model to continue (phase 2)"),
       arg("--candidates", required=True), arg("--qrels", required=True), arg("--train", required=True),
       arg("--valid", required=True), arg("--out", required=True),
       arg("--mined", default="", help="mined candidate lists (JSONL): adds hard negatives, the four-tower loss"),
       *run_args(Margin), *tower_args())
def train_margin(a):
    """Triplet (three towers) or quadruplet (four towers, with --mined) training, cosine distance."""
    from ..training import margin

    seed_everything(a.seed)
    candidates = load_candidates(a.candidates)
    index_of = {c["id"]: i for i, c in enumerate(candidates)}
    qrels = answers_only(read_qrels(a.qrels))
    examples = split_examples(a.train, qrels, index_of)
    if not examples:
        raise StageError(a.train, "no training questions with a relevant candidate")
    mined = None
    if a.mined:
        mined = {row["qid"]: [index_of[d] for d in row["candidates"] if d in index_of] for row in read_jsonl(a.mined)}
        if not mined:
            raise StageError(a.mined, "no mined candidate lists")
    valid = split_examples(a.valid, qrels, index_of)
    model, tokenizer, save = start_towers(a.start, towers_of(a), a.seed)
    return trained(a, lambda run: margin.train(model, tokenizer, examples, valid, candidates, Margin.of(a), run,
                                                    start_key(a.start), mined), save)


def qrels_pairs(split_tsv, qrels) -> list[dict]:
    """A split's (query, relevant document) pairs: {'qid', 'query', 'doc_id'}."""
    return [{"qid": qid, "query": text, "doc_id": doc_id}
            for qid, text, relevant in with_relevant(read_split(split_tsv), qrels) for doc_id in relevant]


@stage("train-repbert", arg("--start", required=True,
                            help="encoder folder (or hub name, e.g. bert-base-uncased), or a RepBERT model to continue"),
       arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"), arg("--qrels", required=True),
       arg("--train", required=True, help="training queries TSV"), arg("--valid", required=True), arg("--out", required=True),
       arg("--query-length", type=int, default=20), arg("--doc-length", type=int, default=256),
       arg("--doc-text", default="contents", choices=DOC_TEXTS), *run_args(Schedule))
def train_repbert(a):
    """RepBERT: one shared BERT, mean pooling, inner product, MultiLabelMarginLoss over in-batch documents."""
    from ..training import repbert

    seed_everything(a.seed)
    qrels = answers_only(read_qrels(a.qrels))
    pairs, valid = qrels_pairs(a.train, qrels), qrels_pairs(a.valid, qrels)
    if not pairs:
        raise StageError(a.train, "no training queries with a relevant document")
    if a.batch_size < 2:
        raise StageError("--batch-size", f"in-batch negatives need at least 2 pairs a batch, not {a.batch_size}")
    wanted = {p["doc_id"] for p in pairs + valid}
    docs = candidate_texts(a.candidates, wanted, a.doc_text)
    require_texts(docs, wanted, a.qrels, a.candidates)
    model, tokenizer, save = start_towers(a.start, repbert.tower_config(a.query_length, a.doc_length, a.doc_text), a.seed)
    return trained(a, lambda run: repbert.train(model, tokenizer, pairs, valid, docs, qrels, Schedule.of(a), run,
                                                     start_key(a.start)), save)


# --- LTRe (Zhan et al. 2020): negative-sampling baselines and training against a fixed index ------

def ltre_training_data(a, doc_ids, ids_key: str, depth: int):
    """The split's training queries, their judgements and BM25's ranked rows (only these queries' hits, cut to
    `depth`) by row of `doc_ids` (a list, or a RowLookup), as compact arrays (training.sampling.TrainingData)."""
    from ..training.sampling import training_data

    queries = [{"qid": qid, "text": text} for qid, text in read_split(a.train).items()]
    if not queries:
        raise StageError(a.train, "no training queries")
    wanted = {q["qid"] for q in queries}
    qrels = {qid: docs for qid, docs in answers_only(read_qrels(a.qrels)).items() if qid in wanted}
    return training_data(queries, qrels, doc_ids, a.bm25_run or None, depth, ids_key)


def require_candidate_ids(path, ids: list[str], ids_path) -> None:
    """The candidates' ids are `ids`, in order (streamed: no candidate's text is kept)."""
    count = 0
    for count, row in enumerate(read_jsonl(path), 1):
        if count > len(ids) or row.get("id") != ids[count - 1]:
            break
    else:
        if count == len(ids):
            return
    raise StageError(ids_path, f"its ids are not those of {path}, in order")


def ltre_args(settings: type[Settings]):
    return (arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"), arg("--qrels", required=True),
            arg("--train", required=True, help="training queries TSV"),
            arg("--bm25-run", default="", help="TREC run of BM25 over the training queries"),
            arg("--threads", type=int, default=0), arg("--out", required=True), *run_args(settings))


@stage("train-negatives", arg("--start", required=True,
                              help="encoder folder or hub name (towers start from it), or a saved model (a warm start)"),
       arg("--query-length", type=int, default=32), arg("--doc-length", type=int, default=512),
       arg("--embedding-dim", type=int, default=768), arg("--pooling", default="cls"),
       arg("--head", default="linear-ln", choices=["linear", "linear-ln"]), *ltre_args(NegativeSampling))
def train_negatives(a):
    """LTRe Table 1's negative-sampling baselines: one shared encoder, (relevant, negative) pairs."""
    from ..training import negatives
    from ..training.sampling import CandidateTexts

    seed_everything(a.seed)
    set_threads(a.threads)
    if a.negatives in ("bm25", "bm25+rand") and not a.bm25_run:
        raise StageError("--bm25-run", f"{a.negatives} negatives need a BM25 run")
    docs = CandidateTexts(a.candidates, "contents")   # row -> passage, read when a step asks
    data = ltre_training_data(a, docs.lookup, docs.key, a.negative_depth)
    towers = {"pooling": a.pooling, "embedding_dim": a.embedding_dim, "shared": True, "normalize": False,
              "query_length": a.query_length, "doc_length": a.doc_length, "doc_text": "contents", "head": a.head}
    model, tokenizer, save = start_towers(a.start, towers, a.seed)
    negatives.require_shared(model, a.start)
    return trained(a, lambda run: negatives.train(model, tokenizer, data, docs, NegativeSampling.of(a), run,
                                                       start_key(a.start)), save)


@stage("train-ltre", arg("--start", required=True, help="a saved model: its doc tower is fixed, its query tower trained"),
       arg("--embeddings", required=True, help="the start's doc vectors (encode-candidates)"),
       arg("--ids", required=True), arg("--index", required=True, help="Faiss index over --embeddings"),
       *ltre_args(LearningToRetrieve))
def train_ltre(a):
    """LTRe: only the query tower learns, from full retrieval over a fixed index of fixed doc vectors."""
    import copy

    from ..modeling.models import TwoTower
    from ..retrieval import vector_index
    from ..training import ltre

    seed_everything(a.seed)
    set_threads(a.threads)
    if a.negatives == "bm25" and not a.bm25_run:
        raise StageError("--bm25-run", "BM25 negatives need a BM25 run")
    ids = require_file(a.ids).read_text().split()
    require_candidate_ids(a.candidates, ids, a.ids)
    data = ltre_training_data(a, ids, sha256_of(a.ids)[:16], max(a.negative_depth, a.probe_depth))
    del ids
    vectors = load_embeddings(a.embeddings, mmap=True)   # mapped: data-parallel processes share one copy
    if vectors.shape[0] != data.n_docs:
        raise StageError(a.embeddings, f"{vectors.shape[0]} embeddings for {data.n_docs} ids ({a.ids})")
    index = vector_index.load(a.index, data.n_docs, a.ids, mmap=True)
    start, tokenizer = TwoTower.load(a.start)
    # the doc tower stays the start's; the query tower is a copy that learns
    model = TwoTower(copy.deepcopy(start.query), start.doc, {**start.config, "shared": False})
    settings = LearningToRetrieve.of(a, query_length=start.config["query_length"])
    return trained(a, lambda run: ltre.train(model.query, tokenizer, data, vectors, index, settings, run),
                   towers_saver(model, tokenizer))


# reranking (RepBERT sec. 4.4): a cross-encoder rescores the top-K of a first-stage run
@stage("train-cross-encoder", arg("--start", required=True, help="encoder folder (the MLM encoder) or hub name"),
       arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"), arg("--qrels", required=True),
       arg("--train", required=True, help="training queries TSV"), arg("--valid", required=True),
       arg("--run", required=True, help="first-stage TREC run (e.g. BM25) of the training and validation queries"),
       arg("--out", required=True), *run_args(CrossEncoder))
def train_cross_encoder(a):
    """A BERT sequence-pair classifier on (query, relevant) against (query, first-stage negatives)."""
    from ..training import cross_encoder
    from ..training.sampling import CandidateTexts

    seed_everything(a.seed)
    settings = CrossEncoder.of(a)
    passages = CandidateTexts(a.candidates, "contents")   # row -> passage, read when a step asks
    splits = [read_split(a.train), read_split(a.valid)]
    examples, valid = cross_encoder.examples_by_row(splits, answers_only(read_qrels(a.qrels)), a.run, passages,
                                                    settings.negatives_depth, a.qrels)
    if not examples:
        raise StageError(a.train, f"no training query has both a relevant document and a negative in {a.run}")
    # a query without a judged passage or without a negative in the run's top has nothing to learn from: say so
    left_out = {"train": len(splits[0]) - len(examples), "valid": len(splits[1]) - len(valid)}
    if any(left_out.values()):
        print(f"left out {left_out['train']} of {len(splits[0])} training and {left_out['valid']} of "
              f"{len(splits[1])} validation queries: no relevant passage, or no negative in the top "
              f"{settings.negatives_depth} of {a.run}", flush=True)
    model, tokenizer = cross_encoder.start(a.start, settings, a.seed)

    def train(run):
        return {**cross_encoder.train(model, tokenizer, examples, valid, passages, settings, run, start_key(a.start)),
                "queries_left_out": left_out}

    return trained(a, train, lambda folder: cross_encoder.save(model, tokenizer, folder))
