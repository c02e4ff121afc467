"""Datasets in the project's formats, one module a source. Question sets (reqa.py: SQuAD, NQ, Wikipedia QA; wiki.py:
the dump parser, wiki_parts.py: a multistream dump parsed in parts, sentences.py: sentence splitting; splits.py:
cold-start splits), Chang et al.'s pre-training pairs (pretraining_pairs.py) and passage-ranking sets (RepBERT: MS
MARCO passage ranking):

Candidates are passages, one JSON line each: `{"id", "contents"}` (Pyserini's JsonCollection; the
BEIR and Wikipedia forms keep `title`, and their `contents` is title + " " + text). Queries are TSV,
qrels TREC, and each dataset has one split, "dev": test = its evaluation queries, train = its training
queries less a seeded validation sample (valid). Train and test qrels share one qrels.txt.

Forms, each one loader:
- MS MARCO TSV (`passages-msmarco`): collection.tsv (pid<TAB>passage), queries.<x>.tsv (qid<TAB>text),
  qrels.<x>.tsv (`qid 0 pid rel`, tab- or space-separated; TREC's `qid Q0 pid rel` reads too), in a folder
  or a tar archive such as the official collectionandqueries.tar.gz (read once, as a stream); any file
  may be gzipped (`<name>.gz`).
- BEIR JSONL (`passages-beir`): corpus.jsonl ({"_id", "title", "text"}), queries.jsonl ({"_id", "text"}),
  qrels/<split>.tsv (header query-id, corpus-id, score), in a folder or the official zip.
- Wikipedia paragraphs (`passages-wiki`): parsed articles (parse-wiki) and a ReQA question set: each
  paragraph is a passage, a question's relevant passage the paragraph holding its answer sentence, and
  ICT pseudo-queries (a paragraph's sentence -> that paragraph) join the training queries.
- Graded evaluation sets (`passages-graded`): extra test queries with graded qrels over another passage
  dataset's collection, such as TREC DL 2019 (msmarco-test2019-queries.tsv.gz, 2019qrels-pass.txt, grades
  0-3) over MS MARCO's passages; only judged queries are kept, and every judged passage must be in the
  collection. Such a dataset has no candidates of its own: searches go through its base's indexes.
- Train triples (`passages-triples`): MS MARCO's triples.train.small.tsv (query, positive passage,
  negative passage, as text) mapped to ids, qid<TAB>positive pid<TAB>negative pid.

Nothing holds a collection in memory: passages stream from their file (or archive member) to
candidates.jsonl, and only a 64-bit hash of each id is kept (70 MB for MS MARCO's 8.8M passages),
to check that ids are unique and that every qrels line names an existing passage and query."""
