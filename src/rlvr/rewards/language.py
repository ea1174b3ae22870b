r"""Language consistency: the share of a completion's letters written in the target script.

DeepSeek-R1 (DeepSeek-AI 2025, §2.3.2) found that RL on reasoning mixes languages inside the
chain of thought and added a reward for "the proportion of target language words in the CoT".
Here the proxy is the writing system: the share of letters that belong to the target script
(Latin, Han, Cyrillic, Arabic, ...), found from each character's Unicode name. That catches the
failure seen in practice (Chinese drifting into an English CoT, or back) and needs no word lists;
it cannot tell English from French, which share a script.

Only letters count: digits, punctuation and spaces are ignored, and so are maths (``$...$``,
``$$...$$``, ``\(...\)``, ``\[...\]``, LaTeX commands such as ``\frac``), code (fenced blocks and
inline backticks) and tags such as ``<think>``, since ``x``, ``\sin`` or ``print`` are Latin in
every language. By default only the ``<think>...</think>`` part is read, as in R1, or the whole
completion when it has none (``scope="all"`` reads everything).
"""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.text import completion_text

# The scripts a language is written in (ISO 639-1 codes); a script name is the first word of its
# letters' Unicode names, lower-cased ("CJK UNIFIED IDEOGRAPH-4E2D" is Han).
LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    **{code: frozenset({"latin"}) for code in "en fr de es it pt nl sv da no fi pl cs tr vi id ms ro hu".split()},
    **{code: frozenset({"cyrillic"}) for code in "ru uk bg sr be kk".split()},
    **{code: frozenset({"arabic"}) for code in "ar fa ur".split()},
    **{code: frozenset({"devanagari"}) for code in "hi mr ne".split()},
    "zh": frozenset({"han"}),
    "ja": frozenset({"han", "hiragana", "katakana"}),
    "ko": frozenset({"hangul"}),
    "el": frozenset({"greek"}),
    "he": frozenset({"hebrew"}),
    "th": frozenset({"thai"}),
    "bn": frozenset({"bengali"}),
    "ta": frozenset({"tamil"}),
}
SCRIPTS = frozenset().union(*LANGUAGE_SCRIPTS.values())
SCOPES = ("think", "all")

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
_IGNORED = re.compile(
    r"```.*?(?:```|$)|`[^`\n]*`"  # code: fenced blocks (maybe unclosed at truncation), inline
    r"|\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]"  # maths
    r"|\\[A-Za-z]+|</?[A-Za-z_][\w-]*>",  # LaTeX commands, tags
    re.DOTALL,
)


@functools.lru_cache(maxsize=65536)
def script_of(char: str) -> str | None:
    """The script of a letter, lower-case (``"latin"``, ``"han"``, ...); None for a non-letter.

    >>> [script_of(c) for c in "aé中の한я7"]
    ['latin', 'latin', 'han', 'hiragana', 'hangul', 'cyrillic', None]
    """
    if not char.isalpha():
        return None
    words = unicodedata.name(char, "").split()
    if words[:1] in (["HALFWIDTH"], ["FULLWIDTH"]):  # FULLWIDTH LATIN CAPITAL LETTER A
        words = words[1:]
    if not words:
        return None
    return "han" if words[0] == "CJK" else words[0].lower()


def script_share(text: str, scripts: frozenset[str]) -> float | None:
    r"""The share of the letters of `text` (outside maths, code and tags) in `scripts`; None if none.

    >>> script_share(r"We solve $x^2 = 4$, so \(x = 2\).", frozenset({"latin"}))
    1.0
    >>> script_share("所以 answer", frozenset({"latin"}))
    0.75
    >>> script_share("42 + 1", frozenset({"latin"})) is None
    True
    """
    counted = total = 0
    for char in _IGNORED.sub(" ", text):
        script = script_of(char)
        if script is not None:
            total += 1
            counted += script in scripts
    return counted / total if total else None


def language_consistency(
    completions: list[Any],
    language: str | list[str] | None = None,
    script: str | None = None,
    scope: str = "think",
    **kwargs: Any,
) -> list[float | None]:
    """The share of each completion's letters in the target script, from 0.0 to 1.0 (R1's reward).

    The target is `script` (a script name), else `language` (a code of LANGUAGE_SCRIPTS, one for
    all, or a dataset column ``language`` with one per row), else English. None where the part
    read has no letters at all.

    >>> language_consistency(["<think>Let me think.</think>", "<think>让我想想</think>", "<think>Let 我</think>"])
    [1.0, 0.0, 0.75]
    >>> language_consistency(["<think>让我想想</think>"], language="zh"), language_consistency(["42"])
    ([1.0], [None])
    """
    if scope not in SCOPES:
        raise UserError(f"language_consistency: scope {scope!r} is unknown; use one of {', '.join(SCOPES)}")
    languages = language if isinstance(language, (list, tuple)) else [language] * len(completions)
    targets = [_target_scripts(lang, script) for lang in languages]
    texts = [completion_text(c) for c in completions]
    return [script_share(_read_part(text, scope), target) for text, target in zip(texts, targets, strict=True)]


def _read_part(text: str, scope: str) -> str:
    """The chain of thought (every ``<think>`` block; an unclosed one runs to the end) or all of it."""
    thoughts = _THINK.findall(text) if scope == "think" else []
    return "\n".join(thoughts) if thoughts else text


def _target_scripts(language: str | None, script: str | None) -> frozenset[str]:
    if script is not None:
        if script.lower() not in SCRIPTS:
            raise UserError(f"language_consistency: unknown script {script!r}{_hint(script.lower(), SCRIPTS)}")
        return frozenset({script.lower()})
    code = (language or "en").lower().split("-")[0].split("_")[0]  # "en-US", "zh_CN"
    if code not in LANGUAGE_SCRIPTS:
        raise UserError(
            f"language_consistency: unknown language {language!r}{_hint(code, LANGUAGE_SCRIPTS)} "
            "(or give a script, e.g. script: latin)"
        )
    return LANGUAGE_SCRIPTS[code]


def _hint(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    listed = ", ".join(sorted(known))
    return f"; did you mean {close[0]!r}? Known: {listed}" if close else f"; known: {listed}"
