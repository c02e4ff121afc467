#!/usr/bin/env bash
# An experiment overlay built beside the base run without touching it:
#   bash benchmarks/experiment.sh OVERLAY TARGET MODEL_PREFIX [WORKSPACE]
# makes WORKSPACE (default /tmp/experiment-<overlay name>) a copy of the workflow whose artifacts link to this
# checkout's, except the models named MODEL_PREFIX* (and their evaluations), which the overlay rebuilds there;
# then builds TARGET with the overlay. The base run's artifacts must be built first.
set -euo pipefail
overlay=$1 target=$2 prefix=$3
root=$(cd "$(dirname "$0")/.." && pwd)
work=${4:-/tmp/experiment-$(basename "$overlay" .yaml)}
mkdir -p "$work/artifacts"
for name in Snakefile params.yaml workflow data config profiles envs; do
  rm -rf "${work:?}/$name"; cp -r "$root/$name" "$work/$name"
done
for dataset in "$root"/artifacts/*/; do
  dataset=$(basename "$dataset")
  mkdir -p "$work/artifacts/$dataset"
  for part in "$root/artifacts/$dataset"/*; do
    name=$(basename "$part")
    case $name in
      dense|eval)   # link every model but the rebuilt ones
        mkdir -p "$work/artifacts/$dataset/$name"
        for model in "$part"/*; do
          [[ $(basename "$model") == "$prefix"* ]] || ln -sfn "$model" "$work/artifacts/$dataset/$name/$(basename "$model")"
        done ;;
      train-state) ;;   # the rebuilt models' training state is their own
      *) ln -sfn "$part" "$work/artifacts/$dataset/$name" ;;
    esac
  done
done
cd "$work"
PYTHONPATH="$root/src" "$root/.venv/bin/snakemake" "$target" --configfile "$overlay" --cores "${CORES:-2}" \
  --rerun-triggers params input
echo "built $work/$target"
