"""Graders: reward functions described by a spec (YAML, JSON or a dict), after OpenAI's RFT graders.

A grader scores N completions against N dataset rows and says why::

    grader = load_grader("grader.yaml")            # or "math", or {"type": "string_check", ...}
    grader.grade(completions, items) -> [GradeResult(reward, reason), ...]
    as_reward_function(grader)                     # TRL-style, for a training config

Types (see build.GRADER_TYPES): string_check, text_similarity, python, score_model,
label_model, multi, and rlvr's verifiers math, code, countdown, format.

- spec.py: read and check specs; template.py: ``{{ sample.output_text }}`` / ``{{ item.x }}``
- text_graders.py + similarity.py: string_check, text_similarity (fuzzy_match, bleu, rouge_*)
- judge.py + judge_http.py: score_model, label_model against an OpenAI-compatible endpoint
- multi.py + formula.py: sub-graders combined by a safe arithmetic formula
- verifiers.py: math, countdown, format, code, python
- cli.py: ``rlvr grade --grader SPEC --input rows.jsonl --output scored.jsonl``
"""

from rlvr.graders.build import GRADER_TYPES, build_grader, load_grader, load_grader_reward
from rlvr.graders.formula import Formula
from rlvr.graders.judge import LabelModelGrader, ScoreModelGrader, parse_label, parse_score
from rlvr.graders.judge_http import JudgeEndpoint, JudgeFailed
from rlvr.graders.multi import MultiGrader
from rlvr.graders.result import GradeResult, Grader, as_reward_function
from rlvr.graders.similarity import METRICS, bleu, fuzzy_match, rouge_l, rouge_n
from rlvr.graders.spec import BUILTIN_GRADERS, load_grader_spec
from rlvr.graders.template import MissingField, render, template_fields
from rlvr.graders.text_graders import StringCheckGrader, TextSimilarityGrader
from rlvr.graders.verifiers import CodeGrader, CountdownGrader, FormatGrader, MathGrader, PythonGrader

__all__ = [
    "BUILTIN_GRADERS",
    "GRADER_TYPES",
    "METRICS",
    "CodeGrader",
    "CountdownGrader",
    "FormatGrader",
    "Formula",
    "GradeResult",
    "Grader",
    "JudgeEndpoint",
    "JudgeFailed",
    "LabelModelGrader",
    "MathGrader",
    "MissingField",
    "MultiGrader",
    "PythonGrader",
    "ScoreModelGrader",
    "StringCheckGrader",
    "TextSimilarityGrader",
    "as_reward_function",
    "bleu",
    "build_grader",
    "fuzzy_match",
    "load_grader",
    "load_grader_reward",
    "load_grader_spec",
    "parse_label",
    "parse_score",
    "render",
    "rouge_l",
    "rouge_n",
    "template_fields",
]
