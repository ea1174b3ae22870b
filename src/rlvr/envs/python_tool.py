"""`python_tool`: the model may run Python while it reasons, as a code interpreter.

The model writes a fenced block,

    ```python
    print(347 * 28)
    ```

and its turn ends there: decoding stops once the closing fence's line ends (`message_done`), and
anything written after the fence is not part of the conversation (`Reply.keep`), because the output
comes from the sandbox, not from the model. The block runs in a fresh
sandbox (rlvr.sandbox: no network, no host files, CPU, memory, process and wall-clock limits), and what
it printed comes back as a tool message, cut to `output_chars`:

    ```output
    9716
    ```

A message without a complete block is the final answer: the trajectory ends and the task's verifier
scores it. After `max_calls` calls the next message is final whatever it holds. Each call counts in
the step's metrics: tool_calls, tool_errors (the program failed: a traceback, a signal, a limit) and
tool_timeouts. A hostile program cannot reach the host, and its failure is only text for the model.
"""

from __future__ import annotations

import re
from typing import Any

from rlvr.envs.base import Message, Reply
from rlvr.sandbox import Limits, RunResult, run_python

_FENCE = re.compile(r"[ \t]*```[ \t]*([\w+-]*)[ \t]*$")
PYTHON_TAGS = ("python", "python3", "py")
INSTRUCTIONS = ("You can run Python: write a ```python code block and stop; its output comes back in an "
                "```output block. When you know the answer, give it without a code block.")


def first_code_block(text: str) -> tuple[str, int] | None:
    """(code, end) of the first complete ```python block in `text`; `end` is where its closing fence ends.

    >>> first_code_block("Let me compute.\\n```python\\nprint(2 + 2)\\n```\\nThe output is 5.")
    ('print(2 + 2)\\n', 42)
    >>> first_code_block("```python\\nprint(1)") is None, first_code_block("no code") is None
    (True, True)
    """
    offset, block, tag = 0, None, ""
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        end = offset + len(line)
        if block is None and fence is not None:
            block, tag = [], fence.group(1).lower()
        elif block is not None and fence is not None and not fence.group(1):
            if tag in PYTHON_TAGS:
                return "".join(f"{kept}\n" for kept in block), end
            block = None
        elif block is not None:
            block.append(line)
        offset = end + 1
    return None


def tool_output(result: RunResult, limit: int) -> str:
    """What the model reads back: stdout, then stderr, cut to `limit` characters, and how the run ended
    when it did not end well.

    >>> from rlvr.sandbox import RunResult
    >>> tool_output(RunResult("ok", 0, "9716\\n", "", 0.1, True), 100)
    '9716\\n'
    >>> tool_output(RunResult("timeout", None, "", "", 10.0, True), 100)
    '(stopped: the program ran past its time limit)'
    """
    text = result.stdout + result.stderr
    if len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit} more characters cut)"
    notes = {"timeout": "the program ran past its time limit", "memory": "the program ran out of memory",
             "output_limit": "the program printed too much", "infra_error": "the sandbox could not run it"}
    if result.status in notes:
        text += ("\n" if text and not text.endswith("\n") else "") + f"(stopped: {notes[result.status]})"
    return text


class PythonTool:
    """See the module docstring. `limits`: the sandbox's, per call (default: 5 s CPU, 10 s wall, 512 MB)."""

    def __init__(self, max_calls: int = 4, output_chars: int = 1000, limits: Limits | None = None,
                 instructions: bool = True, example: list[Message] | None = None):
        self.max_calls, self.output_chars = max_calls, output_chars
        self.limits = limits or Limits(output_bytes=64_000)
        self.instructions = instructions
        self.example = [dict(m) for m in example or []]  # an exchange showing a tool call, put before the question
        self.calls = 0

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]:
        self.calls = 0
        if self.example:  # the worked exchange goes right before the question (after any system message)
            head = 1 if messages and messages[0]["role"] == "system" else 0
            messages = [*messages[:head], *self.example, *messages[head:]]
        if not self.instructions:
            return list(messages)
        if messages and messages[0]["role"] == "system":
            return [{"role": "system", "content": messages[0]["content"] + "\n\n" + INSTRUCTIONS}, *messages[1:]]
        return [{"role": "system", "content": INSTRUCTIONS}, *messages]

    def message_done(self, text: str) -> bool:
        """A complete call ends the model's message at once: decoding stops just past its closing fence."""
        block = first_code_block(text) if self.calls < self.max_calls else None
        return block is not None and len(text) > block[1]

    def step(self, text: str) -> Reply:
        block = first_code_block(text) if self.calls < self.max_calls else None
        if block is None:
            return Reply(message=None, done=True)
        code, end = block
        self.calls += 1
        result = run_python(code, limits=self.limits)
        output = tool_output(result, self.output_chars)
        return Reply(message={"role": "tool", "content": f"```output\n{output}\n```"}, done=False, keep=end,
                     info={"tool_calls": 1.0, "tool_errors": float(result.status != "ok"),
                           "tool_timeouts": float(result.status == "timeout")})
