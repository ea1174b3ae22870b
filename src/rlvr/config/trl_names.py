"""Names users bring from TRL (GRPOConfig, peft's LoraConfig, open-r1's scripts) and where rlvr keeps the
same setting, for the unknown-key error ("`learning_rate` is `optim.lr` here") and docs/from_trl.md. The
full translation, defaults and all, is rlvr.trl.arguments.
"""

from __future__ import annotations

TRL_NAMES: dict[str, str] = {
    "learning_rate": "optim.lr",
    "num_generations": "sampling.group_size",
    "per_device_train_batch_size": "sampling.batch_size (the completions of a step)",
    "gradient_accumulation_steps": "sampling.batch_size (the completions of a step; optim.micro_batch_tokens "
                                   "splits it)",
    "generation_batch_size": "sampling.batch_size",
    "max_completion_length": "generation.max_new_tokens",
    "max_prompt_length": "data.max_prompt_tokens",
    "temperature": "generation.temperature",
    "top_p": "generation.top_p",
    "top_k": "generation.top_k",
    "beta": "algorithm.beta",
    "epsilon": "algorithm.clip_low",
    "epsilon_high": "algorithm.clip_high",
    "num_iterations": "algorithm.updates_per_batch",
    "loss_type": "algorithm.loss_aggregation (grpo: sequence_mean, dapo and bnpo: token_mean, dr_grpo: constant; "
                 "or a preset)",
    "scale_rewards": "algorithm.advantage_scale (group: group_std, batch: batch_std, none)",
    "importance_sampling_level": "algorithm.policy_loss (sequence: gspo)",
    "multi_objective_aggregation": "algorithm.reward_aggregation",
    "use_bias_correction_kl": "algorithm.kl_estimator (true: k3+)",
    "mask_truncated_completions": "algorithm.mask_truncated",
    "top_entropy_quantile": "algorithm.top_entropy_quantile",
    "sync_ref_model": "algorithm.ref_refresh_steps",
    "ref_model_sync_steps": "algorithm.ref_refresh_steps",
    "reward_weights": "rewards[].weight",
    "reward_funcs": "rewards",
    "use_vllm": "generation.backend (vllm)",
    "vllm_mode": "generation.vllm.mode (colocate: colocated, server)",
    "vllm_server_base_url": "generation.vllm.url",
    "vllm_gpu_memory_utilization": "generation.vllm.memory_share",
    "vllm_importance_sampling_correction": "algorithm.rollout_correction",
    "num_train_epochs": "max_steps (rlvr counts steps)",
    "lr_scheduler_type": "optim.schedule",
    "warmup_steps": "optim.warmup_steps",
    "warmup_ratio": "optim.warmup_steps",
    "weight_decay": "optim.weight_decay",
    "max_grad_norm": "optim.max_grad_norm",
    "adam_beta1": "optim.betas",
    "adam_beta2": "optim.betas",
    "bf16": "model.dtype (bfloat16)",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "model_name_or_path": "model.name",
    "use_peft": "model.lora",
    "peft_config": "model.lora",
    "lora_r": "model.lora.rank",
    "r": "model.lora.rank",
    "lora_alpha": "model.lora.alpha",
    "lora_dropout": "model.lora.dropout",
    "lora_target_modules": "model.lora.target_modules",
    "dataset_name": "data.train (hf:owner/name)",
    "dataset_train_split": "data.train",
    "dataset_test_split": "data.eval",
    "system_prompt": "data.system_prompt",
    "save_steps": "save_every",
    "save_total_limit": "keep_checkpoints",
    "eval_steps": "eval_every",
    "eval_on_start": "eval_before",
    "report_to": "logging.report_to",
    "run_name": "logging.run_name",
    "logging_steps": "nothing: rlvr logs every step (sample_every prints sample groups)",
    "log_every": "nothing: rlvr logs every step (sample_every prints sample groups)",
    "log_completions": "sample_every",
    "resume_from_checkpoint": "--resume RUN_DIR (from Python: .train(resume=True))",
    # TRL's trainer arguments, given to rlvr's classes (rlvr.GRPO, SFT, RewardModel: rlvr.trl takes TRL's own)
    "train_dataset": "train_data= (from Python; rlvr.trl.GRPOTrainer takes train_dataset)",
    "eval_dataset": "eval_data= (from Python; rlvr.trl.GRPOTrainer takes eval_dataset)",
    "processing_class": "tokenizer= (from Python)",
    "args": "config= (a config or a dict of its keys) or settings as keywords (from Python)",
}


def trl_hint(key: str) -> str | None:
    """Where the setting a TRL name (the last part of `key`) means lives in rlvr, in words; None when `key` is
    no such name.

    >>> trl_hint("learning_rate"), trl_hint("optim.learning_rate"), trl_hint("lr")
    ('`learning_rate` is `optim.lr` here', '`learning_rate` is `optim.lr` here', None)
    """
    name = key.rpartition(".")[2]
    if name not in TRL_NAMES:
        return None
    where = TRL_NAMES[name]
    if where.startswith("nothing"):
        return f"`{name}` has no setting here: {where.removeprefix('nothing: ')}"
    setting, _, why = where.partition(" (")
    return f"`{name}` is `{setting}` here" + (f" ({why}" if why else "")
