#!/bin/sh
# The GPU checks of the real-scale work in one run, for a lent GPU machine: torch with CUDA, transformers and peft
# there, no network, and a working tree that travels within 64 MiB (so random networks of the real shapes stand in
# for the weights).
#
#   sh scripts/gpu_checks.sh wheels   # here, with PyPI: the pure-Python packages rlvr needs that such a machine
#                                     # lacks (math-verify, datasets, ...) as wheels in .whl/ (git-ignored)
#   sh scripts/gpu_checks.sh [OUT]    # there (carrying .whl): each check under its own time limit, its log in OUT
#
# The checks, most important first, at most 9 minutes in all (150 + 200 + 180 s), each check's output kept up to its limit:
#   1. tests/gpu: greedy and seeded decoding, CUDA-graph decoding, shared-prompt log-probs, a bf16 GRPO step;
#   2. a bf16 GRPO step at Qwen2.5-0.5B's shape (random weights, the tiny model's tokenizer): `rlvr train` for
#      STEPS steps of 4 prompts x 8 completions x 128 tokens (a random network never stops early), its step
#      time by phase and its peak GPU memory from metrics.jsonl;
#   3. bench/generation.py at Qwen2.5-0.5B's shape in bf16: HF generate, rlvr's engine, rlvr's CUDA-graph decoding
#      over a static cache, and HF's static cache compiled by transformers (--hf-compile).
# Environment: SHAPE (qwen2.5-0.5b), DEVICE (cuda; cpu to try the script on a CPU with SHAPE=smollm2 and
# NEW_TOKENS=8 BATCHES=1), NEW_TOKENS (128), STEPS (3), BATCHES (1,8,32), WORK (/tmp/gpu-checks-work: the
# random checkpoint and the run, kept out of OUT).
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ "${1:-}" = wheels ]; then
    mkdir -p .whl  # (in .gitignore: it travels to the GPU machine only when a run carries it)
    exec "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 -d .whl math-verify==0.9.0 latex2sympy2_extended==1.11.0 \
        antlr4-python3-runtime==4.13.2 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
fi
OUT="${1:-${OUT:-/tmp/gpu-checks}}"
SHAPE="${SHAPE:-qwen2.5-0.5b}"
DEVICE="${DEVICE:-cuda}"
NEW_TOKENS="${NEW_TOKENS:-128}"
STEPS="${STEPS:-3}"
WORK="${WORK:-/tmp/gpu-checks-work}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=src
if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && PYTHONPATH="src:/tmp/site"
fi
{
    date -u
    nvidia-smi -L 2>/dev/null || grep -m1 "model name" /proc/cpuinfo
    "$PY" -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'peft', peft.__version__)"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "1. tests/gpu"
timeout 150 "$PY" -m pytest -rs -p no:cacheprovider -m gpu tests/gpu > "$OUT/tests_gpu.txt" 2>&1
echo "   exit $?: $(tail -n 1 "$OUT/tests_gpu.txt")"

echo "2. a bf16 GRPO step at $SHAPE's shape"
model="$WORK/model"
run="$WORK/run"
rm -rf "$model" "$run"
timeout 200 sh -c "
\"$PY\" - \"$SHAPE\" \"$model\" <<'EOF' &&
import sys
sys.path.insert(0, 'bench')
from generation import random_network
model, tokenizer = random_network(sys.argv[1])
model.save_pretrained(sys.argv[2])
tokenizer.save_pretrained(sys.argv[2])
EOF
\"$PY\" -m rlvr train --config configs/tiny.yaml --output-dir \"$run\" --max-steps \"$STEPS\" \
    --set model.name=\"$model\" --set model.device=\"$DEVICE\" --set sampling.batch_size=32 \
    --set sampling.group_size=8 --set generation.max_new_tokens=\"$NEW_TOKENS\" --set save_every=0 \
    --set sample_every=0 --set data.eval_size=4
" > "$OUT/grpo_step.txt" 2>&1
echo "   exit $?"
if [ -f "$run/metrics.jsonl" ]; then
    cp "$run/metrics.jsonl" "$OUT/grpo_metrics.jsonl"
    "$PY" - "$run/metrics.jsonl" <<'EOF' | tee -a "$OUT/grpo_step.txt"
import json, sys
keys = ["time/rollout", "time/logprobs", "time/update", "time/weights", "memory/peak_gb"]
print("step " + " ".join(f"{k:>15}" for k in keys))
for line in open(sys.argv[1]):
    row = json.loads(line)
    print(f"{row.get('step', '?'):>4} " + " ".join(f"{row.get(k, float('nan')):15.3f}" for k in keys))
EOF
fi

echo "3. decoding at $SHAPE's shape in bf16"
compile=""
[ "$DEVICE" = cuda ] && compile="--hf-compile"
timeout 180 "$PY" bench/generation.py --device "$DEVICE" --shape "$SHAPE" --dtype bfloat16 $compile \
    --batches "${BATCHES:-1,8,32}" --new-tokens "$NEW_TOKENS" --repeats 2 > "$OUT/generation.txt" 2>&1
echo "   exit $?"
cat "$OUT/generation.txt"
