"""Python functions as the model's tools (TRL's `tools=`): offered in the chat template, called when it calls them.

    environment: {name: tools, params: {tools: [my_tools.py:search, my_tools.py:add]}}
    GRPO(..., environment={"name": "tools", "params": {"tools": [search, add]}})    from Python, the functions
    rlvr.trl.GRPOTrainer(..., tools=[search, add])                                   TRL's call shape

Each function is described to the model as transformers describes a tool (`get_json_schema`: its name, type
hints and Google-style docstring, which must describe every argument). Each call in a model's message
(rlvr.envs.template reads them) is made with its arguments, an `async def` one awaited, under
environment.timeout_s; what it returns comes back as a tool message (its text; a list or dict as JSON), and a
call that raises, names no such tool or has arguments that do not fit comes back as `{"error": ...}` (as in
TRL), counted in env/tool_errors. A message with no call is the final answer: the trajectory ends and the run's
rewards score it. `environment.max_turns` bounds the model's messages (TRL's max_tool_calling_iterations + 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.envs.base import Message, Reply
from rlvr.errors import UserError, first_line
from rlvr.rewards.asynchronous import awaited


class FunctionTools:
    """One trajectory with Python functions as tools (see the module docstring)."""

    def __init__(self, tools: Sequence[Any]) -> None:
        self.functions = named_tools(tools)
        self.tools = [tool_schema(name, fn) for name, fn in self.functions.items()]

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]:
        return messages

    def step(self, text: str, tool_calls: list[dict[str, Any]] | None = None) -> Reply:
        """`tool_calls`: the message's, as rlvr's driver reads them (rlvr.envs.base.step_arguments)."""
        if not tool_calls:
            return Reply(None, done=True)
        answers, errors = [], 0
        for call in tool_calls:
            output, failed = self.call(call["name"], call["arguments"])
            errors += failed
            answers.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": output})
        return Reply(answers, done=False, info={"tool_calls": float(len(tool_calls)), "tool_errors": float(errors)})

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """(what the tool returned, as text; whether it failed)."""
        fn = self.functions.get(name)
        if fn is None:
            return _error(f"no tool named {name!r} (the tools: {', '.join(self.functions)})"), True
        if not isinstance(arguments, dict):
            return _error(f"the arguments of {name} are not a JSON object: {str(arguments)[:200]}"), True
        try:
            result = awaited(fn(**arguments))
        except Exception as e:  # (the model's call, the tool's failure: the model reads it, as in TRL)
            return _error(f"{type(e).__name__}: {first_line(e)}"), True
        return (result if isinstance(result, str) else _as_text(result)), False


def named_tools(tools: Sequence[Any]) -> dict[str, Callable[..., Any]]:
    """The tools by name: each a function, or a `module:function` / `file.py:function` spec (rlvr.user_code)."""
    from rlvr.user_code import load_user_object

    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence) or not tools:
        raise UserError("environment 'tools' needs params.tools: a list of functions (or module:function names)")
    functions: dict[str, Callable[..., Any]] = {}
    for tool in tools:
        fn = load_user_object(tool, "tool", "function", "a function with type hints and a docstring") \
            if isinstance(tool, str) else tool
        if not callable(fn):
            raise UserError(f"environment 'tools': {tool!r} is not a function")
        name = getattr(fn, "__name__", type(fn).__name__)
        if name in functions:
            raise UserError(f"environment 'tools': two tools are named {name!r}; give each tool a name of its own")
        functions[name] = fn
    return functions


def tool_schema(name: str, fn: Callable[..., Any]) -> dict[str, Any]:
    """`fn` described as a function tool, as transformers and TRL describe it (`get_json_schema`)."""
    from transformers.utils.chat_template_utils import get_json_schema

    try:
        return get_json_schema(fn)
    except Exception as e:  # (transformers' DocstringParsingException, TypeHintParsingException)
        raise UserError(f"tool {name!r} cannot be described to the model ({first_line(e)}): give it type hints and "
                        "a Google-style docstring with an Args: line for every argument, as TRL's tools need") from None


def _error(message: str) -> str:
    return json.dumps({"error": message})


def _as_text(result: Any) -> str:
    try:
        return json.dumps(result, ensure_ascii=False) if isinstance(result, (list, dict)) else str(result)
    except (TypeError, ValueError):
        return str(result)
