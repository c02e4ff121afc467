# Two entry points for a fresh clone (see README):
#   make reproduce   set up .venv and build every table of the embedded default profile
#   make test        set up .venv and run the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# every core of the machine (jobs run side by side; each model job's torch threads come from params torch_threads)
CORES ?= $(shell nproc 2>/dev/null || echo 2)
FAISS ?= faiss-cpu==1.15.1

.PHONY: setup reproduce paper verdict-pages test test-fast test-extended test-slurm test-gpu test-reference expected dry-run-paper bench metrics-diff dvc-yaml dvc-lock cache-push cache-pull clean

$(VENV)/.installed: requirements.txt requirements.lock pyproject.toml envs/install-project.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: anything unpinned would pull a multi-GB CUDA build. Faiss: the CPU build
	# (FAISS=faiss-gpu==1.15.1 on a CUDA 12 machine)
	$(PY) -m pip install -q torch==2.13.0 $(FAISS)
	PYTHON=$(PY) bash envs/install-project.sh
	touch $@

setup: $(VENV)/.installed

# the report first, then the check: a cell outside its tolerance still leaves every table and the report built, and
# the check's one line names the failed cells (exit 1)
reproduce: setup
	$(VENV)/bin/snakemake all results/report.html --cores $(CORES)
	$(VENV)/bin/snakemake check --cores 1

# each paper page's verdict table (docs/<paper>.md) written from results/claims.csv; tests/test_verdict_pages.py
# fails while a page and the claims differ
verdict-pages: setup
	$(PY) -m towers.reports.verdict_pages

# two workers (pytest-xdist), a test file to a worker: test_workflow.py (the tiny end-to-end run) on one,
# the other files beside it; the 25 slowest tests are listed at the end
test: setup
	$(VENV)/bin/python -m pytest -q -n 2 --dist loadfile --durations=25 tests

# the quick loop: every test that starts no Snakemake (no plan, no run) and no end-to-end build (markers in
# pyproject.toml; make test runs these too)
test-fast: setup
	$(VENV)/bin/python -m pytest -q -n 2 -m 'not snakemake and not slow and not extended and not reference' tests

# the slower checks left out of `make test` (data-parallel training, sharded encoding, a damaged Lucene index,
# cross-encoder reranking, a SIGKILLed training resumed, a killed dvc repro, DVC push/pull reuse, and a changed
# learning rate failing the check after the whole tiny end-to-end run, which makes this the longer of the two)
test-extended: setup
	$(VENV)/bin/python -m pytest -q -m extended tests

# the workflow through a real one-node Slurm on this machine (tests/slurm: Debian's slurmctld, slurmd and munge,
# installed with apt-get where missing and started without systemd; root only), with profiles/slurm as shipped and
# the test cluster's overlay (tests/slurm/profile): every job through sbatch, the local executor's outputs, a job
# cancelled and retried, the node downed and resumed mid-build, a second run submitting nothing (about 5 minutes on
# two cores; make test-extended runs it too). Skips with one line where Slurm cannot be installed or started.
test-slurm: setup
	$(VENV)/bin/python -m pytest -q -s -m extended tests/slurm

# the paper-scale GPU path against the CPU (tests/gpu: bf16 training steps, fp16 encoding beside fp32 on the CPU), on a
# CUDA machine; make test runs them too and they skip without CUDA (TOWERS_GPU_DRY_RUN=1 runs both sides on the CPU)
test-gpu: setup
	$(VENV)/bin/python -m pytest -q -m gpu tests/gpu

# the project's dense path against sentence-transformers + numpy + pytrec_eval on tiny data (tests/retrieval/test_reference.py,
# about 1-2 minutes; left out of `make test`); `python -m benchmarks.run --part reference` does whole datasets
test-reference: setup
	$(VENV)/bin/python -m pytest -q -m reference tests/retrieval/test_reference.py

