"""Tinker's numerics check, through `rlvr serve --tinker` (in process): the log-probs a sampling client draws with,
against what compute_logprobs and the training client's forward give for the same tokens (Tinker's own recipe
calls ~2e-4 nats a token healthy for a dense model); and the seconds of each SDK call.

    .venv/bin/python bench/tinker_numerics.py [--model smollm2] [--samples 8] [--tokens 64]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from machine import machine_line

from rlvr.tinker.server import started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    os.environ["TINKER_TELEMETRY"] = "0"
    import tinker
    from tinker import types

    client = tinker.ServiceClient(base_url=started(tempfile.mkdtemp(prefix="rlvr-tinker-bench-")).url,
                                  api_key="tml-local")
    seconds = {}
    start = time.perf_counter()
    training = client.create_lora_training_client(base_model=args.model, rank=8).result()
    seconds["create_lora_training_client"] = time.perf_counter() - start
    tokenizer = training.get_tokenizer()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 12 times 7? Explain."}],
                                           add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    start = time.perf_counter()
    sampler = training.save_weights_and_get_sampling_client()
    drawn = sampler.sample(prompt=types.ModelInput.from_ints(prompt), num_samples=args.samples,
                           sampling_params=types.SamplingParams(max_tokens=args.tokens, seed=0)).result()
    seconds[f"sample ({args.samples} × ≤{args.tokens} tokens)"] = time.perf_counter() - start
    to_compute, to_forward, tokens = [], [], 0
    start = time.perf_counter()
    for s in drawn.sequences:
        whole = [*prompt, *s.tokens]
        computed = sampler.compute_logprobs(types.ModelInput.from_ints(whole)).result()[len(prompt):]
        to_compute += [abs(a - b) for a, b in zip(computed, s.logprobs)]
        datum = types.Datum(model_input=types.ModelInput.from_ints(whole[:-1]), loss_fn_inputs={
            "target_tokens": types.TensorData(data=whole[1:], dtype="int64", shape=[len(whole) - 1]),
            "weights": types.TensorData(data=[0.0] * (len(whole) - 1), dtype="float32", shape=[len(whole) - 1])})
        forward = training.forward([datum], loss_fn="cross_entropy").result().loss_fn_outputs[0]["logprobs"].data
        to_forward += [abs(a - b) for a, b in zip(forward[len(prompt) - 1:], s.logprobs)]
        tokens += len(s.tokens)
    seconds["compute_logprobs + forward, every sample"] = time.perf_counter() - start
    print(machine_line("float32"))
    print(f"model: {args.model}; {len(drawn.sequences)} samples, {tokens} sampled tokens")
    print("| sampler's log-probs against | mean |Δ| (nats/token) | max |Δ| |")
    print("|---|---|---|")
    for name, deltas in (("compute_logprobs", to_compute), ("the training client's forward", to_forward)):
        print(f"| {name} | {sum(deltas) / len(deltas):.2e} | {max(deltas):.2e} |")
    print("\n| SDK call | seconds |\n|---|---|")
    for name, value in seconds.items():
        print(f"| {name} | {value:.1f} |")


if __name__ == "__main__":
    main()
