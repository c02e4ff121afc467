"""benchmarks/cores.py: a build's own jobs and DAG, list-scheduled on more cores."""
import cores

LOG = """[Wed Nov 25 14:00:00 2026]
rule parse:
    output: a/corpus.jsonl
    jobid: 1
[Wed Nov 25 14:00:10 2026]
Finished jobid: 1 (Rule: parse)
[Wed Nov 25 14:00:10 2026]
rule train:
    input: a/corpus.jsonl
    output: a/model
    threads: 2
    jobid: 2
[Wed Nov 25 14:00:10 2026]
rule bm25:
    input: a/corpus.jsonl
    output: a/run.txt
    jobid: 3
[Wed Nov 25 14:00:30 2026]
Finished jobid: 3 (Rule: bm25)
[Wed Nov 25 14:01:10 2026]
Finished jobid: 2 (Rule: train)
[Wed Nov 25 14:01:10 2026]
rule table:
    input: a/model/config.json, a/run.txt
    output: t.csv
    jobid: 4
[Wed Nov 25 14:01:15 2026]
Finished jobid: 4 (Rule: table)
"""


def jobs(tmp_path):
    log = tmp_path / "x.snakemake.log"
    log.write_text(LOG)
    return cores.log_jobs(log)


def test_a_log_gives_each_job_its_seconds_threads_and_parents(tmp_path):
    found, wall = jobs(tmp_path)
    assert wall == 75
    assert [(j["rule"], j["wall"], j["threads"]) for j in found] == [
        ("parse", 10, 1), ("bm25", 20, 1), ("train", 60, 2), ("table", 5, 1)]
    # the table reads a file inside the model folder: its parent is the job that wrote the folder
    assert cores.parents(found) == [set(), {0}, {0}, {1, 2}]


def test_the_simulation_waits_for_cores_and_for_parents(tmp_path):
    found, _ = jobs(tmp_path)
    before = cores.parents(found)
    # one core: every job in turn; two: bm25 cannot run beside the 2-thread training; four: it can
    assert cores.simulate(found, before, 1, {}) == 95
    assert cores.simulate(found, before, 2, {}) == 95
    assert cores.simulate(found, before, 4, {}) == 75
    assert max(cores.tails(found, before)) == 75
    assert cores.critical_path(found, before) == ["parse (10 s)", "train (60 s)", "table (5 s)"]


def test_a_priority_starts_its_rule_first(tmp_path):
    found, _ = jobs(tmp_path)
    found[2]["threads"] = 1
    found.append({"rule": "other", "inputs": ["a/corpus.jsonl"], "outputs": ["o"], "threads": 1, "began": 0, "wall": 50})
    before = cores.parents(found)
    # by rank alone train (65 s to the end) and other (50) start first, bm25 waits: 10 + 50 + 20 + 5
    assert cores.simulate(found, before, 2, {}) == 85
    # bm25 first: the table waits only for the training, and other ends last: 10 + 20 + 50
    assert cores.simulate(found, before, 2, {"bm25": 50}) == 80
