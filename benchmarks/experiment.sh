#!/usr/bin/env bash
# An experiment overlay built beside the base run without touching it:
#   bash benchmarks/experiment.sh OVERLAY TARGET MODEL_PREFIX [WORKSPACE]
# makes WORKSPACE (default /tmp/experiment-<overlay name>) a copy of the workflow whose artifacts are hard links
# to this checkout's, except the models named MODEL_PREFIX* (and their evaluations), which the overlay rebuilds
# there; then builds TARGET with the overlay. Hard links, never symbolic ones: a job the overlay reruns removes
# and rewrites its outputs (atomically: a new file), which through a symbolic link would be the base run's own.
# Times are kept, so the workspace's inputs are no newer than the outputs made from them. Build the base first.
set -euo pipefail
overlay=$1 target=$2 prefix=$3
root=$(cd "$(dirname "$0")/.." && pwd)
work=${4:-/tmp/experiment-$(basename "$overlay" .yaml)}
rm -rf "$work"
mkdir -p "$work/artifacts"
for name in Snakefile params.yaml workflow data config profiles envs; do
  cp -a "$root/$name" "$work/$name"
done
for dataset in "$root"/artifacts/*/; do
  dataset=$(basename "$dataset")
  [ -d "$root/artifacts/$dataset" ] || { cp -a "$root/artifacts/$dataset" "$work/artifacts/"; continue; }
  mkdir -p "$work/artifacts/$dataset"
  for part in "$root/artifacts/$dataset"/*; do
    name=$(basename "$part")
    case $name in
      dense|eval)   # every model but the rebuilt ones
        mkdir -p "$work/artifacts/$dataset/$name"
        for model in "$part"/*; do
          [[ $(basename "$model") == "$prefix"* ]] || cp -al "$model" "$work/artifacts/$dataset/$name/"
        done ;;
      train-state) ;;   # the rebuilt models' training state is their own
      *) cp -al "$part" "$work/artifacts/$dataset/" ;;
    esac
  done
done
cp -a "$root"/artifacts/*.json "$work/artifacts/" 2>/dev/null || true
cd "$work"
PYTHONPATH="$root/src" "$root/.venv/bin/snakemake" "$target" --configfile "$overlay" --cores "${CORES:-2}" \
  --rerun-triggers params input
echo "built $work/$target"
