"""LLM-judge rewards: ``score_model`` (a number in ``range``) and ``label_model`` (one of ``labels``).

The judge is any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, Ollama, OpenAI).
Each row's ``input`` messages are rendered with its completion and item, and the requests of a
batch are sent concurrently (``concurrency`` at a time). ``base_url`` comes from the spec, else
from the ``RLVR_JUDGE_BASE_URL`` environment variable; the API key is read from the environment
variable named by ``api_key_env``, so no secret is written in a spec. A reply that cannot be
read as a score or a label scores None, with the reply quoted in the reason.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

from rlvr.errors import UserError
from rlvr.rewards.graders.judge_http import JudgeEndpoint, JudgeFailed
from rlvr.rewards.graders.rows import RowGrader
from rlvr.rewards.graders.spec import get_int, get_mapping, get_number, get_str, get_str_list
from rlvr.rewards.graders.template import MissingField, render, template_fields
from rlvr.rewards.scores import GradeResult, short

BASE_URL_ENV = "RLVR_JUDGE_BASE_URL"
ROLES = ("system", "developer", "user", "assistant")
JUDGE_FIELDS = ("base_url", "api_key_env", "sampling_params", "timeout_s", "max_tries", "backoff_s", "concurrency")

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_SCORE_PHRASE = re.compile(rf"score\W{{0,3}}\s*({_NUMBER})", re.IGNORECASE)


@dataclass(frozen=True)
class Judge:
    """The chat requests one judge grader sends: model, message templates, sampling settings."""

    endpoint: JudgeEndpoint
    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content template)
    sampling_params: dict[str, Any]
    concurrency: int = 4

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], where: str) -> Judge:
        base_url = spec.get("base_url") or os.environ.get(BASE_URL_ENV)
        if not isinstance(base_url, str) or not re.match(r"https?://", base_url):
            raise UserError(
                f"{where}: no http(s) base_url for the LLM judge, got {base_url!r} "
                f"(set base_url in the spec, or the {BASE_URL_ENV} environment variable)"
            )
        endpoint = JudgeEndpoint(
            base_url=base_url,
            api_key=_api_key(spec, where),
            timeout_s=get_number(spec, "timeout_s", where, 30.0, positive=True),
            max_tries=get_int(spec, "max_tries", where, 3),
            backoff_s=get_number(spec, "backoff_s", where, 0.5, minimum=0),
        )
        concurrency = get_int(spec, "concurrency", where, 4)
        messages = _messages(spec.get("input"), where)
        sampling_params = get_mapping(spec, "sampling_params", where)
        return cls(endpoint, get_str(spec, "model", where), messages, sampling_params, concurrency)

    def replies(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[str | GradeResult]:
        """The judge's reply text for each row, or a None-reward result where none could be had."""
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(self._reply, c, item) for c, item in zip(completions, items, strict=True)]
            try:
                return [future.result() for future in futures]
            except BaseException:
                # An unreachable judge fails every row the same way: stop queueing the rest.
                pool.shutdown(wait=False, cancel_futures=True)
                raise

    def _reply(self, completion: str, item: Mapping[str, Any]) -> str | GradeResult:
        try:
            messages = [{"role": role, "content": render(text, completion, item)} for role, text in self.messages]
        except MissingField as e:
            return GradeResult(None, str(e))
        try:
            return self.endpoint.chat({**self.sampling_params, "model": self.model, "messages": messages})
        except JudgeFailed as e:
            return GradeResult(None, str(e))


def _api_key(spec: Mapping[str, Any], where: str) -> str | None:
    if "api_key_env" not in spec:
        return None
    variable = get_str(spec, "api_key_env", where)
    if not os.environ.get(variable):
        raise UserError(
            f"{where}: api_key_env names ${variable}, which is not set (export it, or drop api_key_env)"
        )
    return os.environ[variable]


def _messages(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """The ``input`` messages as (role, template) pairs; a plain string is one user message."""
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    valid = isinstance(value, list) and value and all(isinstance(m, dict) for m in value)
    if not valid:
        raise UserError(f"{where}: field 'input' must be a list of {{role, content}} messages, got {value!r}")
    messages = []
    for i, message in enumerate(value):
        role, content = message.get("role", "user"), message.get("content")
        if role not in ROLES or not isinstance(content, str) or set(message) - {"role", "content", "type"}:
            raise UserError(
                f"{where}: input message {i} must be {{role: one of {', '.join(ROLES)}, content: text}}, "
                f"got {message!r}"
            )
        template_fields(content, f"{where}, input message {i}")
        messages.append((role, content))
    return tuple(messages)


def parse_score(reply: str) -> float | None:
    """The score in a judge's reply: JSON ``{"score": x}``, else "score: x", else the last number.

    >>> parse_score('{"score": 7}'), parse_score("Score: 0.8 because..."), parse_score("I give it 3 of 5... 4")
    (7.0, 0.8, 4.0)
    >>> parse_score("no idea") is None
    True
    """
    try:
        data = json.loads(reply)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("score"), (int, float)) and not isinstance(data["score"], bool):
        return float(data["score"])
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return float(data)
    phrases = _SCORE_PHRASE.findall(reply)
    numbers = phrases or re.findall(rf"(?<![\w.]){_NUMBER}", reply)
    return float(numbers[-1]) if numbers else None


