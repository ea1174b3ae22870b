"""An MCP tool server written as the mcp package's docs write one (FastMCP), for tests/envs/test_mcp.py: run over
stdio by `python mcp_server.py`."""

from mcp.server.fastmcp import FastMCP

server = FastMCP("calculator", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


if __name__ == "__main__":
    server.run()
