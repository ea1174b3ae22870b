"""Evaluation: held-out accuracy with intervals, pass@k and majority vote.

Public API: `pass_at_k(n, c, k)`, `maj_at_k(answers, correct, k)`, `best_of_n(scores, correct, n)`, `wilson_interval`,
`paired_gain_interval`, `evaluate_accuracy`.
"""

from rlvr.evaluate.accuracy import EvalResult, Interval, evaluate_accuracy, paired_gain_interval, wilson_interval
from rlvr.evaluate.metrics import best_of_n, maj_at_k, pass_at_k

__all__ = ["EvalResult", "Interval", "best_of_n", "evaluate_accuracy", "maj_at_k", "paired_gain_interval", "pass_at_k",
           "wilson_interval"]
