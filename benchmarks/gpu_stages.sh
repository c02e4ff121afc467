#!/usr/bin/env bash
# The paper profile's GPU stages measured on one GPU in one command (docs/gpu.md), under 10 minutes: writes into $1
#   env.txt           the machine
#   gpu_stages.json   each paper-profile training regime's own stage command at its paper shape (seconds a step,
#                     GPU busy share, peak memory); train-repbert and the batch-16 margin regime also with the GPU
#                     switches off and with CUDA graphs; encode-candidates and reranking rates
#   encode_overlap.json  encoding at 500K synthetic passages, BERT-base, 256 tokens: serial against overlapped
#   speed_checks.jsonl   the GPU training checks with the paper's switches on the device side (TOWERS_GPU_SPEED=1)
# Then, on a machine with Snakemake: python -m benchmarks.gpu_stages record $1/gpu_stages.json, and
# benchmarks/encode_overlap.py's result is kept by hand under results.json `encode_overlap.gpu`.
set -u
out=${1:?usage: benchmarks/gpu_stages.sh OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD:$PWD/tests
py=${PYTHON:-python3}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  $py -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)"; } >"$out/env.txt" 2>&1
cat "$out/env.txt"
# at most 5 minutes: 10 regimes of 30 steps (2 also with the switches off), encoding at 4 lengths over 20K
# passages, reranking, then the 2 with CUDA graphs if time is left (gpu_stages.json is rewritten after each run)
timeout 300 $py -m benchmarks.gpu_stages measure --out "$out" --steps 30 --passages 20000 --budget 180 --limit 290 \
    --speed-pairs train-repbert "batch-size=16 query-length=64 doc-length=64 mined" 2>&1 | grep -v "it/s]" | tail -40
# about 3 minutes: 500K passages, once serial and once overlapped (and a chunk to warm up)
timeout 190 $py -m benchmarks.encode_overlap --shape base --vocab 30522 --passages 500000 --chunk 65536 \
    --doc-length 256 --batch-size 512 --threads 8 --repeats 1 --out "$out/encode_overlap.json" 2>&1 | tail -3
# what is left: the training checks with the switches on the device side (skipped where CUDA graphs fail)
TOWERS_GPU_SPEED=1 TOWERS_GPU_RECORD="$out/speed_checks.jsonl" timeout 45 $py -m pytest -q -p no:cacheprovider -m gpu \
    tests/gpu/test_gpu_training.py -k "repbert or margin or inbatch_finetune" 2>&1 | tail -5