def parse_label(reply: str, labels: list[str]) -> str | None:
    """The label a judge's reply names: JSON ``{"label": x}``, the whole reply, or the one label it mentions.

    Matching ignores case and surrounding punctuation; a reply mentioning several labels is None.

    >>> labels = ["correct", "incorrect"]
    >>> parse_label('{"label": "correct"}', labels), parse_label("Incorrect.", labels)
    ('correct', 'incorrect')
    >>> parse_label("Verdict: correct", labels), parse_label("correct or incorrect?", labels)
    ('correct', None)
    """
    try:
        data = json.loads(reply)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("label"), str):
        reply = data["label"]
    by_key = {label.strip().lower(): label for label in labels}
    whole = reply.strip().strip(".!\"'`*").strip().lower()
    if whole in by_key:
        return by_key[whole]
    # Whole words only, so "correct" is not found inside "incorrect".
    found = {key for key in by_key if re.search(rf"(?<!\w){re.escape(key)}(?!\w)", reply.lower())}
    return by_key[found.pop()] if len(found) == 1 else None


@dataclass(frozen=True)
class ScoreModelGrader(RowGrader):
    """The judge's number, clamped to `range`; with `pass_threshold`, 1.0 at or above it and 0.0 below."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("model", "input")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("range", "pass_threshold", *JUDGE_FIELDS)

    name: str
    judge: Judge
    low: float = 0.0
    high: float = 1.0
    pass_threshold: float | None = None

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> ScoreModelGrader:
        where = f"grader '{name}'"
        bounds = spec.get("range", [0, 1])
        numeric = isinstance(bounds, list) and all(type(b) in (int, float) for b in bounds)  # no bools
        if not numeric or len(bounds) != 2 or not bounds[0] < bounds[1]:
            raise UserError(f"{where}: field 'range' must be [low, high] with low < high, got {bounds!r}")
        threshold = get_number(spec, "pass_threshold", where) if "pass_threshold" in spec else None
        return cls(name, Judge.from_spec(spec, where), float(bounds[0]), float(bounds[1]), threshold)

    def grade(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        return [self._score(reply) for reply in self.judge.replies(completions, items)]

    def _score(self, reply: str | GradeResult) -> GradeResult:
        if isinstance(reply, GradeResult):
            return reply
        raw = parse_score(reply)
        if raw is None:
            return GradeResult(None, f"judge reply has no score: {short(reply)}")
        score = min(max(raw, self.low), self.high)
        reason = f"judge score {score:g}" + ("" if score == raw else f" (clamped from {raw:g})")
        if self.pass_threshold is None:
            return GradeResult(score, reason)
        passed = score >= self.pass_threshold
        return GradeResult(float(passed), f"{reason} {'>=' if passed else '<'} pass_threshold {self.pass_threshold:g}")


@dataclass(frozen=True)
class LabelModelGrader(RowGrader):
    """1.0 when the judge's label is one of `passing_labels`, 0.0 for another label, None for no label."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("model", "input", "labels", "passing_labels")
    OPTIONAL: ClassVar[tuple[str, ...]] = JUDGE_FIELDS

    name: str
    judge: Judge
    labels: tuple[str, ...]
    passing_labels: frozenset[str]

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> LabelModelGrader:
        where = f"grader '{name}'"
        labels, passing = get_str_list(spec, "labels", where), get_str_list(spec, "passing_labels", where)
        stray = [label for label in passing if label not in labels]
        if stray:
            raise UserError(f"{where}: passing label '{stray[0]}' is not in labels {labels} (add it to labels)")
        return cls(name, Judge.from_spec(spec, where), tuple(labels), frozenset(passing))

    def grade(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        results = []
        for reply in self.judge.replies(completions, items):
            if isinstance(reply, GradeResult):
                results.append(reply)
                continue
            label = parse_label(reply, list(self.labels))
            if label is None:
                reason = f"judge reply names no single label of {list(self.labels)}: {short(reply)}"
                results.append(GradeResult(None, reason))
            else:
                results.append(GradeResult(float(label in self.passing_labels), f"judge label {label!r}"))
        return results
