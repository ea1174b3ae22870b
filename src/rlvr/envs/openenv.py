"""OpenEnv environments (openenv-core's `Environment`: reset / step with typed actions and observations) as driven rlvr
environments, in this process or over their server.

    environment.name: openenv:path/to/env.py:MyEnv      an Environment class, built with environment.params
    environment.name: openenv:my_package.env:MyEnv      the same, from an importable module
    environment.name: openenv:http://127.0.0.1:8000     a running OpenEnv server (create_app), over its WebSocket

The model's message becomes the action: the action's one required text field when it has one (`message`, `code`,
...), else the message read as the action's JSON fields; a message that makes no valid action is answered with
the validation error as text (counted as env/invalid_actions), and the conversation goes on. An observation
becomes the next user message: its one text field, else its fields as JSON (without done, reward and metadata).
The trajectory's reward is the sum of the rewards its steps returned, given when the environment says done; a
conversation that runs out of turns first is scored 0, as every environment's (rlvr.rewards.shaping).

One OpenEnv environment (or server session) per trajectory, reset with the trajectory's seed where its reset() takes
one (as OpenEnv's own server passes only what the signature takes): exact resume holds for environments whose
randomness follows that seed. A server that holds fewer sessions at once than a step has conversations
(create_app's max_concurrent_envs) is served in waves: environment.max_sessions. A file in the layout `openenv
init` writes (server/x_environment.py importing `models` from the environment's root) loads as its server does.
"""

from __future__ import annotations

import inspect
import json
import typing
import urllib.request
from collections.abc import Callable
from typing import Any

from rlvr.envs.base import Message, Reply
from rlvr.envs.template import function_tool
from rlvr.errors import UserError, first_line

PREFIX = "openenv:"
HIDDEN = ("done", "reward", "metadata")  # an observation's fields that are not its content


def is_openenv(spec: Any) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def openenv_factory(spec: str, **params: Any) -> Callable[[], OpenEnv]:
    """A factory of rlvr environments over the OpenEnv environment `spec` names (see the module docstring)."""
    target = spec.removeprefix(PREFIX)
    if target.startswith(("http://", "https://")):
        url = target.rstrip("/")
        schema = _fetch_schema(url, spec)
        return lambda: OpenEnv(_Remote(url), schema, spec)
    from rlvr.user_code import load_user_object

    return class_factory(load_user_object(target, "environment", "class", "an openenv.core Environment subclass"),
                         spec, params)


def is_openenv_class(cls: Any) -> bool:
    """Whether `cls` is an openenv-core Environment class (given from Python, or named without the prefix)."""
    import sys

    core = sys.modules.get("openenv.core")
    return core is not None and isinstance(cls, type) and issubclass(cls, core.Environment)


def class_factory(cls: Any, spec: str, params: dict[str, Any]) -> Callable[[], OpenEnv]:
    """A factory of rlvr environments over instances of the OpenEnv Environment class `cls`."""
    from openenv.core.env_server.mcp_environment import MCPEnvironment

    if issubclass(cls, MCPEnvironment):  # (its tools, listed and called: McpOpenEnv)
        from openenv.core.env_server.mcp_types import CallToolAction

        _Local(cls(**params), CallToolAction).close()
        return lambda: McpOpenEnv(_Local(cls(**params), CallToolAction), spec)
    action_cls = _action_class(cls, spec)
    try:
        _Local(cls(**params), action_cls).close()  # (its parameters fit, said now rather than in the first step)
    except Exception as e:
        raise UserError(f"environment {spec!r}: building it with {params} raised {type(e).__name__}: "
                        f"{first_line(e)}") from None
    schema = action_cls.model_json_schema()
    return lambda: OpenEnv(_Local(cls(**params), action_cls), schema, spec)


