"""Evaluation: held-out accuracy with intervals (more in later issues: pass@k, maj@k)."""

from rlvr.evaluate.accuracy import EvalResult, Interval, evaluate_accuracy, paired_gain_interval, wilson_interval

__all__ = ["EvalResult", "Interval", "evaluate_accuracy", "paired_gain_interval", "wilson_interval"]
