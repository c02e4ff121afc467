"""The DAG's plans through snakemake -n (no tiny run needed): bad params, tables without a record, the paper
profile's plan, the cluster profiles. A file of its own so that pytest-xdist runs it beside test_workflow.py."""
import re
import shutil

import pytest
import yaml

from benchmarks.workflow_harness import job_counts, planned_jobs

from test_workflow import CHANG_TABLES, LTRE_TARGETS, QUADRUPLET_TABLES, REPBERT_TARGETS, TARGET, copy_workflow, snakemake


pytestmark = pytest.mark.snakemake   # every test here starts Snakemake (make test-fast leaves them out)

TRAINING_RULES = ("pretrain_mlm", "pretrain_mlm_nsp", "pretrain_two_tower", "finetune", "train_margin_threet",
                  "train_margin_quadbert", "train_repbert", "train_cross_encoder", "train_negatives", "train_ltre")


def job_blocks(plan: str) -> dict[str, list[str]]:
    """rule name -> the text of each of its jobs in a `snakemake -n` plan."""
    blocks: dict[str, list[str]] = {}
    for rule, block in planned_jobs(plan):
        blocks.setdefault(rule, []).append(block)
    return blocks


def test_a_table_found_without_a_record_is_rebuilt_not_trusted(tmp_path):
    """A fresh clone holds the committed tables but no Snakemake record of them: they are planned again
    (with everything they need), not taken as up to date."""
    work = copy_workflow(tmp_path)
    (work / "results").mkdir()
    (work / "results" / "table1.csv").write_text("committed by another profile\n")
    plan = snakemake(work, "results/table1.csv", "--configfile", "fixtures/tiny.yaml", "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    counts = job_counts(plan.stdout)
    assert counts["quadrupletbert_table"] == 1 and counts["train_margin_quadbert"] >= 1


def test_invalid_params_name_the_key(tmp_path):
    work = copy_workflow(tmp_path)
    text = (work / "params.yaml").read_text().replace("  k1: 0.9", "  k1: high")
    (work / "params.yaml").write_text(text)
    plan = snakemake(work, TARGET, "-n")
    assert plan.returncode != 0
    assert (plan.stdout + plan.stderr).strip() == "error: params.yaml: bm25.k1: 'high' is not of type 'number'"


def test_unknown_params_key_is_rejected(tmp_path):
    work = copy_workflow(tmp_path)
    (work / "params.yaml").write_text((work / "params.yaml").read_text().replace("bm25:", "bm52:"))
    plan = snakemake(work, TARGET, "-n")
    assert plan.returncode != 0 and "bm52" in plan.stdout + plan.stderr


def test_a_nested_typo_in_a_profile_is_one_line_naming_file_and_key(tmp_path):
    """A misspelt key inside a dataset of a --configfile profile: refused before planning, not run on defaults."""
    work = copy_workflow(tmp_path)
    tiny = (work / "fixtures/tiny.yaml").read_text()
    (work / "fixtures/typo.yaml").write_text(tiny.replace("    ict_queries: 8", "    ict_querys: 8"))
    plan = snakemake(work, TARGET, "--configfile", "fixtures/typo.yaml", "-n")
    assert plan.returncode != 0 and "Job stats" not in plan.stdout and "Traceback" not in plan.stderr
    assert plan.stderr.strip().splitlines()[-1] == ("error: fixtures/typo.yaml: datasets.enwiki-mini-passages: "
                                                    "unknown key 'ict_querys' (did you mean 'ict_queries'?)")


def test_paper_profile_plans_every_chang_table(tmp_path):
    work = copy_workflow(tmp_path)
    plan = snakemake(work, *CHANG_TABLES, "--configfile", "config/paper.yaml", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    # SQuAD (Table 3), NQ (Tables 4-5), NQ + 1M Wikipedia pairs (Table 6); pairs from the full dump.
    # Fine-tuned: 5 two-tower rows x 3 splits x 2 datasets + 9 ablation rows x 4 splits - 3 (index 9 is
    # Table 4's ICT+BFS+WLP) + 3 (Table 6's ICT, 512-d); encoded and searched: those on their own
    # candidates, but Table 6's ICT only on NQ-open, plus ICT+BFS+WLP on NQ-open.
    tuned = 5 * 3 * 2 + 9 * 4 - 3 + 3
    dense = tuned - 3 + 2 * 3
    assert job_counts(plan.stdout) == {
        "download": 2 + 50 + 2, "wiki_parts": 1, "parse_wiki_part": 64, "merge_wiki_parts": 1, "reqa": 2, "reqa_open": 1, "reqa_statistics": 2,
        "split": 3 + 4, "tokenizer": 3, "bm25_index": 3, "bm25_search": 3,
        "pretraining_pairs": 3, "init_random": 4, "pretrain_mlm": 2, "init_bow": 3,
        "pretrain_two_tower": 9, "finetune": tuned,
        # NQ-open's 6 encodings in encode.shards' 2 parts each, merged
        "encode_candidates": dense - 6, "encode_candidates_shard": 6 * 2, "merge_embeddings": 6,
        "build_index": dense, "dense_search": dense,
        "evaluate": dense + 3 * 3, "pairs_table": 1, "reqa_table": 1, "chang2020_table": 3,
        "ablation_table": 1}
    # pre-trained once on Wikipedia, fine-tuned on both datasets: BERT-base shape, 4 or 12 layers
    assert plan.stdout.count("pretrain-two-tower") == 9
    assert "--steps 100000 --batch-size 8192" in plan.stdout and "--layers 4 " in plan.stdout
    # the multistream dump, parsed in 64 parts planned from its index
    assert "enwiki-20161220-pages-articles-multistream-index.txt.bz2 --parts 64" in plan.stdout
    assert "https://rajpurkar.github.io/SQuAD-explorer/dataset/train-v1.1.json" in plan.stdout or \
        "data/raw/squad/train-v1.1.json" in plan.stdout


def test_paper_profile_plans_quadrupletbert_tables(tmp_path):
    work = copy_workflow(tmp_path)
    plan = snakemake(work, *QUADRUPLET_TABLES, "--configfile", "config/paper.yaml", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    # 2 datasets (SQuAD, NQ) x 2 splits x 3 seeds; Table 2 sweeps 6 margins, Table 1's margin is one of them
    runs, margins = 2 * 2 * 3, 6
    assert job_counts(plan.stdout) == {
        "download": 2 + 50, "reqa": 2, "split": 4, "tokenizer": 2, "pretrain_mlm_nsp": 2, "init_bow": 2,
        "train_margin_threet": runs + runs * margins, "mine_hard_negatives": runs * margins,
        "train_margin_quadbert": runs * margins, "encode_candidates": runs + 2 * runs * margins,
        "build_index": runs + 2 * runs * margins + runs,           # flat everywhere, IVF-PQ for Table 1's rows
        "dense_search": runs + runs + runs * margins + runs, "evaluate": runs + runs + runs * margins + runs,
        "quadrupletbert_table": 2, "quadrupletbert_phase2": 1}   # phase 2's validation curves of Table 1's runs
    assert "pretrain-mlm --nsp 1 --init-hub-model bert-base-uncased" in plan.stdout   # continues BERT-base
    assert "nq-train-49.jsonl.gz" in plan.stdout


def test_any_named_chang_model_plans_its_pretraining_and_bad_names_are_refused(tmp_path):
    work = copy_workflow(tmp_path)
    target = "artifacts/enwiki-mini/eval/transformer-wlp-l1-d24/50-50/flat.json"
    plan = snakemake(work, target, "--configfile", "fixtures/tiny.yaml", "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    counts = job_counts(plan.stdout)
    assert counts["pretrain_two_tower"] == 1 and counts["finetune"] == 1
    assert counts["pretraining_pairs"] == 1                      # WLP's pairs only
    bad = snakemake(work, "artifacts/enwiki-mini/eval/transformer-mlm-l3-d8/50-50/flat.json",
                    "--configfile", "fixtures/tiny.yaml", "-n")
    assert bad.returncode != 0
    assert "MLM exists for the transformer of encoder.layers only" in bad.stdout + bad.stderr


def test_paper_profile_plans_the_repbert_targets(tmp_path):
    work = copy_workflow(tmp_path)
    plan = snakemake(work, *REPBERT_TARGETS, "--configfile", "config/paper.yaml", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    # BM25 and RepBERT on MS MARCO dev small; the hub's monoBERT reranks, so no cross-encoder is trained
    assert job_counts(plan.stdout) == {
        "download": 1, "passages": 1, "bm25_index": 1, "bm25_search_split": 1, "tokenizer": 1, "pretrain_mlm": 1,
        "train_repbert": 1, "encode_candidates_shard": 8, "merge_embeddings": 1, "build_index": 1, "dense_search": 1,
        "latency": 2,
        "rerank": 2 * 4, "rerank_shard": 2 * 8, "merge_rerank": 2,
        "fuse_runs": 6, "consistency": 2, "evaluate": 2 + 2 * 5 + 6,
        "repbert_table": 4, "repbert_figure_1": 1, "repbert_figure_2": 1}
    assert "collectionandqueries.tar.gz" in plan.stdout and "--model castorini/monobert-large-msmarco" in plan.stdout
    # the cross-encoder scores each first-stage run once, at the deepest depth (in 8 query shards, joined);
    # shallower ones reuse it
    assert plan.stdout.count("--model castorini/monobert-large-msmarco") == 2 * 8 and plan.stdout.count("--scores ") == 2 * 4
    assert plan.stdout.count("--shard 7 --shards 8 --precision bfloat16 --tag rerank") == 2
    assert "--steps 350000 --batch-size 52 --lr 3e-06" in plan.stdout


def test_paper_profile_plans_the_ltre_targets(tmp_path):
    work = copy_workflow(tmp_path)
    plan = snakemake(work, *LTRE_TARGETS, "--configfile", "config/paper.yaml", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    counts = job_counts(plan.stdout)
    # 8 baselines; LTRe at 6 training indexes plus 3 figure-3 runs; 6 x 6 evaluations for Table 4
    assert counts["train_negatives"] == 8 and counts["train_ltre"] == 6 + 3
    assert counts["ltre_table"] == 3 and counts["ltre_figure"] == 1
    assert "--start roberta-base" in plan.stdout and "--factory OPQ96,IVF1,PQ96" in plan.stdout
    assert "--steps 60000 --batch-size 32 --lr 5e-06" in plan.stdout
    # nDCG@10 on TREC DL 2019: its queries searched through MS MARCO's indexes, nothing re-encoded for them
    assert counts["passages_graded"] == 1 and "--queries artifacts/msmarco-dl19/splits/dev/test.tsv" in plan.stdout
    assert "2f4be390198da108f6845c822e5ada14" in plan.stdout   # the qrels download, md5-checked
    assert not any("encode-candidates" in line and "msmarco-dl19" in line for line in plan.stdout.splitlines())


def test_paper_training_runs_data_parallel_on_four_gpus(tmp_path):
    work = copy_workflow(tmp_path)
    plan = snakemake(work, "all", "--configfile", "config/paper.yaml", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    trained = 0
    for rule, job in planned_jobs(plan.stdout):
        launched = "-m towers.training.distributed 4 " in job
        assert launched == (rule in TRAINING_RULES), rule   # encoding, search, tables: one process
        if launched:
            trained += 1
            # each process scores a quarter of the batch: every batch must split evenly
            assert all(int(size) % 4 == 0 for size in re.findall(r"--batch-size (\d+)", job)), job
    assert trained > 100


def test_slurm_profile_plans_paper_jobs_with_their_resources(tmp_path):
    work = copy_workflow(tmp_path)
    plan = snakemake(work, *REPBERT_TARGETS, "--profile", "profiles/slurm", "--configfile", "config/paper.yaml", "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "Using profile profiles/slurm" in plan.stdout + plan.stderr
    blocks = job_blocks(plan.stdout)
    # the corpus is encoded as 8 one-GPU jobs, then merged; GPU rules go to the GPU partition
    assert len(blocks["encode_candidates_shard"]) == 8 and len(blocks["merge_embeddings"]) == 1
    for rule in ("encode_candidates_shard", "rerank_shard", "dense_search"):
        for job in blocks[rule]:
            assert "gpu=1" in job and "slurm_partition=gpu" in job and "mem_mb=64000" in job and "runtime=2880" in job
    paper = yaml.safe_load((work / "config/paper.yaml").read_text())
    for job in blocks["train_repbert"]:   # training: 4 GPUs of one node, one process each; CPUs = the job's threads
        assert "gpu=4" in job and "slurm_partition=gpu" in job and "mem_mb=128000" in job
        assert "cpus_per_task" not in job   # the plugin asks for the job's threads (a dry run caps them at --cores)
    resources = paper["resources"]
    for rule in ("bm25_index", "bm25_search_split"):   # MS MARCO's dev queries: a run of their own (bm25.split_runs)
        # the measured request (resources.rules) over the Java family's
        wanted = {**resources["java_jobs"], **resources["rules"][rule]}
        assert f"mem_mb={wanted['mem_mb']}" in blocks[rule][0] and f"runtime={wanted['runtime']}" in blocks[rule][0]
        assert "gpu=" not in blocks[rule][0]
    for rule in ("download", "fuse_runs", "repbert_table"):
        assert "slurm_partition=cpu" in blocks[rule][0] and "gpu=" not in blocks[rule][0]


def test_kubernetes_profile_plans_through_the_shared_volume(tmp_path):
    work = copy_workflow(tmp_path)
    volume = tmp_path / "volume"   # stands for the claim every pod mounts: the repository's data/ lives there
    shutil.copytree(work / "data", volume / "data")
    plan = snakemake(work, *LTRE_TARGETS, "--profile", "profiles/kubernetes", "--configfile", "config/paper.yaml",
                     "--default-storage-prefix", volume, "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    blocks = job_blocks(plan.stdout)
    assert len(blocks["train_negatives"]) == 8 and len(blocks["train_ltre"]) == 6 + 3
    job = blocks["train_ltre"][0]
    assert "gpu=4" in job and "gpu_manufacturer=nvidia" in job and f"{volume}/artifacts/msmarco-passage" in job


def test_sharded_encoding_plans_on_the_embedded_default(tmp_path):
    """encode.shards splits the corpora it names, on any profile."""
    work = copy_workflow(tmp_path)
    (work / "sharded.yaml").write_text("encode: {batch_size: 128, shards: {enwiki-mini-passages: 3}}\n")
    plan = snakemake(work, "results/repbert/table1.csv", "results/chang2020/table3.csv", "--configfile",
                     "sharded.yaml", "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    counts = job_counts(plan.stdout)
    # RepBERT's passages in 3 parts and a merge; Chang's enwiki-mini models still one job each
    assert counts["encode_candidates_shard"] == 3 and counts["merge_embeddings"] == 1
    assert counts["encode_candidates"] == job_counts(snakemake(work, "results/chang2020/table3.csv", "-n").stdout)["encode_candidates"]


def test_a_passage_datasets_first_stage_runs_go_to_repbert_depth_not_bm25_or_faiss_depth(tmp_path):
    """run_depth (towers.plan.datasets): bm25.depth and faiss.depth hold for the sentence datasets only; every
    passage dataset (RepBERT's and LTRe's enwiki-mini-passages here) is searched to repbert.depth. params.yaml and
    the schema say so beside all three keys; a change to the override shows here, not only in the numbers."""
    work = copy_workflow(tmp_path)
    (work / "depths.yaml").write_text("bm25: {depth: 17}\nfaiss: {depth: 19}\nrepbert: {depth: 321}\n")
    runs = {"passages_bm25": "artifacts/enwiki-mini-passages/bm25/run.trec",
            "passages_dense": "artifacts/enwiki-mini-passages/dense/neg-rand/dev/run-flat.trec",
            "sentences_bm25": "artifacts/enwiki-mini/bm25/run.trec",
            "sentences_dense": "artifacts/enwiki-mini/dense/threet-emb-m0.1-s13/80-20/run-flat.trec"}
    params = yaml.safe_load((work / "params.yaml").read_text())
    assert params["ltre"]["dataset"] == params["repbert"]["dataset"] == "enwiki-mini-passages"
    plan = snakemake(work, *runs.values(), "--configfile", "depths.yaml", "-n", "-p", "--forceall")
    assert plan.returncode == 0, plan.stderr[-2000:]
    depth = {}
    for rule, block in planned_jobs(plan.stdout):
        output = re.search(r"^    output: (\S+)", block, re.M)[1]
        if output in runs.values():
            depth[output] = int(re.search(r"--depth (\d+)", block)[1])
    assert depth == {runs["passages_bm25"]: 321, runs["passages_dense"]: 321,
                     runs["sentences_bm25"]: 17, runs["sentences_dense"]: 19}, depth
    text = (work / "params.yaml").read_text()
    for key in ("bm25", "faiss", "repbert"):   # declared beside each key that it changes or that changes it
        section = text.split(f"\n{key}:", 1)[1].split("\n\n", 1)[0]
        assert "(run_depth in " in section and "depth" in section, key
    schema = yaml.safe_load((work / "workflow/schemas/params.schema.yaml").read_text())["properties"]
    for key in ("bm25", "faiss", "repbert"):
        assert "run_depth" in schema[key]["properties"]["depth"]["description"], key


def test_paper_profile_plans_the_claims_and_the_check_against_the_papers_values(tmp_path):
    work = copy_workflow(tmp_path)
    plan = snakemake(work, "results/claims.csv", "check", "--configfile", "config/paper.yaml", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    counts = job_counts(plan.stdout)
    assert counts["claims"] == counts["check_cells"] == counts["check"] == 1
    # the check compares every cell with the paper's own value (data/expected/paper.yaml)
    assert "--expected data/expected/paper.yaml" in plan.stdout
    assert plan.stdout.count("--table ") >= 2 * 17   # claims and check read every table and figure


def test_mini_nq_halves_share_the_text_and_sweep_one_seed(tmp_path):
    """The NQ-like question set (enwiki-mini-nq) reads enwiki-mini's articles: one tokenizer and one MLM+NSP
    encoder serve both; its models are its own. Table 2's margin sweep trains sweep_seeds only, Table 1 every seed."""
    work = copy_workflow(tmp_path)
    plan = snakemake(work, *QUADRUPLET_TABLES, "results/chang2020/table4.csv", "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    blocks = job_blocks(plan.stdout)
    assert len(blocks["tokenizer"]) == len(blocks["pretrain_mlm_nsp"]) == 1
    assert "artifacts/enwiki-mini/encoders/mlm-nsp" in blocks["pretrain_mlm_nsp"][0]
    quad = [re.search(r"output: artifacts/([a-z-]+)/dense/quadbert-m([0-9.]+)-s([0-9]+)/", b).groups()
            for b in blocks["train_margin_quadbert"]]
    quad = [(m, s, d) for d, m, s in quad]
    params = yaml.safe_load((work / "params.yaml").read_text())["quadrupletbert"]
    for spec in params["datasets"]:
        seeds = {m: {int(s) for m_, s, d in quad if m_ == m and d == spec["name"]} for m, _, _ in quad}
        assert seeds[str(spec["margin"])] == set(params["seeds"])          # Table 1's margin: every seed
        assert all(found == set(params["sweep_seeds"]) for m, found in seeds.items() if m != str(spec["margin"]))
    finetuned = {re.search(r"output: artifacts/([a-z-]+)/", b)[1] for b in blocks["finetune"]}
    assert finetuned == {"enwiki-mini-nq"}