class OpenEnv:
    """One trajectory of an OpenEnv environment, as rlvr drives it (see the module docstring)."""

    def __init__(self, session: _Local | _Remote, action_schema: dict[str, Any], spec: str) -> None:
        self.session, self.spec = session, spec
        self.text_field = _text_field(action_schema)
        self.total = 0.0

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]:
        observation, _, _ = self.session.reset(seed)
        self.total = 0.0
        shown = _content(observation)
        return [*messages, {"role": "user", "content": shown}] if shown else messages

    def step(self, text: str) -> Reply:
        if self.text_field is not None:
            action: dict[str, Any] = {self.text_field: text}
        else:
            try:
                action = json.loads(text)
                if not isinstance(action, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                return Reply({"role": "user", "content": f"invalid action (write the action as a JSON object): {e}"},
                             done=False, info={"invalid_actions": 1.0})
        try:
            observation, reward, done = self.session.step(action)
        except _InvalidAction as e:
            return Reply({"role": "user", "content": f"invalid action: {e}"}, done=False,
                         info={"invalid_actions": 1.0})
        self.total += float(reward or 0.0)
        if done:
            return Reply(None, done=True, reward=self.total, info={"invalid_actions": 0.0})
        return Reply({"role": "user", "content": _content(observation)}, done=False, info={"invalid_actions": 0.0})

    def close(self) -> None:
        """The trajectory is over (rlvr calls this however it ended): the environment or server session goes."""
        self.session.close()


class McpOpenEnv(OpenEnv):
    """An OpenEnv MCPEnvironment: its MCP tools (ListToolsAction) offered to the model as function tools, each call
    of a model's message a CallToolAction whose result comes back as a tool message; a message with no call is the
    final answer (the trajectory's reward: its steps' rewards if any came, else the run's rewards decide)."""

    def __init__(self, session: _Local, spec: str) -> None:
        super().__init__(session, {}, spec)
        from openenv.core.env_server.mcp_types import ListToolsAction

        listed = session.env.step(ListToolsAction()).model_dump()["tools"]
        self.tools = [function_tool(t["name"], t.get("description") or "", t.get("input_schema") or {}) for t in listed]
        self.rewarded = False

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]:
        self.rewarded = False
        return super().reset(row, messages, seed)

    def step(self, text: str, tool_calls: list[dict[str, Any]] | None = None) -> Reply:
        """`tool_calls`: the message's, as rlvr's driver reads them (rlvr.envs.base.step_arguments)."""
        if not tool_calls:
            return Reply(None, done=True, reward=self.total if self.rewarded else None)
        answers, errors, done = [], 0, False
        for call in tool_calls:
            arguments = call["arguments"] if isinstance(call["arguments"], dict) else {}
            observation, reward, done = self.session.step({"tool_name": call["name"], "arguments": arguments})
            self.total, self.rewarded = self.total + float(reward or 0.0), self.rewarded or reward is not None
            error, result = observation.get("error"), observation.get("result") or {}
            said = (error or {}).get("message") if error else "".join(
                part.get("text", "") for part in result.get("content") or [] if isinstance(part, dict))
            errors += bool(error) or bool(result.get("is_error"))
            answers.append({"role": "tool", "tool_call_id": call["id"], "content": str(said)})
            if done:
                break
        info = {"tool_calls": float(len(answers)), "tool_errors": float(errors), "invalid_actions": 0.0}
        if done:
            return Reply(None, done=True, reward=self.total, info=info)
        return Reply(answers, done=False, info=info)


class _InvalidAction(Exception):
    pass


class _Local:
    """An OpenEnv environment object in this process."""

    def __init__(self, env: Any, action_cls: type) -> None:
        self.env, self.action_cls = env, action_cls
        self.takes_seed = _takes(env.reset, "seed")

    def reset(self, seed: int) -> tuple[dict[str, Any], float | None, bool]:
        # the seed only where reset() takes one, as OpenEnv's own server passes it (its template's reset(self))
        return _parts((self.env.reset(seed=seed) if self.takes_seed else self.env.reset()).model_dump())

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float | None, bool]:
        from pydantic import ValidationError

        try:
            typed = self.action_cls(**action)
        except ValidationError as e:
            raise _InvalidAction(first_line(e)) from None
        return _parts(self.env.step(typed).model_dump())

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


