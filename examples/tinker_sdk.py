"""A training loop written for Thinking Machines' Tinker SDK, run on this machine against rlvr's server of its API
(docs/tinker.md): a supervised step, a few RL steps with `importance_sampling`, sampling, save and load.

    rlvr serve --tinker --port 8000 &
    TINKER_BASE_URL=http://127.0.0.1:8000 TINKER_API_KEY=tml-local python examples/tinker_sdk.py

Without TINKER_BASE_URL the script starts the server in its own process (rlvr.tinker.service_client). Everything
below the client is the SDK's code as Tinker's docs write it: nothing in it knows rlvr.
"""

import argparse
import os

import tinker
import torch
from tinker import TensorData, types

PROMPT, ANSWER = "Question: what is 2 + 3?\nAnswer:", " 5"


def datum(tokens: list[int], **per_token: list[float]) -> types.Datum:
    """`tokens` predicting each next one; each of `per_token` one value per predicted token."""
    inputs = {"target_tokens": TensorData.from_torch(torch.tensor(tokens[1:]))}
    inputs |= {name: TensorData.from_torch(torch.tensor(values)) for name, values in per_token.items()}
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--output-dir", default="runs/tinker-sdk", help="the in-process server's checkpoints")
    p.add_argument("--max-steps", type=int, default=4, help="RL steps")
    args = p.parse_args()
    if os.environ.get("TINKER_BASE_URL"):
        service = tinker.ServiceClient()
    else:
        from rlvr.tinker import service_client

        service = service_client(args.output_dir)
    training = service.create_lora_training_client(base_model=args.model, rank=8).result()
    tokenizer = training.get_tokenizer()
    prompt = tokenizer.encode(PROMPT)
    adam = types.AdamParams(learning_rate=1e-3)

    # supervised: the answer's tokens weighted 1, the prompt's 0
    answer = tokenizer.encode(PROMPT + ANSWER)[len(prompt):]
    shown = datum(prompt + answer, weights=[0.0] * (len(prompt) - 1) + [1.0] * len(answer))
    out = training.forward_backward([shown], loss_fn="cross_entropy").result()
    training.optim_step(adam).result()
    print(f"supervised step: loss {out.metrics['loss:sum']:.3f}")

    # RL: a group of 4 answers per step, rewarded 1 when they say 5, the group's mean as the baseline
    for step in range(args.max_steps):
        sampler = training.save_weights_and_get_sampling_client()
        drawn = sampler.sample(prompt=types.ModelInput.from_ints(prompt), num_samples=4,
                               sampling_params=types.SamplingParams(max_tokens=8, temperature=1.0)).result()
        rewards = [float("5" in tokenizer.decode(s.tokens)) for s in drawn.sequences]
        mean = sum(rewards) / len(rewards)
        pad = [0.0] * (len(prompt) - 1)
        data = [datum(prompt + s.tokens, logprobs=pad + list(s.logprobs or []),
                      advantages=pad + [r - mean] * len(s.tokens)) for s, r in zip(drawn.sequences, rewards)]
        training.forward_backward(data, loss_fn="importance_sampling").result()
        training.optim_step(adam).result()
        print(f"step {step + 1}: reward {mean:.2f}")

    saved = training.save_state("final").result().path
    resumed = service.create_training_client_from_state_with_optimizer(saved).result()
    print(f"saved {saved}; resumed as {resumed.model_id}")


if __name__ == "__main__":
    main()
