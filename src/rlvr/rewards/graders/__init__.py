"""Graders: rewards described by a spec (YAML, JSON or a dict), after OpenAI's RFT graders.

A spec is loaded into a reward function over the same registry as every other reward::

    reward = load_grader("grader.yaml")        # or "math", or {"type": "string_check", ...}
    reward(prompts=..., completions=..., answer=...) -> Scores (rewards, and a reason for each)

Types (see build.py): string_check, text_similarity, python, score_model, label_model, multi; the
verifiers by OpenAI's names math, code, countdown, format; and any built-in reward by its own name.

- spec.py: read and check specs; template.py: ``{{ sample.output_text }}`` / ``{{ item.x }}``
- rows.py: RowGrader, the base of the rewards that grade row by row
- text.py + similarity.py: string_check, text_similarity (fuzzy_match, bleu, rouge_*)
- judge.py + judge_http.py: score_model, label_model against an OpenAI-compatible endpoint
- multi.py + formula.py: sub-graders combined by a safe arithmetic formula
- python.py: a user's ``grade(sample, item)`` run in the sandbox
- build.py: the table of types
"""

from rlvr.rewards.graders.build import build_grader, grader_types, load_grader
from rlvr.rewards.graders.formula import Formula
from rlvr.rewards.graders.judge import parse_label, parse_score
from rlvr.rewards.graders.judge_http import JudgeEndpoint, JudgeFailed
from rlvr.rewards.graders.python import python_grader
from rlvr.rewards.graders.rows import RowGrader
from rlvr.rewards.graders.similarity import METRICS, bleu, fuzzy_match, rouge_l, rouge_n
from rlvr.rewards.graders.spec import load_grader_spec
from rlvr.rewards.graders.template import MissingField, render, template_fields

__all__ = [
    "METRICS", "Formula", "JudgeEndpoint", "JudgeFailed", "MissingField", "RowGrader", "bleu", "build_grader",
    "fuzzy_match", "grader_types", "load_grader", "load_grader_spec", "parse_label", "parse_score", "python_grader",
    "render", "rouge_l", "rouge_n", "template_fields",
]
