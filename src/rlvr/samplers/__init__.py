"""The seam between the trainer and what samples for it: a `Sampler` takes prompts and one seed per
completion wanted, and returns a Rollout (token ids, the log-prob of each sampled token and the support it
was drawn from); weights reach it only through `load_weights`, and `fingerprint` says which it holds.

    protocol.py  Prompt, SampleRequest, the Sampler protocol
    local.py     LocalSampler: rlvr's own engine (rlvr.rollout; rlvr.envs for conversations), the default
    vllm.py      VLLMSampler: the vLLM engine, colocated in this process (vllm_server.py: as a server)
    build.py     build_sampler: the one generation.backend names
"""

from rlvr.samplers.local import LocalSampler
from rlvr.samplers.protocol import GroupDone, Prompt, Sampler, SampleRequest, weights_fingerprint

__all__ = ["GroupDone", "LocalSampler", "Prompt", "SampleRequest", "Sampler", "weights_fingerprint"]
