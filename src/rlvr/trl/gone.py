"""Arguments that TRL scripts still pass but TRL 1.16's GRPOConfig no longer takes: GRPOConfig fields of TRL 0.x
and TrainingArguments fields of transformers 4. Each is taken where rlvr has the setting (said in a note), noted
where it changes nothing, taken silently at its old default, and otherwise refused as gone from TRL.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr.errors import UserError
from rlvr.trl.recorded import TRL_VERSION

# name -> its default in the last version that had it (TRL 0.24, transformers 4.56)
GONE: dict[str, Any] = {
    "max_prompt_length": 512, "warmup_ratio": 0.0, "no_cuda": False, "evaluation_strategy": "no",
    "overwrite_output_dir": False, "logging_dir": None, "wandb_log_unique_prompts": False,
    "include_tokens_per_second": False, "save_safetensors": True, "use_liger_loss": False,
    "vllm_guided_decoding_regex": None, "group_by_length": False, "use_mps_device": False, "use_ipex": False,
    "per_gpu_train_batch_size": None, "per_gpu_eval_batch_size": None, "push_to_hub_model_id": None,
    "push_to_hub_organization": None, "push_to_hub_token": None, "half_precision_backend": "auto",
    "fp16_backend": "auto", "include_inputs_for_metrics": False, "torchdynamo": None, "adafactor": False,
}
RENAMED = {"evaluation_strategy": "eval_strategy", "no_cuda": "use_cpu"}  # (the same setting under TRL 1.16's name)
NOTED = {
    "overwrite_output_dir": "rlvr.trl starts afresh in an output_dir that holds a run, as TRL does",
    "logging_dir": "TensorBoard writes to output_dir/tensorboard",
    "wandb_log_unique_prompts": "rlvr prints sample groups every sample_every steps and keeps them in samples.jsonl",
    "include_tokens_per_second": "rlvr logs tokens_per_second every step",
}


def renamed(given: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`given` with the gone arguments that TRL 1.16 keeps under a new name renamed to it."""
    out = dict(given)
    for old, new in RENAMED.items():
        if old in out:
            if new in out:
                raise UserError(f"GRPOConfig arguments {old} and {new} are one setting ({old} is its name before "
                                f"TRL {TRL_VERSION}): give {new} alone")
            out[new] = out.pop(old)
            notes.append(f"{old}={out[new]!r}: {new} in TRL {TRL_VERSION}, taken as it")
    return out


def gone_settings(gone: dict[str, Any], optimizer_steps: int, notes: list[str]) -> dict[str, Any]:
    """rlvr's settings (dotted keys) for the gone arguments `gone` other than the renamed ones, for a run of
    `optimizer_steps` optimizer steps; notes for the rest; one line refusing what has no place in rlvr."""
    settings: dict[str, Any] = {}
    for name, value in gone.items():
        if name == "max_prompt_length" and value is not None:
            settings["data.max_prompt_tokens"] = int(value)
            notes.append(f"max_prompt_length={value} (TRL before 1.0; {TRL_VERSION} has none): data.max_prompt_tokens="
                         f"{value}: rlvr skips a longer training prompt, with a count, where that TRL cut it from "
                         "the left")
        elif name == "warmup_ratio" and value:
            settings["optim.warmup_steps"] = math.ceil(float(value) * optimizer_steps)
            notes.append(f"warmup_ratio={value} (transformers 4; TRL {TRL_VERSION} reads a warmup_steps below 1 as "
                         f"the ratio): {settings['optim.warmup_steps']} warm-up steps")
        elif name in NOTED and value != GONE[name]:
            notes.append(f"{name}={value!r}: {NOTED[name]}")
        elif value != GONE[name]:
            raise UserError(f"GRPOConfig argument {name}={value!r} is gone from TRL (not in {TRL_VERSION}'s "
                            "GRPOConfig) and rlvr has no such setting: drop it")
    return settings
