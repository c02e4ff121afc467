"""Open-domain retrieval (Chang et al. 2020, sec. 4.4): a QA dataset's candidates enlarged with sentences
of other Wikipedia articles, the download check against a published sha1 list, and the workflow's plan
(models and splits of the base dataset, nothing trained on the open one)."""
import hashlib
import json
import re
import shutil
import subprocess
import sys

import pytest

from towers import cli
from towers.datasets import reqa
from towers.stages import prepare
from towers.io import StageError, checksum_from_list
from benchmarks.workflow_harness import copy_workflow

from conftest import FIXTURES, ROOT, run_stage

PREFIX = "extra:"


def _main(*args):
    assert cli.main([str(a) for a in args]) == 0


def _write_articles(path, articles):
    path.write_text("".join(json.dumps(a) + "\n" for a in articles))
    return path


@pytest.fixture
def dataset(tmp_path, tiny_articles):
    """A base ReQA dataset (the tiny articles and questions) and extra articles: the base's own three
    (one under an underscored title), then three others (copies under new titles and ids)."""
    articles, _ = tiny_articles
    _write_articles(tmp_path / "base-articles.jsonl", articles)
    _main("reqa-wiki", "--articles", tmp_path / "base-articles.jsonl", "--questions", FIXTURES / "tiny-questions.tsv",
          "--out-dir", tmp_path / "base")
    same = [dict(a) for a in articles]
    same[0]["title"] = same[0]["title"].replace(" ", "_")   # "Harbour_lighthouse" is the base's article
    others = [{**a, "id": str(100 + int(a["id"])), "title": f"{a['title']} (other)"} for a in articles]
    extra = _write_articles(tmp_path / "extra-articles.jsonl", same[:2] + others[:1] + same[2:] + others[1:])
    return {"base": tmp_path / "base", "extra": extra, "others": others}


def _open(dataset, out, *more):
    base = dataset["base"]
    return ["reqa-open", "--candidates", base / "candidates.jsonl", "--queries", base / "queries.tsv",
            "--qrels", base / "qrels.txt", "--articles", dataset["extra"], "--seed", 13, "--id-prefix", PREFIX,
            "--out-dir", out, *more]


def _candidates(folder):
    return [json.loads(line) for line in (folder / "candidates.jsonl").read_text().splitlines()]


def test_extra_candidates_skip_the_qa_articles_and_keep_base_first(tmp_path, dataset):
    _main(*_open(dataset, tmp_path / "open"))
    base = _candidates(dataset["base"])
    rows = _candidates(tmp_path / "open")
    assert rows[:len(base)] == base
    extras = rows[len(base):]
    expected = [{**c, "id": PREFIX + c["id"]} for a in dataset["others"] for c in reqa.article_candidates(a)]
    assert extras == expected and len(extras) == 17
    assert {c["title"] for c in extras}.isdisjoint({c["title"] for c in base})
    stats = json.loads((tmp_path / "open" / "stats.json").read_text())
    assert stats == {"queries": 12, "candidates": 34, "tuples": 12, "base_candidates": 17, "extra_candidates": 17,
                     "extra_available": 17, "extra_articles": 6, "extra_articles_used": 3, "skipped_articles": 3,
                     "max_extra": 0, "seed": 13}
    meta = json.loads((tmp_path / "open" / "candidates.jsonl.meta.json").read_text())
    assert meta["stage"] == "reqa-open" and meta["counts"]["extra_candidates"] == 17


def test_ids_do_not_clash(tmp_path, dataset):
    _main(*_open(dataset, tmp_path / "open"))
    rows = _candidates(tmp_path / "open")
    ids = [c["id"] for c in rows]
    assert len(set(ids)) == len(ids)
    base_ids = {c["id"] for c in _candidates(dataset["base"])}
    assert all(i.startswith(PREFIX) for i in ids[len(base_ids):])


def test_queries_and_qrels_are_copied_unchanged(tmp_path, dataset):
    _main(*_open(dataset, tmp_path / "open", "--max-extra", 5))
    for name in ("queries.tsv", "qrels.txt"):
        assert (tmp_path / "open" / name).read_bytes() == (dataset["base"] / name).read_bytes()


def test_sub_sampling_is_seeded_and_repeatable(tmp_path, dataset):
    def extras(out, seed):
        command = _open(dataset, tmp_path / out, "--max-extra", 5)
        command[command.index("--seed") + 1] = seed
        _main(*command)
        return [c for c in _candidates(tmp_path / out) if c["id"].startswith(PREFIX)]

    first, again, other = extras("a", 13), extras("b", 13), extras("c", 14)
    assert len(first) == 5 and first == again and first != other
    everything = [PREFIX + c["id"] for a in dataset["others"] for c in reqa.article_candidates(a)]
    picked = [c["id"] for c in first]
    assert picked == [i for i in everything if i in set(picked)]   # a subset, in the articles' order
    stats = json.loads((tmp_path / "a" / "stats.json").read_text())
    assert stats["extra_candidates"] == 5 and stats["extra_available"] == 17 and stats["candidates"] == 17 + 5
    # more than there are: all of them
    command = _open(dataset, tmp_path / "d", "--max-extra", 100)
    _main(*command)
    assert json.loads((tmp_path / "d" / "stats.json").read_text())["extra_candidates"] == 17


