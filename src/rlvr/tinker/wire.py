"""Tinker's wire types as rlvr's: the protobuf a forward_backward request arrives in and the protobuf its result and a
sample's are answered with (the `tinker` SDK's own schema, `tinker.proto.tinker_public_pb2`, read and written here
only), and the JSON of a sampling request's prompt.

    ForwardBackwardRequest (protobuf) ─read_forward_backward─▶ Pass: [Datum(tokens, inputs {name: tensor})]
    per-datum log-probs, metrics ─forward_backward_output─▶ ForwardBackwardOutput (protobuf)
    sampled sequences, prompt log-probs ─sample_response─▶ SampleResponse (protobuf)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

PROTOBUF = "application/x-protobuf"
_NUMPY = {1: np.float32, 2: np.int64, 3: np.int32}  # DType: FLOAT32, INT64, INT32 (BFLOAT16: below)


class WireError(ValueError):
    """A request the server cannot read or serve: answered with one line naming what (the SDK's error shape)."""


def schema() -> Any:
    """The SDK's protobuf module (`pip install tinker`)."""
    try:
        from tinker.proto import tinker_public_pb2
    except ImportError:
        raise WireError("rlvr serve --tinker needs the tinker SDK: pip install 'rlvr[tinker]'") from None
    return tinker_public_pb2


@dataclass(frozen=True)
class Datum:
    """One sequence: its input tokens, and the loss function's inputs, each a tensor of the tokens' length."""

    tokens: list[int]
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass(frozen=True)
class Pass:
    """A forward (and backward, unless `forward_only`) of a training client's model over `data`."""

    model_id: str
    seq_id: int
    data: list[Datum]
    loss_fn: str
    config: dict[str, float]
    forward_only: bool


def read_forward_backward(body: bytes) -> Pass:
    """The Pass a ForwardBackwardRequest holds."""
    pb = schema()
    request = pb.ForwardBackwardRequest()
    try:
        request.ParseFromString(body)
    except Exception as e:  # (protobuf's DecodeError)
        raise WireError(f"the forward_backward body is not a ForwardBackwardRequest: {e}") from None
    config = {k: float(v) for k, v in request.loss_fn_config.items()}
    for k, value in request.loss_fn_config_v2.items():
        if value.WhichOneof("value") == "text":
            raise WireError(f"loss_fn_config {k}={value.text!r}: only numbers are served")
        config[k] = float(value.number)
    return Pass(request.model_id, request.seq_id, [_datum(d) for d in request.data], request.loss_fn, config,
                request.forward_only)


def _datum(datum: Any) -> Datum:
    tokens: list[int] = []
    for chunk in datum.model_input:
        if chunk.WhichOneof("chunk") != "encoded_text":
            raise WireError(f"a {chunk.WhichOneof('chunk')} chunk: rlvr's models read token ids only")
        tokens += np.frombuffer(chunk.encoded_text.tokens, dtype="<i4").tolist()
    return Datum(tokens, {name: _tensor(name, t) for name, t in datum.loss_fn_inputs.items()})


def _tensor(name: str, t: Any) -> torch.Tensor:
    """A Tensor message as a torch tensor (dense, or sparse CSR with its cells 0 where unlisted)."""
    shape = list(t.shape)
    if t.dtype == 4:  # BFLOAT16: the upper halves of float32s
        raw = np.frombuffer(t.dense, dtype="<u2").astype(np.uint32) << 16
        return torch.from_numpy(raw.view(np.float32).copy()).reshape(shape)
    if t.dtype not in _NUMPY:
        raise WireError(f"loss_fn_inputs[{name!r}] has dtype {t.dtype}: float32, int64 or int32 are read")
    kind = np.dtype(_NUMPY[t.dtype]).newbyteorder("<")
    if t.WhichOneof("encoding") == "sparse_csr":
        values = np.frombuffer(t.sparse_csr.values, dtype=kind)
        rows = np.frombuffer(t.sparse_csr.crow_indices, dtype="<i8")
        cols = np.frombuffer(t.sparse_csr.col_indices, dtype="<i8")
        dense = np.zeros(shape, dtype=kind)
        for r in range(len(rows) - 1):
            dense[r, cols[rows[r]:rows[r + 1]]] = values[rows[r]:rows[r + 1]]
        return torch.from_numpy(dense.astype(kind.newbyteorder("=")))
    return torch.from_numpy(np.frombuffer(t.dense, dtype=kind).astype(kind.newbyteorder("=")).reshape(shape))


def forward_backward_output(logprobs: list[torch.Tensor], metrics: dict[str, float], loss_fn: str) -> bytes:
    """A ForwardBackwardOutput: each datum's target log-probs (`logprobs`), and `metrics` (keys `name:reduction`)."""
    pb = schema()
    out = pb.ForwardBackwardOutput(loss_fn_output_type=loss_fn)
    record = out.loss_fn_outputs.add(type_tag=loss_fn, num_datums=len(logprobs))
    parts = [lp.detach().to(torch.float32).numpy().astype("<f4").tobytes() for lp in logprobs]
    offsets = np.cumsum([0, *(len(p) for p in parts)]).astype("<i8")
    record.fields["logprobs"].CopyFrom(pb.BatchedTensor(data=b"".join(parts), offsets=offsets.tobytes(), dtype=1))
    for key, value in metrics.items():
        out.metrics[key] = float(value)
    return bytes(out.SerializeToString())


def sample_response(sequences: list[tuple[list[int], list[float], bool]],
                    prompt_logprobs: list[float] | None = None) -> bytes:
    """A SampleResponse: each sequence's (tokens, log-probs, ended by a stop), and the prompt's log-probs when asked
    (NaN for the first token, which nothing predicts)."""
    pb = schema()
    out = pb.SampleResponse()
    for tokens, logprobs, stopped in sequences:
        out.sequences.add(stop_reason=0 if stopped else 1, tokens=np.asarray(tokens, dtype="<i4").tobytes(),
                          logprobs=np.asarray(logprobs, dtype="<f4").tobytes())
    if prompt_logprobs is not None:
        out.prompt_logprobs = np.asarray([math.nan, *prompt_logprobs], dtype="<f4").tobytes()
    return bytes(out.SerializeToString())


def prompt_tokens(prompt: Any) -> list[int]:
    """The token ids of a JSON ModelInput ({"chunks": [{"type": "encoded_text", "tokens": [...]}, ...]})."""
    if not isinstance(prompt, dict) or not isinstance(prompt.get("chunks"), list):
        raise WireError("prompt must be a ModelInput: {\"chunks\": [{\"type\": \"encoded_text\", \"tokens\": [...]}]}")
    tokens: list[int] = []
    for chunk in prompt["chunks"]:
        if not isinstance(chunk, dict) or chunk.get("type", "encoded_text") != "encoded_text":
            kind = chunk.get("type") if isinstance(chunk, dict) else type(chunk).__name__
            raise WireError(f"a {kind} chunk: rlvr's models read token ids only")
        tokens += [int(t) for t in chunk.get("tokens", [])]
    return tokens
