"""One user function of each kind (reward, environment, policy loss, advantage function) for each misbehaviour
of the shared contract's table (docs/python.md), loaded by file path as a user's would be."""

import time

import torch


def _raises(*args, **kwargs):
    raise ValueError("boom")


def _exits(*args, **kwargs):
    raise SystemExit(3)


def _interrupts(*args, **kwargs):
    raise KeyboardInterrupt


def _hangs(*args, **kwargs):
    time.sleep(3600)


MISBEHAVIOURS = {"raises": _raises, "exits": _exits, "interrupts": _interrupts, "hangs": _hangs}
for _name, _fn in MISBEHAVIOURS.items():
    globals()[f"reward_{_name}"] = _fn
    globals()[f"loss_{_name}"] = _fn
    globals()[f"advantages_{_name}"] = _fn


def reward_wrong_type(completions, **kwargs):
    return "not a list of numbers"


def loss_wrong_type(logprobs, old_logprobs, advantages, mask):
    return [0.0]


def advantages_wrong_type(rewards, components):
    return "not a tensor"


def loss_nan(logprobs, old_logprobs, advantages, mask):
    return logprobs * float("nan")


def advantages_nan(rewards, components):
    return torch.full_like(rewards, float("nan"))


class _Env:
    def reset(self, row, messages, seed):
        return messages


def _env(misbehaviour):
    step = MISBEHAVIOURS.get(misbehaviour) or (lambda self, text: "a reply, not a Reply")
    return type(f"Env_{misbehaviour}", (_Env,), {"step": lambda self, text: step(self, text)})


for _name in [*MISBEHAVIOURS, "wrong_type"]:
    globals()[f"env_{_name}"] = _env(_name)