def assert_one_line_error(result, expected):
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr
    assert lines[-1] == f"error: {expected}", result.stderr


def test_an_id_clash_is_one_line_naming_the_file_and_leaves_no_output(tmp_path, dataset):
    clash = f"{PREFIX}{dataset['others'][0]['id']}_0_0"
    rows = _candidates(dataset["base"]) + [reqa.candidate(clash, "A sentence.", "A sentence.", "Harbour lighthouse")]
    own = tmp_path / "own-candidates.jsonl"   # a collection of one's own: no stage's record lists it
    own.write_text("".join(json.dumps(r) + "\n" for r in rows))
    command = _open(dataset, tmp_path / "open")
    command[command.index("--candidates") + 1] = own
    result = run_stage(*command)
    # others[0] is the third line of the extra articles
    assert_one_line_error(result, f"{dataset['extra']}: line 3: extra candidate id {clash!r} clashes with a base "
                                  "candidate id")
    assert not (tmp_path / "open").exists()


def test_a_missing_or_bad_input_is_one_line_and_leaves_no_output(tmp_path, dataset):
    missing = tmp_path / "nope.jsonl"
    command = _open(dataset, tmp_path / "open")
    command[command.index("--articles") + 1] = missing
    assert_one_line_error(run_stage(*command), f"{missing}: input file is missing")
    bad = _write_articles(tmp_path / "bad.jsonl", [{"id": "1", "title": "T"}])
    command[command.index("--articles") + 1] = bad
    assert_one_line_error(run_stage(*command), f"{bad}: line 1: not a parsed article (no 'sections')")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q0001 0 no_such_sentence 1\n")
    command = _open(dataset, tmp_path / "open")
    command[command.index("--qrels") + 1] = qrels
    assert_one_line_error(run_stage(*command), f"{qrels}: query q0001: document 'no_such_sentence' is not a base candidate")
    assert not (tmp_path / "open").exists()


def test_gensim_names_any_file_of_the_package():
    import yaml

    assert prepare.resolve_dump("gensim").name.startswith("enwiki-latest-pages-articles1")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["datasets"]["enwiki-extra"]
    path = prepare.resolve_dump(params["dump"])
    assert path.name == "enwiki-table-markup.xml.bz2" and path.is_file()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == params["dump_sha256"]
    assert prepare.resolve_dump("some/dump.xml.bz2").as_posix() == "some/dump.xml.bz2"
    with pytest.raises(StageError):
        prepare.resolve_dump("gensim:../numpy/__init__.py")


# --- the download check against a published sha1 list -------------------------------------------

SUMS = """{a}  enwiki-20161220-pages-articles-multistream.xml.bz2
{b}  enwiki-20161220-pages-articles.xml.bz2
{c} *enwiki-20161220-stub-articles.xml.gz
"""


def test_checksum_list_parsing():
    a, b, c = "1" * 40, "ab" * 20, "C" * 40
    text = SUMS.format(a=a, b=b, c=c)
    assert checksum_from_list(text, "enwiki-20161220-pages-articles.xml.bz2", "sums.txt") == b
    assert checksum_from_list(text, "enwiki-20161220-stub-articles.xml.gz", "sums.txt") == c.lower()
    with pytest.raises(StageError, match="sums.txt: no sha1 line for other.xml.bz2"):
        checksum_from_list(text, "other.xml.bz2", "sums.txt")
    with pytest.raises(StageError, match="conflicting sha1 lines"):
        checksum_from_list(text + f"{a}  enwiki-20161220-pages-articles.xml.bz2\n",
                           "enwiki-20161220-pages-articles.xml.bz2", "sums.txt")
    with pytest.raises(StageError, match="line 1: 'xyz' is not a sha1 digest"):
        checksum_from_list("xyz  f.bz2\n", "f.bz2", "sums.txt")


