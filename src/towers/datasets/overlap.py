"""Question-to-answer-sentence word overlap: how many of a question's words its answer sentence already holds.

A question set written by looking at the answer sentence (SQuAD's, enwiki-mini's questions.tsv) shares many of
its words; one written before the text was read (Natural Questions, questions-nq.tsv) shares fewer. The measure
needs no model, so it describes the data, not any retriever.

overlap(question, sentence) = |C(q) & W(s)| / |C(q)|, where W(t) is the set of distinct word tokens of t
(lowercased runs of letters and digits: "Aristotle's" -> "aristotle", "s") and C(q) = W(q) minus STOPWORDS,
the question's distinct content words. A question with no content word has no overlap (None) and is counted
apart. No stemming: "founded" does not match "founder". A second reading leaves the article title's words out of
C(q) (overlap_stats(drop_title=True)): the question's words beyond the name of its topic."""
from __future__ import annotations

import re
import statistics

# A fixed English stopword list: NLTK's English list (179 words, as of NLTK 3.8), written out here so the
# measure does not move with a package version. It holds the question words (what, who, when, where, why,
# how, which), auxiliaries, pronouns, articles and prepositions.
STOPWORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom
this that that'll these those am is are was were be been being have has had having do does did doing a an the
and but if or because as until while of at by for with about against between into through during before after
above below to from up down in out on off over under again further then once here there when where why how all
any both each few more most other some such no nor not only own same so than too very s t can will just don
don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn
hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split())

WORD = re.compile(r"[^\W_]+")   # runs of letters and digits, any script


def words(text: str) -> set[str]:
    """The distinct lowercased word tokens of `text`."""
    return set(WORD.findall(text.lower()))


def content_words(text: str) -> set[str]:
    """The distinct lowercased word tokens of `text` that are not stopwords."""
    return words(text) - STOPWORDS


def overlap(question: str, sentence: str, ignore: set[str] = frozenset()) -> float | None:
    """The share of the question's distinct content words (less `ignore`) found in the sentence; None if it has
    none."""
    asked = content_words(question) - ignore
    if not asked:
        return None
    return len(asked & words(sentence)) / len(asked)


def overlap_stats(items, drop_title: bool = False) -> dict:
    """Summary of overlap over (question, answer sentence) or (question, answer sentence, title) items: how many,
    mean, median, the share of questions whose every content word is in the sentence (all) and of those with none
    of them (none), and the mean number of content words a question. With drop_title, the words of the item's
    title (its article's) are left out of the question's content words: what is left is what the question asks
    beyond naming its topic; a question with nothing left is counted apart, as one with no content word is."""
    scores, sizes, unscored = [], [], 0
    for question, sentence, *title in items:
        ignore = words(title[0]) if drop_title and title else frozenset()
        score = overlap(question, sentence, ignore)
        if score is None:
            unscored += 1
            continue
        scores.append(score)
        sizes.append(len(content_words(question) - ignore))
    if not scores:
        raise ValueError("no question has a content word")
    n = len(scores)
    return {"questions": n + unscored, "scored": n, "no_content_words": unscored,
            "mean": round(statistics.fmean(scores), 4), "median": round(statistics.median(scores), 4),
            "all_found": round(sum(s == 1.0 for s in scores) / n, 4),
            "none_found": round(sum(s == 0.0 for s in scores) / n, 4),
            "content_words_per_question": round(statistics.fmean(sizes), 2)}


def question_lengths(questions) -> dict:
    """How long questions are, where there is no answer sentence to compare with (NQ-open's questions): how
    many, and their mean number of content words and of whitespace-separated words."""
    questions = list(questions)
    if not questions:
        raise ValueError("no questions")
    return {"questions": len(questions),
            "content_words_per_question": round(statistics.fmean(len(content_words(q)) for q in questions), 2),
            "words_per_question": round(statistics.fmean(len(q.split()) for q in questions), 2)}


def question_set_pairs(questions_path, articles: list[dict]) -> list[tuple[str, str, str]]:
    """(question, answer sentence, article title) for each row of a wikipedia-qa question file (questions.tsv's format), each
    resolved to its first labelled sentence exactly as the build resolves it (towers.datasets.reqa.resolve_questions)."""
    from .reqa import article_candidates, resolve_questions

    queries, _, answers = resolve_questions(questions_path, articles)
    sentences = {c["id"]: c["sentence"] for a in articles for c in article_candidates(a)}
    first = {}
    for item in answers:                # a row's first labelled sentence, as for SQuAD's first gold answer
        first.setdefault(item["qid"], item)
    return [(queries[qid], sentences[item["candidate"]], item["article"]) for qid, item in first.items()]


def squad_pairs(path) -> list[tuple[str, str, str]]:
    """(question, answer sentence, article title) for each question of an official SQuAD v1.1 JSON file, the sentence being the
    one that holds the start of its first gold answer, split as ReQA-SQuAD is (towers.datasets.reqa.build_squad)."""
    from .reqa import build_squad

    candidates, queries, qrels = build_squad(path)
    sentences = {c["id"]: (c["sentence"], c["title"]) for c in candidates}
    # build_squad keeps a question's relevant sentences in the order of its answers: the first is the first answer's
    return [(queries[qid], *sentences[next(iter(qrels[qid]))]) for qid in queries]
