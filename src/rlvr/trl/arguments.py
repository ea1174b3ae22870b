"""TRL's GRPOConfig arguments as rlvr settings: each one mapped, noted (no effect on what is learned), or
refused in one line naming it. A refused argument is taken as long as it keeps TRL's default (recorded.py).

TRL's defaults apply to every setting that changes what is learned (learning rate 1e-6, β 0, `loss_type`
dapo, temperature 1, Bessel-corrected group std, 512 completion tokens, linear decay, seed 42, 3 epochs);
rlvr's to the ones that only trade speed for memory (gradient checkpointing stays off unless asked for).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlvr.errors import UserError, a_kind
from rlvr.trl.gone import GONE, gone_settings, renamed
from rlvr.trl.recorded import DEFAULTS, TRL_VERSION

Settings = dict[str, Any]  # rlvr config keys, dotted ("optim.lr") -> value


@dataclass
class Translation:
    settings: Settings = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # "logging_steps=5: rlvr logs every step"


# Arguments that change nothing rlvr learns: how TRL logs, prints, loads batches or spreads work over devices.
NOTED: dict[str, str] = {
    **dict.fromkeys(("logging_steps", "logging_strategy", "logging_first_step", "log_level", "log_level_replica",
                     "log_on_each_node", "logging_nan_inf_filter", "include_num_input_tokens_seen",
                     "skip_memory_metrics"), "rlvr logs every step's metrics (metrics.jsonl, logging.report_to)"),
    **dict.fromkeys(("log_completions", "num_completions_to_print", "log_unique_prompts"),
                    "rlvr prints sample groups every sample_every steps and keeps them in samples.jsonl"),
    **dict.fromkeys(("dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
                     "dataloader_prefetch_factor", "dataloader_drop_last", "remove_unused_columns",
                     "average_tokens_across_devices", "ds3_gather_for_generation", "per_device_eval_batch_size",
                     "eval_accumulation_steps", "gradient_checkpointing_kwargs", "cast_lm_head_to_fp32",
                     "disable_tqdm", "do_train", "do_eval", "do_predict", "pad_to_multiple_of"),
                    "rlvr batches, pads and computes in its own way (the log-probs in fp32)"),
}
SCHEDULES = {"linear": "linear", "constant": "constant", "constant_with_warmup": "constant", "cosine": "cosine"}
LOSS_TYPES = {"grpo": "sequence_mean", "dapo": "token_mean", "bnpo": "token_mean", "dr_grpo": "constant",
              "cispo": "token_mean", "sapo": "token_mean"}
SCALES = {"group": "group_std", True: "group_std", "batch": "batch_std", "none": "none", False: "none"}
TRACKERS = ("tensorboard", "wandb", "trackio", "mlflow")


def translate(given: dict[str, Any], train_rows: int | None) -> Translation:
    """The rlvr settings of the TRL arguments `given` (the rest at TRL's defaults), for `train_rows` prompts
    (to count TRL's epochs in steps; None: a stream, whose max_steps must be given). Arguments of older TRL and
    transformers that scripts still pass are taken where they have a place (rlvr.trl.gone)."""
    out = Translation()
    given = renamed(given, out.notes)
    gone = {name: given.pop(name) for name in list(given) if name in GONE}
    unknown = [name for name in given if name not in DEFAULTS]
    if unknown:
        from difflib import get_close_matches

        close = get_close_matches(unknown[0], list(DEFAULTS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserError(f"GRPOConfig has no argument {unknown[0]!r} (TRL {TRL_VERSION}){hint}")
    _check_types(given)
    args = {**DEFAULTS, **given}
    handled: set[str] = set()
    for names, handler in HANDLERS:
        out.settings.update(handler(args, given, out.notes))
        handled.update(names)
    _train_length(args, out, train_rows)
    handled.update(("max_steps", "num_train_epochs"))
    for every in ("save_every", "eval_every"):  # save_steps, eval_steps below 1: a share of the run's steps, as in TRL
        if 0 < out.settings.get(every, 0) < 1:
            out.settings[every] = math.ceil(out.settings[every] * out.settings["max_steps"])
    if gone.get("warmup_ratio") and args["warmup_steps"]:  # (transformers 4 took warmup_steps over the ratio)
        out.notes.append(f"warmup_ratio={gone.pop('warmup_ratio')!r}: warmup_steps={args['warmup_steps']} is given, "
                         "which takes precedence (as in transformers 4)")
    out.settings.update(gone_settings(gone, out.settings["max_steps"] * args["num_iterations"], out.notes))
    for name, value in given.items():
        if name in handled or value == DEFAULTS[name]:
            continue
        if name in NOTED:
            out.notes.append(f"{name}={value!r}: {NOTED[name]}")
            continue
        raise UserError(f"GRPOConfig argument {name}={value!r} is not supported by rlvr.trl: drop it (or keep TRL's "
                        f"default, {DEFAULTS[name]!r}); docs/from_trl.md lists what rlvr has instead")
    return out


def _check_types(given: dict[str, Any]) -> None:
    """One line for an argument of a type TRL's field does not take: a number or a flag given as a string (what
    a dataclass takes silently and fails on later)."""
    for name, value in given.items():
        default = DEFAULTS.get(name)
        if isinstance(default, bool) and not isinstance(value, bool):
            raise UserError(f"GRPOConfig argument {name}={value!r} is {a_kind(value)}: give True or False")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, (int, float)) and not isinstance(default, bool) and not number:
            raise UserError(f"GRPOConfig argument {name}={value!r} is {a_kind(value)}: give a number "
                            f"(TRL's default is {default!r})")


TRAINER_ARGUMENTS = ("reward_weights",)  # read by rlvr.trl.trainer with the reward functions they weight


def _unused(given: dict[str, Any], names: tuple[str, ...], switch: str, notes: list[str]) -> None:
    """A note for each of `names` set while the switch that gives it effect is off (TRL ignores them too)."""
    notes.extend(f"{name}={given[name]!r}: no effect without {switch} (nor in TRL)" for name in names
                  if name in given and given[name] != DEFAULTS[name])


def _refuse(name: str, value: Any, why: str) -> UserError:
    return UserError(f"GRPOConfig argument {name}={value!r} is not supported by rlvr.trl: {why}")


def _direct(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    """The arguments that are one rlvr setting each, with the same meaning."""
    clip_high = args["epsilon_high"] if args["epsilon_high"] is not None else args["epsilon"]
    return {"optim.lr": args["learning_rate"], "sampling.group_size": args["num_generations"],
            "generation.max_new_tokens": args["max_completion_length"], "generation.temperature": args["temperature"],
            "generation.top_p": args["top_p"], "generation.top_k": args["top_k"], "algorithm.beta": args["beta"],
            "algorithm.clip_low": args["epsilon"], "algorithm.clip_high": clip_high,
            "algorithm.updates_per_batch": args["num_iterations"],
            "algorithm.mask_truncated": args["mask_truncated_completions"],
            "algorithm.top_entropy_quantile": args["top_entropy_quantile"],
            "algorithm.sapo_tau_pos": args["sapo_temperature_pos"],
            "algorithm.sapo_tau_neg": args["sapo_temperature_neg"], "seed": args["seed"],
            "optim.weight_decay": args["weight_decay"], "optim.max_grad_norm": args["max_grad_norm"],
            "output_dir": args["output_dir"] or "trainer_output",  # (TRL's own default folder)
            "keep_checkpoints": args["save_total_limit"] or 0,
            **({"logging.run_name": args["run_name"]} if args["run_name"] else {}),
            **({"logging.project": args["project"]} if "project" in given else {}),
            **({"model.gradient_checkpointing": args["gradient_checkpointing"]}
               if "gradient_checkpointing" in given else {})}


def _batch(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    """Completions a step: TRL samples per_device_train_batch_size × gradient_accumulation_steps of them for one
    optimizer step (one process); rlvr's batch is that, its own micro-batches set by tokens (optim)."""
    per_step = args["per_device_train_batch_size"] * args["gradient_accumulation_steps"]
    generation = args["generation_batch_size"]
    if generation is not None and generation != per_step:
        raise _refuse("generation_batch_size", generation, "rlvr samples one batch per optimizer step: give "
                      f"per_device_train_batch_size × gradient_accumulation_steps = {per_step}, or leave it out")
    steps = args["steps_per_generation"]
    if steps is not None and steps != args["gradient_accumulation_steps"]:
        raise _refuse("steps_per_generation", steps, "rlvr takes one optimizer step per sampled batch "
                      "(num_iterations reuses it)")
    g = args["num_generations"]
    if isinstance(g, int) and g > 0 and per_step % g:
        raise UserError(f"per_device_train_batch_size × gradient_accumulation_steps = {per_step} completions a step "
                        f"is not divisible by num_generations={g}: give a multiple of {g}, such as "
                        f"{g * max(1, per_step // g)}")
    return {"sampling.batch_size": per_step}


def _objective(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    """loss_type, importance_sampling_level, scale_rewards, multi_objective_aggregation, use_bias_correction_kl."""
    loss, level = args["loss_type"], args["importance_sampling_level"]
    if loss not in LOSS_TYPES:
        raise _refuse("loss_type", loss, f"choose one of {sorted(LOSS_TYPES)} (rlvr's policy losses: clip, gspo, "
                      "cispo, sapo or your own: docs/objectives.md)")
    if args["scale_rewards"] not in SCALES:
        raise _refuse("scale_rewards", args["scale_rewards"], "give group, batch or none")
    if level not in ("token", "sequence"):
        raise _refuse("importance_sampling_level", level, "give token or sequence")
    policy = {"cispo": "cispo", "sapo": "sapo"}.get(loss, "gspo" if level == "sequence" else "clip")
    if level == "sequence" and loss in ("cispo", "sapo"):
        raise _refuse("importance_sampling_level", level, f"loss_type {loss} has a token-level ratio in rlvr")
    aggregation = {"sum_then_normalize": "sum", "normalize_then_sum": "normalize_then_sum"}
    if args["multi_objective_aggregation"] not in aggregation:
        raise _refuse("multi_objective_aggregation", args["multi_objective_aggregation"],
                      "give sum_then_normalize or normalize_then_sum")
    return {"algorithm.loss_aggregation": LOSS_TYPES[loss], "algorithm.policy_loss": policy,
            "algorithm.advantage_scale": SCALES[args["scale_rewards"]], "algorithm.std_estimator": "unbiased",
            "algorithm.reward_aggregation": aggregation[args["multi_objective_aggregation"]],
            "algorithm.kl_estimator": "k3+" if args["use_bias_correction_kl"] else "k3"}


def _reference(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    if not args["sync_ref_model"]:
        _unused(given, ("ref_model_mixup_alpha", "ref_model_sync_steps"), "sync_ref_model=True", notes)
        return {}
    if args["ref_model_mixup_alpha"] != 1.0:
        raise _refuse("sync_ref_model", True, f"with ref_model_mixup_alpha={args['ref_model_mixup_alpha']}: rlvr "
                      "copies the policy into the reference every ref_model_sync_steps (α = 1): set "
                      "ref_model_mixup_alpha=1.0")
    return {"algorithm.ref_refresh_steps": args["ref_model_sync_steps"]}


def _optimizer(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    if not str(args["optim"]).startswith("adamw_torch"):
        raise _refuse("optim", args["optim"], "rlvr trains with torch's AdamW (adamw_torch, adamw_torch_fused)")
    schedule = args["lr_scheduler_type"]
    if schedule not in SCHEDULES:
        raise _refuse("lr_scheduler_type", schedule, f"rlvr's schedules are {sorted(SCHEDULES)}")
    if args["lr_scheduler_kwargs"]:
        raise _refuse("lr_scheduler_kwargs", args["lr_scheduler_kwargs"], "rlvr's schedules take no kwargs "
                      "(optim.min_lr_ratio sets cosine's floor: a config key)")
    return {"optim.schedule": SCHEDULES[schedule], "optim.betas": [args["adam_beta1"], args["adam_beta2"]],
            "optim.warmup_steps": args["warmup_steps"]}  # (a fraction below 1 is made steps with max_steps)


def _device(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    if args["fp16"]:
        raise _refuse("fp16", args["fp16"], "rlvr runs fp32, or bf16 autocast on a GPU (bf16=True)")
    if args["bf16"] not in (True, False, None):
        raise _refuse("bf16", args["bf16"], "give True, False or None")
    dtype = {True: "bfloat16", False: "float32", None: "auto"}[args["bf16"]]
    return {"model.dtype": dtype, **({"model.device": "cpu"} if args["use_cpu"] else {})}


def _logging(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    report = args["report_to"]
    names = [] if report in ("none", None) else [report] if isinstance(report, str) else list(report)
    wrong = [n for n in names if n not in TRACKERS]
    if wrong:
        raise _refuse("report_to", report, f"rlvr reports to {', '.join(TRACKERS)} (or none)")
    return {"logging.report_to": names}


def _saving(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    strategy = args["save_strategy"]
    if strategy not in ("steps", "no"):
        raise _refuse("save_strategy", strategy, "rlvr saves every save_steps (steps), or only at the end (no)")
    return {"save_every": args["save_steps"] if strategy == "steps" else 0}


def _evaluating(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    """TRL evaluates the eval_dataset only under an eval_strategy; rlvr's evaluation is greedy held-out accuracy."""
    strategy = args["eval_strategy"]
    if strategy == "no":
        _unused(given, ("eval_steps", "eval_on_start"), "eval_strategy='steps'", notes)
        return {"eval_before": False, "eval_after": False}
    if strategy != "steps":
        raise _refuse("eval_strategy", strategy, "rlvr evaluates every eval_steps (steps), or not at all (no)")
    every = args["eval_steps"] or args["logging_steps"]  # (below 1: a share of the steps, made steps with max_steps)
    return {"eval_every": every if every < 1 else int(every), "eval_before": args["eval_on_start"], "eval_after": True}


def _vllm(args: dict[str, Any], given: dict[str, Any], notes: list[str]) -> Settings:
    if not args["use_vllm"]:
        _unused(given, VLLM_ONLY, "use_vllm=True", notes)
        return {}
    mode = {"colocate": "colocated", "server": "server"}.get(args["vllm_mode"])
    if mode is None:
        raise _refuse("vllm_mode", args["vllm_mode"], "give colocate or server")
    url = args["vllm_server_base_url"] or (f"http://{args['vllm_server_host']}:{args['vllm_server_port']}"
                                           if "vllm_server_host" in given or "vllm_server_port" in given else None)
    settings: Settings = {"generation.backend": "vllm", "generation.vllm.mode": mode,
                          "generation.vllm.memory_share": args["vllm_gpu_memory_utilization"],
                          "generation.vllm.timeout_s": args["vllm_server_timeout"],
                          **({"generation.vllm.url": url} if mode == "server" and url else {})}
    if not args["vllm_importance_sampling_correction"]:
        _unused(given, ("vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max"),
                "vllm_importance_sampling_correction=True", notes)
    else:
        level, _, kind = str(args["vllm_importance_sampling_mode"]).partition("_")
        if level not in ("token", "sequence") or kind not in ("truncate", "mask"):
            raise _refuse("vllm_importance_sampling_mode", args["vllm_importance_sampling_mode"],
                          "give token_truncate, token_mask, sequence_truncate or sequence_mask")
        settings |= {"algorithm.rollout_correction.level": level, "algorithm.rollout_correction.mode": kind,
                     "algorithm.rollout_correction.threshold": args["vllm_importance_sampling_clip_max"]}
    return settings


VLLM_ONLY = ("vllm_mode", "vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_gpu_memory_utilization",
             "vllm_server_timeout", "vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
             "vllm_importance_sampling_clip_max")

HANDLERS: list[tuple[tuple[str, ...], Callable[[dict[str, Any], dict[str, Any], list[str]], Settings]]] = [
    (("learning_rate", "num_generations", "max_completion_length", "temperature", "top_p", "top_k", "beta",
      "epsilon", "epsilon_high", "num_iterations", "mask_truncated_completions", "top_entropy_quantile",
      "sapo_temperature_pos", "sapo_temperature_neg", "seed", "weight_decay", "max_grad_norm", "output_dir",
      "save_total_limit", "run_name", "project", "gradient_checkpointing"), _direct),
    (("per_device_train_batch_size", "gradient_accumulation_steps", "generation_batch_size",
      "steps_per_generation"), _batch),
    (("loss_type", "importance_sampling_level", "scale_rewards", "multi_objective_aggregation",
      "use_bias_correction_kl"), _objective),
    (("sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps"), _reference),
    (("optim", "lr_scheduler_type", "lr_scheduler_kwargs", "adam_beta1", "adam_beta2", "warmup_steps"), _optimizer),
    (("bf16", "fp16", "use_cpu"), _device),
    (("report_to",), _logging),
    (("reward_weights",), lambda args, given, notes: {}),  # (checked and paired with reward_funcs: TRAINER_ARGUMENTS)
    (("save_strategy", "save_steps"), _saving),
    (("eval_strategy", "eval_steps", "eval_on_start"), _evaluating),
    (("use_vllm", *VLLM_ONLY), _vllm),
]


def _train_length(args: dict[str, Any], out: Translation, train_rows: int | None) -> None:
    """max_steps, or TRL's epochs in steps: every prompt sampled num_generations times, per_step completions a step.
    TRL's max_steps counts optimizer steps, rlvr's sampled batches, each taking num_iterations of them."""
    steps, updates = args["max_steps"], args["num_iterations"]
    if steps is not None and steps > 0 and updates > 1:
        batches = math.ceil(steps / updates)
        out.notes.append(f"max_steps={steps} counts optimizer steps, as in TRL: with num_iterations={updates}, rlvr "
                         f"samples {batches} batches of {updates} updates each (its max_steps={batches})")
        steps = batches
    if steps is None or steps <= 0:
        if train_rows is None:
            raise UserError("the train_dataset is a stream (IterableDataset): give GRPOConfig(max_steps=...)")
        per_step = out.settings["sampling.batch_size"]
        steps = math.ceil(args["num_train_epochs"] * train_rows * args["num_generations"] / per_step)
    out.settings["max_steps"] = int(steps)
    warmup = out.settings["optim.warmup_steps"]
    if 0 < warmup < 1:  # (transformers reads a warmup below 1 as a share of the optimizer steps)
        out.settings["optim.warmup_steps"] = math.ceil(warmup * steps * updates)
    out.settings["optim.warmup_steps"] = int(out.settings["optim.warmup_steps"])