class _Remote:
    """A session on an OpenEnv server (its WebSocket, through openenv-core's GenericEnvClient)."""

    def __init__(self, url: str) -> None:
        from openenv.core import GenericEnvClient

        self.client = GenericEnvClient(base_url=url).sync()
        self.url = url

    def reset(self, seed: int) -> tuple[dict[str, Any], float | None, bool]:
        return self._result(lambda: self.client.reset(seed=seed), starting=True)

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float | None, bool]:
        return self._result(lambda: self.client.step(action))

    def _result(self, call: Callable[[], Any], starting: bool = False) -> tuple[dict[str, Any], float | None, bool]:
        try:
            result = call()
        except Exception as e:
            text = first_line(e)
            if "validation" in text.lower() or "invalid" in text.lower():
                raise _InvalidAction(text) from None
            # (a server past its sessions sends CAPACITY_REACHED and closes: the close may be all that arrives)
            if "CAPACITY_REACHED" in text or (starting and type(e).__name__.startswith("ConnectionClosed")):
                raise UserError(f"the OpenEnv server at {self.url} is at capacity ({type(e).__name__}: {text}): it "
                                "holds as many sessions at once as its create_app(max_concurrent_envs=...) says, and "
                                "the run opens one per conversation; set environment.max_sessions to that number "
                                "(the conversations then run in waves), or raise max_concurrent_envs") from None
            gone = isinstance(e, (ConnectionError, OSError)) and not isinstance(e, TimeoutError)
            hint = " (is it running? start it with openenv's create_app and uvicorn)" if gone else ""
            raise UserError(f"the OpenEnv server at {self.url} failed: {type(e).__name__}: {text}{hint}") from None
        return dict(result.observation or {}), result.reward, bool(result.done)

    def close(self) -> None:
        self.client.close()


def _takes(method: Any, name: str) -> bool:
    """Whether `method` takes the keyword argument `name` (by name, or through **kwargs)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _parts(observation: dict[str, Any]) -> tuple[dict[str, Any], float | None, bool]:
    return observation, observation.get("reward"), bool(observation.get("done"))


def _content(observation: dict[str, Any]) -> str:
    """An observation as the text of a message: its one text field, else its fields as JSON."""
    shown = {k: v for k, v in observation.items() if k not in HIDDEN}
    texts = [v for v in shown.values() if isinstance(v, str)]
    if len(shown) == 1 and texts:
        return texts[0]
    return json.dumps(shown, default=str) if shown else ""


def _text_field(schema: dict[str, Any]) -> str | None:
    """The action's one required text field, when it has exactly one (and no other required field)."""
    properties = schema.get("properties", {})
    required = [k for k in schema.get("required", []) if k != "metadata"]
    texts = [k for k in required if properties.get(k, {}).get("type") == "string"]
    if len(required) == 1 and texts:
        return str(texts[0])
    strings = [str(k) for k, v in properties.items() if k != "metadata" and v.get("type") == "string"]
    return strings[0] if not required and len(strings) == 1 else None


def _action_class(cls: Any, spec: str) -> Any:
    """The action type an OpenEnv Environment class's step() takes (its annotation)."""
    try:
        hints = typing.get_type_hints(cls.step)
    except Exception:
        hints = {}
    action = hints.get("action")
    if not (isinstance(action, type) and hasattr(action, "model_json_schema")):
        raise UserError(f"environment {spec!r}: its step(action) has no Action class annotation (openenv-core "
                        "environments annotate it: def step(self, action: MyAction) -> MyObservation)")
    return action


def _fetch_schema(url: str, spec: str) -> dict[str, Any]:
    """The action's JSON schema, from the server's /schema."""
    try:
        with urllib.request.urlopen(f"{url}/schema", timeout=10) as response:
            return json.loads(response.read())["action"]  # type: ignore[no-any-return]
    except Exception as e:
        raise UserError(f"environment {spec!r}: no OpenEnv server answers at {url} ({type(e).__name__}: "
                        f"{first_line(e)}); start it first (openenv create_app, served by uvicorn)") from None
