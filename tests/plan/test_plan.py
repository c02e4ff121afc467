"""towers.plan: one object of the config, built without Snakemake, that leaves the config as it is."""
import copy
from types import SimpleNamespace

from plan_configs import mini_plan, plan_of, profile_configs

from towers.plan import Plan, flags, one_of, q, row_flags


def test_a_plan_leaves_its_config_as_it_is():
    configs = profile_configs()
    build = plan_of
    for config in configs.values():
        before = copy.deepcopy(config)
        plan = build(config)
        assert plan.config == before
    # LTRe's indexes join faiss.indexes in the plan only (they were once written into the config while read)
    paper = configs["paper"]
    assert plan.dense.indexes == {**{i["name"]: i["factory"] for i in paper["ltre"]["indexes"]},
                                  **paper["faiss"]["indexes"]}
    assert set(plan.dense.indexes) > set(paper["faiss"]["indexes"])


class Workflow(SimpleNamespace):   # what Plan.of reads of Snakemake's
    pass


def test_a_workflow_gets_one_plan():
    configs = profile_configs()
    mini = mini_plan()
    workflow = Workflow(config=configs["mini"], basedir="/w", deployment_settings=SimpleNamespace(
        deployment_method={"conda"}))
    plan = Plan.of(workflow, papers=mini.papers)
    assert Plan.of(workflow) is plan and plan.software.conda and plan.software.cpu_env == "/w/envs/cpu.yaml"
    assert plan.software.towers == "python -m towers"


def test_shell_words():
    assert q("a b") == "'a b'" and q("") == "''"
    assert flags({"batch_size": 32, "shared": True, "name": "x y"}) == "--batch-size 32 --shared 1 --name 'x y'"
    assert row_flags([{"a": "1"}], "--run") == """--run '{"a": "1"}'"""
    assert one_of(["a.b", "c"]) == r"a\.b|c" and one_of([]) == "(?!)"


def test_training_runs_data_parallel_with_the_speed_switches_before_the_launcher():
    configs = profile_configs()
    build = plan_of
    software = build(configs["paper"], python="/v/bin/python").software
    assert software.train_processes == configs["paper"]["resources"]["train_jobs"]["gpu"] > 1
    assert software.train.endswith(f"/v/bin/python -m towers.training.distributed {software.train_processes}")
    assert software.train.startswith("TOWERS_SPEED=") == bool(software.gpu_flags)
    # the mini profile turns on fused AdamW alone (issue 43's cut); with every switch off the command is bare
    assert build(configs["mini"], python="/v/bin/python").software.train == \
        "TOWERS_SPEED='--fused-adamw 1' /v/bin/python -m towers"
    off = copy.deepcopy(configs["mini"])
    off["gpu"]["fused_adamw"] = False
    assert build(off, python="/v/bin/python").software.train == "/v/bin/python -m towers"


def test_cuda_graphs_are_a_paper_profile_switch_passed_to_training_when_on():
    """Issue 54: the paper profile names gpu.compile (CUDA graphs for launch-bound steps), off until a GPU run shows
    its speed and losses; turned on, the training stages get --compile 1 in TOWERS_SPEED."""
    paper = profile_configs()["paper"]
    assert paper["gpu"]["compile"] is False and "--compile" not in plan_of(paper).software.gpu_flags
    paper["gpu"]["compile"] = True
    assert "--compile 1" in plan_of(paper, python="/v/bin/python").software.train.split(" /v/bin/python")[0]


def test_the_papers_give_the_targets_and_values():
    mini = mini_plan()
    assert "results/chang2020/table3.csv" in mini.paper_tables
    assert mini.paper_values("chang2020", "table3").startswith("data/papers/")
    assert mini.verdicts.result_csvs[:len(mini.paper_tables)] == mini.paper_tables
    assert "--table chang2020/table3=results/chang2020/table3.csv" in mini.verdicts.tables
    # the article of each query, for power by article: the passage set's test queries are the NQ-like questions
    assert "--articles enwiki-mini-passages n data/enwiki-mini/questions-nq.tsv" in mini.verdicts.articles
    assert mini.verdicts.questions == ["data/enwiki-mini/questions.tsv", "data/enwiki-mini/questions-nq.tsv"]
