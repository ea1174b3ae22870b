"""An MCP server's tools as a driven rlvr environment: the model sees them, calls them, and reads what they return.

    environment.name: mcp:python path/to/server.py        a server rlvr starts, over stdio
    environment.name: mcp:http://127.0.0.1:8000/mcp        a running server, over streamable HTTP

The server's tools (MCP `list_tools`: name, description, input schema) are offered to the model as function
tools in the chat template; each call in a model's message (rlvr.envs.template reads them) is made with MCP
`call_tool`, under environment.timeout_s, and what it returns comes back as a tool message (its text content;
an error result as its text, counted in env/tool_errors). A message with no call is the final answer: the
trajectory ends and the run's rewards score it. After `max_calls` calls the next message is final whatever it
holds. One session with the server serves the whole run (its tools are stateless, as MCP tool servers mostly
are), opened when the environment is first built, on a thread of its own that runs the `mcp` package's client.
"""

from __future__ import annotations

import asyncio
import atexit
import shlex
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AsyncExitStack
from typing import Any

from rlvr.envs.base import Message, Reply
from rlvr.envs.template import function_tool
from rlvr.errors import UserError, first_line

PREFIX = "mcp:"
CONNECT_S = 60.0  # how long the server has to start and list its tools
CLOSE_S = 5.0  # how long the session has to close at the process's end


def is_mcp(spec: Any) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def mcp_factory(spec: str, max_calls: int = 4) -> Callable[[], McpTools]:
    """A factory of environments over the MCP server `spec` names (see the module docstring); the server is
    reached, and its tools listed, now: a mistake is said before the first step."""
    session = _Session(spec.removeprefix(PREFIX), spec)
    return lambda: McpTools(session, max_calls)


class McpTools:
    """One trajectory with an MCP server's tools (see the module docstring)."""

    def __init__(self, session: _Session, max_calls: int) -> None:
        self.session, self.max_calls, self.calls = session, max_calls, 0
        self.tools = session.tools

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]:
        self.calls = 0
        return messages

    def step(self, text: str, tool_calls: list[dict[str, Any]] | None = None) -> Reply:
        """`tool_calls`: the message's, as rlvr's driver reads them (rlvr.envs.base.step_arguments)."""
        if not tool_calls or self.calls >= self.max_calls:
            return Reply(None, done=True)
        self.calls += len(tool_calls)
        answers, errors = [], 0
        for call in tool_calls:
            output, failed = self.session.call(call["name"], call["arguments"])
            errors += failed
            answers.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        return Reply(answers, done=False, info={"tool_calls": float(len(tool_calls)), "tool_errors": float(errors)})


class _Session:
    """A session with an MCP server, kept open on a thread running its own event loop; sync calls into it. One task
    on that loop opens the session and, when the process ends (or `close`), leaves it: the `mcp` package's client
    (anyio task groups) must be left in the task that entered it, not by the finalizer of an abandoned one."""

    def __init__(self, target: str, spec: str) -> None:
        self.spec, self.loop = spec, asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="rlvr-mcp", daemon=True).start()
        self._closing = asyncio.Event()
        listed: Future[Any] = Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(target, listed), self.loop)
        try:
            tools = listed.result(timeout=CONNECT_S)
        except UserError:
            raise
        except Exception as e:
            self._held.cancel()
            raise UserError(f"environment {spec!r}: could not reach the MCP server ({type(e).__name__}: "
                            f"{first_line(e)}); check the command or the URL") from None
        atexit.register(self.close)
        self.tools = [function_tool(t.name, t.description or "", t.inputSchema) for t in tools.tools]
        if not self.tools:
            raise UserError(f"environment {spec!r}: the MCP server lists no tools")

    async def _hold(self, target: str, listed: Future[Any]) -> None:
        """Open the session, hand its tools to `listed`, and keep it open until `close`."""
        try:
            async with AsyncExitStack() as stack:
                listed.set_result(await self._open(stack, target))
                await self._closing.wait()
        except BaseException as e:
            if listed.done():
                raise
            listed.set_exception(e)

    async def _open(self, stack: AsyncExitStack, target: str) -> Any:
        from mcp import ClientSession

        if target.startswith(("http://", "https://")):
            from mcp.client.streamable_http import streamablehttp_client

            read, write, _ = await stack.enter_async_context(streamablehttp_client(target))
        else:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            command = shlex.split(target)
            if not command:
                raise UserError(f"environment {self.spec!r}: give the server's command (mcp:python server.py) or "
                                "URL (mcp:http://host:port/mcp)")
            params = StdioServerParameters(command=command[0], args=command[1:])
            read, write = await stack.enter_async_context(stdio_client(params))
        self.client = await stack.enter_async_context(ClientSession(read, write))
        await self.client.initialize()
        return await self.client.list_tools()

    def close(self) -> None:
        """Leave the session (its server ends) and stop the loop; at the process's end, or when asked."""
        if self.loop.is_running() and not self._held.done():
            self.loop.call_soon_threadsafe(self._closing.set)
            try:
                self._held.result(timeout=CLOSE_S)
            except Exception:  # (a server that will not end: the process's end takes it)
                self._held.cancel()
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _run(self, coroutine: Any, seconds: float | None) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout=seconds)

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """(the text the tool returned, whether it failed): a failure is text for the model, not the run's."""
        if not isinstance(arguments, dict):
            return f"the arguments of {name} must be a JSON object, not {arguments!r}", True
        try:
            result = self._run(self.client.call_tool(name, arguments), None)
        except Exception as e:  # (an unknown tool, arguments the schema refuses: the model's mistake)
            return f"{type(e).__name__}: {first_line(e)}", True
        text = "".join(getattr(part, "text", "") for part in result.content)
        return text, bool(result.isError)
