"""params.yaml and its profiles against the schema and each other: unknown keys anywhere, names that reach the
shell, and names one section gives another, each refused in one line naming the file and the key."""
import copy
import os

import pytest
import yaml

from towers.config.params_check import ParamsError, check, dotted, load_sources, merge_configs

from conftest import FIXTURES, ROOT

SCHEMA = ROOT / "workflow/schemas/params.schema.yaml"
PARAMS = ROOT / "params.yaml"
PROFILES = {"default": [], "paper": [ROOT / "config/paper.yaml"], "tiny": [FIXTURES / "tiny.yaml"]}


@pytest.fixture(autouse=True)
def workflow_folder(monkeypatch, request):
    """Files named in params are looked up where Snakemake runs: the repository, or for the tiny
    configuration a copy holding fixtures/ (tests/ has one)."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    monkeypatch.chdir(ROOT / "tests" if params.get("profile") == "tiny" else ROOT)


def merged(files) -> dict:
    return merge_configs(*(yaml.safe_load(path.read_text()) for path in files))


def with_value(path, value) -> dict:
    """params.yaml with the key at `path` set to `value`."""
    config = merged([PARAMS])
    node = config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return config


def problem(config, sources=None) -> str | None:
    try:
        check(config, SCHEMA, sources or [("params.yaml", config)])
    except ParamsError as err:
        return str(err)
    return None


def mappings(tree, path=()):
    """The path of every mapping in a config."""
    if isinstance(tree, dict):
        yield list(path)
        for key, value in tree.items():
            yield from mappings(value, (*path, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from mappings(value, (*path, i))


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_validates(profile):
    files = [PARAMS, *PROFILES[profile]]
    assert problem(merged(files), load_sources(files)) is None


@pytest.mark.parametrize("profile", PROFILES)
def test_an_unknown_key_is_refused_in_every_mapping(profile):
    files = [PARAMS, *PROFILES[profile]]
    config = merged(files)
    paths = list(mappings(config))
    assert len(paths) > 50
    for path in paths:
        bad = copy.deepcopy(config)
        node = bad
        for part in path:
            node = node[part]
        node["bogus_key"] = 1
        message = problem(bad)
        assert message and message.startswith(f"params.yaml: {dotted(path)}") and "bogus_key" in message, (path, message)
        assert "\n" not in message


def test_the_issue_typos_are_named_with_a_suggestion():
    config = merged([PARAMS])
    cases = [(["datasets", "enwiki-mini-passages"], "ict_querys",
              "datasets.enwiki-mini-passages: unknown key 'ict_querys' (did you mean 'ict_queries'?)"),
             (["chang2020"], "tabel3", "chang2020: unknown key 'tabel3' (did you mean 'table3'?)"),
             (["datasets", "enwiki-mini"], "dump_sha265",
              "datasets.enwiki-mini: unknown key 'dump_sha265' (did you mean 'dump_sha256'?)"),
             (["resources", "gpu_jobs"], "mem_mbb", "resources.gpu_jobs: unknown key 'mem_mbb' (did you mean 'mem_mb'?)")]
    for path, key, expected in cases:
        bad = copy.deepcopy(config)
        node = bad
        for part in path:
            node = node[part]
        node[key] = node.get(key.replace("querys", "queries"), 1)
        assert problem(bad) == f"params.yaml: {expected}"


def test_a_key_of_another_dataset_kind_is_refused():
    config = merged([PARAMS])
    config["datasets"]["squad"]["ict_queries"] = 10   # a wikipedia-passages key on a squad dataset
    assert problem(config) == "params.yaml: datasets.squad: unknown key 'ict_queries'"


def test_the_file_that_sets_the_key_is_named(tmp_path):
    profile = tmp_path / "profile.yaml"
    profile.write_text("bm25: {k1: high}\n")
    files = [PARAMS, profile]
    assert problem(merged(files), load_sources(files)) == f"{profile}: bm25.k1: 'high' is not of type 'number'"


@pytest.mark.parametrize("path,value", [
    (["faiss", "indexes", "flat"], "Flat'$(touch x)'"),
    (["ltre", "indexes", 1, "factory"], "OPQ6,IVF1,PQ6;touch x"),
    (["ltre", "start_hub_model"], "roberta-base'; touch x; '"),
    (["repbert", "reranker", "hub_model"], "a$(touch x)"),
    (["tokenizer", "hub_model"], "bert`touch x`"),
    (["encoder", "hub_model"], "bert'"),
    (["quadrupletbert", "pretrain", "init_hub_model"], "bert\"x"),
    (["repbert", "metrics", 0], "RR@10;touch x"),
    (["chang2020", "table3", "splits", 0], "1-99'"),
    (["mining", "index"], "flat$(id)"),
    (["profile"], "mini;x"),
])
def test_values_that_would_reach_a_shell_are_refused(path, value):
    message = problem(with_value(path, value))
    assert message and message.startswith(f"params.yaml: {dotted(path)}: ") and "does not match" in message, message


@pytest.mark.parametrize("path,value,expected", [
    (["chang2020", "table3", "index"], "hnsw", "index 'hnsw' is not defined under faiss.indexes or ltre.indexes"),
    (["chang2020", "table4", "dataset"], "nosuch", "dataset 'nosuch' is not defined under datasets"),
    (["chang2020", "table6", "dataset"], "enwiki-mini",
     "dataset 'enwiki-mini' is of kind wikipedia-qa; Table 6 needs one of kind open-domain"),
    (["quadrupletbert", "splits", 1], "7-93", "split '7-93' is not defined under splits"),
    (["repbert", "dataset"], "squad", "dataset 'squad' is of kind squad; RepBERT's tables needs one of kind"),
    (["ltre", "graded_dataset"], "enwiki-mini", "dataset 'enwiki-mini' is of kind wikipedia-qa"),
    (["quadrupletbert", "quantized_index"], "hnsw", "index 'hnsw' is not defined"),
    (["encode", "shards"], {"nosuch": 2}, "dataset 'nosuch' is not defined under datasets"),
    (["datasets", "enwiki-mini-open", "extra"], "squad", "dataset 'squad' is of kind squad; its extra candidates"),
    (["zeroshot", "checkpoints", 0], "minlm", "checkpoint 'minlm' is not defined under checkpoints"),
    (["zeroshot", "datasets", 0], "scifact", "dataset 'scifact' is not defined under datasets"),
    (["zeroshot", "published"], [{"dataset": "enwiki-mini", "model": "ckpt-minlm", "metric": "nDCG@10", "value": 0.5,
                                  "source": "x"}], "model 'ckpt-minlm' is not a row of the zero-shot tables"),
    (["zeroshot", "published"], [{"dataset": "enwiki-mini", "model": "bm25", "metric": "MAP", "value": 0.5,
                                  "source": "x"}], "metric 'MAP' is not in zeroshot.metrics"),
])
def test_names_of_undefined_datasets_indexes_and_splits_are_refused(path, value, expected):
    message = problem(with_value(path, value))
    assert message and message.startswith(f"params.yaml: {dotted(path)}") and expected in message, message


def test_files_and_folders_params_name_must_exist():
    config = merged([PARAMS])
    config["datasets"]["enwiki-mini"]["questions"] = "data/enwiki-mini/questions.tsv;touch x"
    assert problem(config) == ("params.yaml: datasets.enwiki-mini.questions: "
                               "no such file: 'data/enwiki-mini/questions.tsv;touch x'")
    config = merged([PARAMS])
    config["datasets"]["squad"]["local_dir"] = "nowhere"
    assert problem(config) == ("params.yaml: datasets.squad.local_dir: no such folder: 'nowhere' (a relative path is "
                               f"read against the repository root, {os.getcwd()})")
    config["datasets"]["squad"]["local_dir"] = "data"
    assert problem(config) == "params.yaml: datasets.squad.local_dir: 'data' holds no 'dev-v1.1.json'"


def edited(files, path, value):
    """The merged config of `files` with the key at `path` set to `value` (removed where value is DELETE)."""
    config = merged(files)
    node = config
    for part in path[:-1]:
        node = node[part]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return config


DELETE = object()
PAPER = [PARAMS, ROOT / "config/paper.yaml"]


# What the rule files once checked again while Snakemake read them (their helpers for data, bm25 and ltre),
# each refused here, in one line, before anything is planned
@pytest.mark.parametrize("files,path,value,expected", [
    ([PARAMS], ["datasets", "enwiki-mini-open", "base"], "enwiki-extra",
     "dataset 'enwiki-extra' is of kind wikipedia; an open-domain dataset's base needs one of kind wikipedia-qa"),
    ([PARAMS], ["datasets", "enwiki-mini-passages", "articles"], "squad",
     "dataset 'squad' is of kind squad; its passages needs one of kind wikipedia-qa, wikipedia"),
    (PAPER, ["datasets", "msmarco-dl19", "base"], "squad", "a graded set's base needs one of kind msmarco-passage"),
    (PAPER, ["datasets", "msmarco-dl19", "queries"], "queries.tsv", "'queries.tsv' is not one of its files"),
    (PAPER, ["datasets", "msmarco-passage", "triples"], "triples.tsv", "'triples.tsv' is not one of its files"),
    (PAPER, ["datasets", "msmarco-passage", "files"], DELETE, "'files' is a required property"),
    (PAPER, ["ltre", "indexes", 0, "factory"], "HNSW32", "means 'Flat' in faiss.indexes but 'HNSW32' here"),
    # a multistream dump parsed in parts (index): the index is a file after the dump, which is read whole
    (PAPER, ["datasets", "enwiki", "index"], "enwiki-20161220-pages-articles-multistream.xml.bz2",
     "is not one of its files after the dump (the first: enwiki-20161220-pages-articles-multistream.xml.bz2)"),
    (PAPER, ["datasets", "enwiki", "dump"], "gensim", "a dump parsed in parts (index) is its first file"),
    (PAPER, ["datasets", "enwiki", "max_articles"], 1000, "must be 0 where the dump is parsed in parts"),
    ([PARAMS], ["bm25", "query_shards"], {"enwiki-mini": 2},
     "dataset 'enwiki-mini' is not in bm25.split_runs (none): only split runs are sharded"),
    ([PARAMS], ["zeroshot", "datasets", 0], "enwiki-extra",
     "dataset 'enwiki-extra' is of kind wikipedia; a zero-shot table (evaluation queries) needs one of kind"),
])
def test_names_datasets_give_each_other_are_checked_before_planning(files, path, value, expected):
    message = problem(edited(files, path, value))
    key = dotted(path[:-1] if value is DELETE else path)
    assert message and message.startswith(f"params.yaml: {key}") and expected in message, message
    assert "\n" not in message


def test_a_one_part_query_shard_needs_no_split_runs():
    assert problem(edited([PARAMS], ["bm25", "query_shards"], {"enwiki-mini": 1})) is None


# Issue 56: settings that passed the check and broke late, after the run's clean-up had removed the old outputs

def test_a_length_bucket_past_the_encoders_positions_is_refused():
    assert problem(edited([PARAMS], ["gpu", "length_buckets"], [64, 256])) is None   # params.yaml: 256 positions
    assert problem(edited([PARAMS], ["gpu", "length_buckets"], [64, 300])) == (
        f"params.yaml: {dotted(['gpu', 'length_buckets', 1])}: 300 is longer than the 256 positions of the encoders trained here "
        "(encoder.max_positions)")


@pytest.mark.snakemake
def test_a_length_bucket_past_the_positions_stops_the_run_before_its_clean_up(tmp_path):
    import shutil
    import subprocess
    import sys

    from benchmarks.workflow_harness import copy_workflow

    work = copy_workflow(tmp_path)
    shutil.copytree(FIXTURES, work / "fixtures")
    (work / "buckets.yaml").write_text("gpu: {length_buckets: [200]}\n")   # the tiny BERT has 128 positions
    kept = work / "artifacts/enwiki-mini/corpus/stats.json"   # an output of a job the run would rerun (and remove)
    kept.parent.mkdir(parents=True)
    kept.write_text("{}")
    done = subprocess.run([sys.executable, "-m", "snakemake", str(kept.relative_to(work)), "--cores", "1",
                           "--configfile", "fixtures/tiny.yaml", "buckets.yaml"], cwd=work, capture_output=True,
                          text=True)
    # (Snakemake's own note on --configfile comes first)
    assert done.returncode == 1 and "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1] == (
        f"error: buckets.yaml: {dotted(['gpu', 'length_buckets', 0])}: 200 is longer than the 128 positions of the encoders trained "
        "here (encoder.max_positions)"), done.stderr[-2000:]
    assert kept.read_text() == "{}"


@pytest.mark.parametrize("name, expected", [("..", "'..' names a folder, not a file"),
                                            (".", "'.' names a folder, not a file"),
                                            ("../dev.json", "does not match"), ("a\\b.json", "does not match")])
def test_a_download_named_as_a_folder_or_a_path_is_refused(name, expected):
    message = problem(edited([PARAMS], ["datasets", "squad", "files", 0, "name"], name))
    key = dotted(["datasets", "squad", "files", 0, "name"])
    assert message and message.startswith(f"params.yaml: {key}: ") and expected in message, message
    assert "\n" not in message


# Issue 68: settings the check passed that then failed to plan (or to train); tests/plan/test_plan_accepted.py
# finds them by changing every value within the schema

@pytest.mark.parametrize("path,value,expected", [
    (["chang2020", "table6", "pretraining", 1], "ict+bfs+ict", "chang2020.table6.pretraining[1]: 'ict+bfs+ict' names "
     "a pair task twice; a mixture takes each of ict, bfs and wlp at most once"),
    (["chang2020", "table5", "rows", 0, 2], "wlp+wlp", "chang2020.table5.rows[0][2]: 'wlp+wlp' names a pair task twice"),
    (["chang2020", "table5", "rows", 0, 2], "mlm", "chang2020.table5.rows[0][1]: an MLM row has encoder.layers (2) "
     "layers, not 1: only that encoder is MLM-pre-trained"),
    (["chang2020", "table3", "checkpoints"], ["minlm"],
     "chang2020.table3.checkpoints[0]: checkpoint 'minlm' is not defined under checkpoints (minilm, minilm-paragraph)"),
])
def test_chang2020s_rows_that_cannot_be_trained_are_refused(path, value, expected):
    message = problem(edited([PARAMS], path, value))
    assert message and message.startswith(f"params.yaml: {expected}"), message


def test_a_mixture_the_paper_has_not_is_accepted_and_planned():
    """Before: 'ict+bfs' passed the check, then planning it ended in a bare KeyError (its table label)."""
    from towers.plan import Plan

    config = edited([PARAMS], ["chang2020", "table6", "pretraining"], ["ict+bfs"])
    assert problem(config) is None
    rows = Plan(config).chang2020.rows("table6")
    assert [r["pretraining"] for r in rows[:2]] == ["No Pretraining", "ICT+BFS"]
    assert "/eval/transformer-ict+bfs-l2-d128/" in rows[1]["eval"]


def test_claims_of_an_undeclared_paper_are_refused_by_the_check():
    from towers.reports import papers

    config = edited([PARAMS], ["claims", "papers"], ["chang2020", "dpr"])
    with pytest.raises(ParamsError) as refused:
        check(config, SCHEMA, [("params.yaml", config)], papers.load(root=ROOT))
    assert str(refused.value) == ("params.yaml: claims.papers: 'dpr' is not a paper of data/papers/papers.yaml "
                                  "(chang2020, quadrupletbert, repbert, ltre)")
