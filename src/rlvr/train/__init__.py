"""Training: the GRPO step (step.py), its loop (loop.py), checkpoints and metrics."""
