#!/bin/sh
# Install the torch build that fits this machine, before `pip install -e .` asks for any torch.
# pyproject.toml only says torch>=2.4, and pip keeps whatever satisfies it.
#
#   1. an NVIDIA GPU is visible           -> PyPI's torch (the CUDA build)
#   2. a torch==2.13.0 wheel is available locally (found by pip --no-index in its find-links;
#      this project's CI and dev machines keep the CPU build there) -> that wheel, no big download
#   3. Linux without a GPU                -> the CPU-only build from PyTorch's CPU index
#   4. anything else (macOS, Windows)     -> PyPI's torch, which is the right build there
# RLVR_TORCH_INDEX=<url> forces an index (e.g. a specific CUDA version's).
set -eu
PY="${1:-python3}"
if "$PY" -c "import torch" 2>/dev/null; then
    echo "torch $("$PY" -c 'import torch; print(torch.__version__)') already installed"
    exit 0
fi
if [ -n "${RLVR_TORCH_INDEX:-}" ]; then
    exec "$PY" -m pip install torch --index-url "$RLVR_TORCH_INDEX"
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    exec "$PY" -m pip install "torch>=2.4"   # (the CUDA build: a long download, pip shows its progress)
fi
probe=$(mktemp -d)
if "$PY" -m pip download -q --no-index --no-deps torch==2.13.0 -d "$probe" >/dev/null 2>&1; then
    rm -rf "$probe"
    exec "$PY" -m pip install -q torch==2.13.0   # the local wheel; its dependencies from the index
fi
rm -rf "$probe"
if [ "$(uname -s)" = "Linux" ]; then
    exec "$PY" -m pip install torch --index-url https://download.pytorch.org/whl/cpu
fi
exec "$PY" -m pip install "torch>=2.4"
