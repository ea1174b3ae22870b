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

With a tokenizer that can read its chat template's own tool calls (one that ships a `response_template`,
for transformers' `parse_response`) and a template that lists tools, the model calls a `python` tool in
that format instead (`call_format`: auto, the default, picks it there; `fence` or `template` force one),
e.g. `<tool_call>{"name": "python", "arguments": {"code": "print(347 * 28)"}}</tool_call>` for Qwen's;
the prompt is rendered with the tool's schema and the output comes back as a `tool` message.

A message without a complete block (or tool call) is the final answer: the trajectory ends and the task's verifier
scores it. After `max_calls` calls the next message is final whatever it holds. Each call counts in
the step's metrics: tool_calls, tool_errors (the program failed: a traceback, a signal, a limit) and
tool_timeouts. A hostile program cannot reach the host, and its failure is only text for the model.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from rlvr.envs.base import Message, Reply, replies
from rlvr.errors import UserError
from rlvr.sandbox import Limits, RunResult, run_python

_FENCE = re.compile(r"[ \t]*```[ \t]*([\w+-]*)[ \t]*$")
PYTHON_TAGS = ("python", "python3", "py")
INSTRUCTIONS = ("You can run Python: write a ```python code block and stop; its output comes back in an "
                "```output block. When you know the answer, give it without a code block.")
TOOL_INSTRUCTIONS = ("You can run Python with the `python` tool; what it prints comes back to you. When you know "
                     "the answer, give it without a tool call.")
TOOL_SCHEMA = {"type": "function", "function": {
    "name": "python",
    "description": "Run a Python program in a sandbox (no network, no files) and return what it prints.",
    "parameters": {"type": "object", "required": ["code"], "properties": {
        "code": {"type": "string", "description": "The program; print what you need to see."}}}}}


def first_code_block(text: str) -> tuple[str, int] | None:
    """(code, end) of the first complete ```python block in `text`; `end` is where its closing fence ends.

    >>> first_code_block("Let me compute.\\n```python\\nprint(2 + 2)\\n```\\nThe output is 5.")
    ('print(2 + 2)\\n', 42)
    >>> first_code_block("```python\\nprint(1)") is None, first_code_block("no code") is None
    (True, True)
    """
    offset, tag = 0, ""
    block: list[str] | None = None
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
                 instructions: bool = True, example: list[Message] | None = None,
                 call_format: Literal["auto", "fence", "template"] = "auto"):
        self.max_calls, self.output_chars = max_calls, output_chars
        self.limits = limits or Limits(output_bytes=64_000)
        self.instructions = instructions
        self.example = [dict(m) for m in example or []]  # an exchange showing a tool call, put before the question
        if call_format not in ("auto", "fence", "template"):
            raise UserError(f"python_tool: call_format must be auto, fence or template, not {call_format!r}")
        self.call_format = call_format
        self.tools: list[dict[str, Any]] | None = None  # the tool schemas the prompt lists (template calls only)
        self.parser: Any = None  # the tokenizer that reads the template's tool calls
        self.calls = 0

    def bind(self, tokenizer: Any) -> None:
        """Choose the call format for the policy's tokenizer (called before `reset`)."""
        native = reads_template_tool_calls(tokenizer)
        if self.call_format == "template" and not native:
            raise UserError("python_tool: call_format=template needs a tokenizer with a response_template (to read "
                            "tool calls) and a chat template that lists tools; use call_format: fence")
        if self.call_format != "fence" and native:
            self.parser, self.tools = tokenizer, [TOOL_SCHEMA]

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]:
        self.calls = 0
        if self.example:  # the worked exchange goes right before the question (after any system message)
            head = 1 if messages and messages[0]["role"] == "system" else 0
            messages = [*messages[:head], *self.example, *messages[head:]]
        if not self.instructions:
            return list(messages)
        note = TOOL_INSTRUCTIONS if self.parser is not None else INSTRUCTIONS
        if messages and messages[0]["role"] == "system":
            return [{"role": "system", "content": messages[0]["content"] + "\n\n" + note}, *messages[1:]]
        return [{"role": "system", "content": note}, *messages]

    def message_done(self, text: str) -> bool:
        """A complete fenced call ends the model's message at once: decoding stops just past its closing
        fence. (A template tool call ends with the model's turn, as the template has it.)"""
        block = first_code_block(text) if self.calls < self.max_calls and self.parser is None else None
        return block is not None and len(text) > block[1]

    def step(self, text: str) -> Reply:
        if self.calls >= self.max_calls:
            return Reply(message=None, done=True)
        if self.parser is not None:
            return self._template_call(text)
        block = first_code_block(text)
        if block is None:
            return Reply(message=None, done=True)
        code, end = block
        return self._run(code, lambda output: f"```output\n{output}\n```", keep=end)

    def _template_call(self, text: str) -> Reply:
        try:
            calls = self.parser.parse_response(text, prefix="", tools=self.tools).get("tool_calls") or []
        except ValueError as e:  # a call the template's parser cannot read
            return self._failed_call(f"the tool call could not be read: {e}")
        if not calls:
            return Reply(message=None, done=True)
        answers, info = [], {"tool_calls": 0.0, "tool_errors": 0.0, "tool_timeouts": 0.0}
        for call in calls[:max(1, self.max_calls - self.calls)]:  # every call of the message, within max_calls
            function = call.get("function") or {}
            arguments = function.get("arguments")
            code = arguments.get("code") if isinstance(arguments, dict) and function.get("name") == "python" else None
            done = (self._failed_call("call the `python` tool with a `code` string") if not isinstance(code, str)
                    else self._run(code, lambda output: output, keep=None))
            answers += replies(done)
            info = {k: v + done.info.get(k, 0.0) for k, v in info.items()}
        return Reply(message=answers, done=False, info=info)

    def _failed_call(self, why: str) -> Reply:
        """A call that could not run: the model reads why, and it counts as a call and as an error."""
        self.calls += 1
        return Reply(message={"role": "tool", "content": f"({why})"}, done=False,
                     info={"tool_calls": 1.0, "tool_errors": 1.0, "tool_timeouts": 0.0})

    def _run(self, code: str, wrap: Any, keep: int | None) -> Reply:
        self.calls += 1
        result = run_python(code, limits=self.limits)
        output = tool_output(result, self.output_chars)
        return Reply(message={"role": "tool", "content": wrap(output)}, done=False, keep=keep,
                     info={"tool_calls": 1.0, "tool_errors": float(result.status != "ok"),
                           "tool_timeouts": float(result.status == "timeout")})


def reads_template_tool_calls(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template lists tools and the tokenizer can parse the calls the model
    writes in that template's format (a `response_template`, read by transformers' `parse_response`)."""
    if getattr(tokenizer, "response_template", None) is None:
        return False
    ask = [{"role": "user", "content": "x"}]
    try:
        listed = tokenizer.apply_chat_template(ask, tools=[TOOL_SCHEMA], tokenize=False)
        return listed != tokenizer.apply_chat_template(ask, tokenize=False) and "python" in listed
    except Exception:  # a template that cannot take tools
        return False
