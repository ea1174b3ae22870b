"""`rlvr pipeline`: the DeepSeek-R1 recipe (sft → grpo → sample → sft → grpo, or any subset) from one file."""
