"""What runs inside vLLM's worker (its `worker_extension_cls`): new weights in, and the fingerprint of what
arrived.

vLLM repacks the weights it loads (fused q/k/v and gate/up projections; on CPU, linear weights moved into
kernel-specific layouts), so its parameters cannot be hashed back into the trainer's names. What the worker
can prove is that it loaded exactly the trainer's tensors: it hashes them, as they reach it, with the
trainer's own `weights_fingerprint`, and loads them in place with vLLM's `reload_weights` (which, on the
CPU build too, runs each layer's post-load repacking; `model.load_weights` does not: the brief's trap).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from rlvr.samplers.protocol import weights_fingerprint


class WeightsReceiver:
    """Mixed into vLLM's worker class (vllm: `worker_extension_cls`); `self` is the worker."""

    def rlvr_load(self, named_tensors: Iterable[tuple[str, torch.Tensor]] | None = None, folder: str | None = None,
                  version: int | str = 0) -> str:
        """Load the policy's weights in place (the tensors, or the safetensors files of `folder`, across
        processes) and return their fingerprint as this worker received them."""
        if folder is not None:
            from safetensors.torch import load_file

            named: list[tuple[str, torch.Tensor]] = []
            for file in sorted(Path(folder).glob("*.safetensors")):
                named += list(load_file(str(file)).items())
        else:
            named = list(named_tensors or [])
        if not named:
            raise ValueError(f"no weights to load (folder {folder!r})")
        fingerprint = weights_fingerprint(named)
        worker: Any = self
        worker.reload_weights(weights_iterator=iter(named))
        worker.rlvr_weights = (int(version), fingerprint)
        return fingerprint

    def rlvr_fingerprint(self) -> list[Any]:
        """[version, fingerprint] of the weights last loaded with `rlvr_load` ([-1, ""] before any)."""
        return list(getattr(self, "rlvr_weights", (-1, "")))
