"""Evaluation: held-out accuracy with intervals, pass@k and majority vote.

Public API: `pass_at_k(n, c, k)`, `maj_at_k(answers, correct, k)`, `best_of_n(scores, correct, n)` (pure, here);
`evaluate_accuracy`, `wilson_interval` and `paired_gain_interval` in rlvr.evaluate.accuracy, which imports torch:
this package imports nothing heavy, so `rlvr` parses its arguments before loading the machinery.
"""

from rlvr.evaluate.metrics import best_of_n, maj_at_k, pass_at_k

__all__ = ["best_of_n", "maj_at_k", "pass_at_k"]