# One paper's jobs rebuilt (PAPER=quadrupletbert, chang2020, repbert or ltre): its tables and figures, its rows of
# results/claims.csv and results/check.csv renewed (every other paper's kept as committed: their per-query files are
# not built), the report, then the check. EXPECTED_OUT=<file>: also this build's expected values of its tables,
# for `towers.ops.ci keep-expected --built <file> --tables ...` (docs/verdicts.md)
PAPER ?=
paper: setup
	$(VENV)/bin/snakemake $$($(PY) -m towers.ops.ci paper-targets $(PAPER)) --cores $(CORES)
	$(PY) -m towers.ops.ci paper-verdicts --paper $(PAPER) $(if $(EXPECTED_OUT),--expected-out $(EXPECTED_OUT))
	$(VENV)/bin/snakemake results/report.html --cores 1 --allowed-rules report --forcerun report
	$(VENV)/bin/snakemake check --cores 1 --allowed-rules check

dry-run-paper: setup
	$(VENV)/bin/snakemake all --cores $(CORES) --configfile config/paper.yaml -n

# Rebuild what params/code changes touched (one Snakemake run over dvc.yaml's tables: only the jobs whose
# inputs, params or code moved; then `dvc commit` records them), then show parameter and metric changes against
# BASE (a git revision); the same text goes to metrics-diff.md. CI (.github/workflows/metrics.yml) runs
# exactly this, between `make cache-pull` and `make cache-push`.
BASE ?= main
metrics-diff: setup
	$(PY) -m towers.ops.ci metrics-diff --base $(BASE) --cores $(CORES)

# dvc.yaml is written from data/papers/papers.yaml (one stage per paper table, one for its figures): run this
# after adding a paper or a target there (tests/workflow/test_ci_reuse.py fails while the two disagree)
dvc-yaml: setup
	$(PY) -m towers.ops.ci dvc-yaml

# dvc.lock recorded from a clean copy of the tracked files (bytecode and untracked files never hashed), so `dvc status`
# in a fresh clone calls no stage changed: run this after changing code, params or a table (tests/workflow/test_ci_reuse.py
# fails while a fresh clone would find a stage changed)
dvc-lock: setup
	$(PY) -m towers.ops.ci dvc-lock

# Share artifacts/ (encoders, models, embeddings, indexes) with their Snakemake provenance through a DVC remote:
# the environment's DVC_REMOTE_URL if set, else the default one (`dvc remote add -d NAME URL` first); push, then commit
# artifacts.dvc. CI_CACHE=folder (CI: a folder its cache keeps between runs) keeps the pointer to the last
# pushed build there instead, and the remote too when no other is named.
CI_CACHE ?=
cache-push: setup
	$(PY) -m towers.ops.ci cache-push $(if $(CI_CACHE),--folder $(CI_CACHE))

cache-pull: setup
	$(PY) -m towers.ops.ci cache-pull $(if $(CI_CACHE),--folder $(CI_CACHE))

bench: setup
	$(PY) -m benchmarks.run

# Expected values from this build (after `make reproduce`, or any profile with CONFIG=...): review the diff of
# data/expected/ before committing it. CONFIG=tests/fixtures/tiny.yaml rewrites the tiny profile's (exact) file.
# ALSO=<files>: the same profile's expected values built on other machines (another kind of CPU), combined with
# this build's: each cell centred between them, its tolerance at least their range (docs/verdicts.md).
# TABLES=<names>: only these tables' rows replaced (a rebuild of one paper's jobs, e.g. TABLES="table1 table2 phase2")
CONFIG ?=
ALSO ?=
TABLES ?=
expected: setup
	$(VENV)/bin/snakemake results/expected-values.csv --cores $(CORES) $(if $(CONFIG),--configfile $(CONFIG))
	$(PY) -m towers.ops.ci keep-expected $(if $(CONFIG),--configfile $(CONFIG)) $(if $(ALSO),--also $(ALSO)) \
		$(if $(TABLES),--tables $(TABLES))

clean:
	rm -rf artifacts logs .snakemake
