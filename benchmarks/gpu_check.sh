#!/usr/bin/env bash
# The GPU checklist in one go (docs/gpu.md): the gpu-marked tests (every training regime bf16 against fp32 on
# the CPU, fp16 encoding, Faiss on the GPU) and the throughput at the papers' shapes. Writes into $1:
# env.txt, tests.log, gpu_checks.jsonl (one record a check), gpu_throughput.json.
# Packages the machine lacks come as wheels in .whl/ (faiss-cpu, ir_measures, pytrec_eval-terrier; transformers of
# requirements.lock, used only if it imports beside the machine's own hub client, else the machine's own runs and
# env.txt says so).
set -u
out=${1:?usage: benchmarks/gpu_check.sh OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
wheels=$(ls .whl/*.whl 2>/dev/null | grep -v /transformers-)
if [ -n "$wheels" ]; then
    $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels
fi
path=/tmp/site
if ls .whl/transformers-*.whl >/dev/null 2>&1; then
    $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/hf .whl/transformers-*.whl
    PYTHONPATH=/tmp/hf $py -c "from transformers import BertModel, AutoTokenizer" 2>>"$out/env.txt" && path=/tmp/hf:$path
fi
export PYTHONPATH=$path:$PWD/src:$PWD:$PWD/tests
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    $py -c "import sys, torch, transformers, tokenizers, numpy, faiss; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'numpy', numpy.__version__, 'faiss', faiss.__version__, 'faiss gpu', hasattr(faiss, 'StandardGpuResources'))"
    nproc
    echo "CUDA 12 cuBLAS for faiss-gpu wheels:"; (ldconfig -p | grep -E 'libcublas\.so\.12|libcudart\.so\.12') || echo none
} >>"$out/env.txt" 2>&1
cat "$out/env.txt"
TOWERS_GPU_RECORD="$out/gpu_checks.jsonl" timeout 300 $py -m pytest -q -p no:cacheprovider -m gpu -rs --durations=20 tests/gpu 2>&1 | tee "$out/tests.log"
timeout 180 $py -m benchmarks.gpu_throughput "$out/gpu_throughput.json" 2>&1 | tail -40