def test_download_checks_the_published_sha1(tmp_path):
    source = tmp_path / "mirror" / "enwiki-20161220-pages-articles.xml.bz2"
    source.parent.mkdir()
    source.write_bytes(b"<mediawiki>not really a dump</mediawiki>")
    sums = tmp_path / "mirror" / "enwiki-20161220-sha1sums.txt"
    sums.write_text(SUMS.format(a="0" * 40, b=hashlib.sha1(source.read_bytes()).hexdigest(), c="0" * 40))
    raw = tmp_path / "raw"
    good = run_stage("download", "--url", source.as_uri(), "--sha1-from", sums.as_uri(), "--out", raw / "dump.bz2")
    assert good.returncode == 0, good.stderr
    assert (raw / "dump.bz2").read_bytes() == source.read_bytes()
    meta = json.loads((raw / "dump.bz2.meta.json").read_text())
    assert meta["counts"]["sha1"] == hashlib.sha1(source.read_bytes()).hexdigest()

    sums.write_text(SUMS.format(a="0" * 40, b="f" * 40, c="0" * 40))   # a different version
    bad = run_stage("download", "--url", source.as_uri(), "--sha1-from", sums.as_uri(), "--out", raw / "bad.bz2",
                    "--retries", 1)
    assert_one_line_error(bad, f"{raw / 'bad.bz2'}: sha1 mismatch (expected {'f' * 40} from {sums.as_uri()}); "
                               "the file is corrupt or a different version")
    sums.write_text(f"{'0' * 40}  something-else.bz2\n")
    unlisted = run_stage("download", "--url", source.as_uri(), "--sha1-from", sums.as_uri(), "--out", raw / "x.bz2",
                         "--retries", 1)
    assert_one_line_error(unlisted, f"{sums.as_uri()}: no sha1 line for {source.name}")
    neither = run_stage("download", "--url", source.as_uri(), "--out", raw / "y.bz2")
    assert_one_line_error(neither, f"{raw / 'y.bz2'}: give one of --sha256, --sha1-from and --md5 to check the "
                                   "download against (or --no-checksum)")
    assert sorted(p.name for p in raw.iterdir()) == ["dump.bz2", "dump.bz2.meta.json"]


# --- the workflow: an open dataset is evaluated with its base's models and splits ----------------

ALLOWED = {"enwiki-mini-open": {"reqa_open", "bm25_index", "bm25_search", "encode_candidates", "build_index",
                                "dense_search", "evaluate"},
           "enwiki-extra": {"parse_wiki"}}


def planned_jobs(output: str) -> list[dict]:
    """(rule, input, wildcards) of each job of a dry run's plan."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\]]+\]\nrule |rule )", output):
        rule = re.search(r"^(?:\[[^\]]+\]\n)?rule (\w+):", block)
        if not rule:
            continue
        fields = dict(re.findall(r"^\s+(input|output|wildcards): (.*)$", block, re.M))
        wildcards = dict(w.split("=", 1) for w in fields.get("wildcards", "").split(", ") if "=" in w)
        jobs.append({"rule": rule.group(1), "input": fields.get("input", ""), "wildcards": wildcards})
    return jobs


# enwiki-mini from the test fixtures (params.yaml's own questions are not copied); everything else,
# enwiki-mini-open and enwiki-extra included, from params.yaml
OVERLAY = """datasets:
  enwiki-mini: {kind: wikipedia-qa, dump: fixtures/tiny-wiki.xml, dump_sha256: "", max_articles: 0,
                questions: fixtures/tiny-questions.tsv}
"""


@pytest.mark.snakemake
def test_open_dataset_plans_no_training(tmp_path):
    copy_workflow(tmp_path)   # data too: params name its files, and they must exist
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    (tmp_path / "fixtures" / "open.yaml").write_text(OVERLAY)
    targets = ["artifacts/enwiki-mini-open/eval/quadbert-m0.1-s13/80-20/flat.json",
               "artifacts/enwiki-mini-open/eval/bm25/80-20/lucene.json"]
    plan = subprocess.run([sys.executable, "-m", "snakemake", *targets, "-n", "--configfile", "fixtures/open.yaml"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-3000:]
    jobs = planned_jobs(plan.stdout)
    by_dataset = {}
    for job in jobs:
        by_dataset.setdefault(job["wildcards"].get("dataset"), set()).add(job["rule"])
    for dataset, rules in ALLOWED.items():
        assert by_dataset[dataset] <= rules, by_dataset[dataset] - rules
    assert {"reqa_open", "encode_candidates", "build_index", "dense_search", "bm25_index", "bm25_search",
            "evaluate"} <= by_dataset["enwiki-mini-open"]
    # the model is trained (nothing of it exists in this copy) on the base dataset, under its name
    assert {"train_margin_quadbert", "split", "reqa"} <= by_dataset["enwiki-mini"]
    encode = next(j for j in jobs if j["rule"] == "encode_candidates" and j["wildcards"]["dataset"] == "enwiki-mini-open")
    assert "artifacts/enwiki-mini/dense/quadbert-m0.1-s13/80-20/model" in encode["input"]
    assert "artifacts/enwiki-mini-open/collection/candidates.jsonl" in encode["input"]
    for rule in ("dense_search", "evaluate"):
        job = next(j for j in jobs if j["rule"] == rule and j["wildcards"]["dataset"] == "enwiki-mini-open")
        assert "artifacts/enwiki-mini/splits/80-20/test.tsv" in job["input"]
