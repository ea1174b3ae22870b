"""The tools of an MCP server, trained with: rlvr starts the server (here this file, run with --serve: a FastMCP
server as the `mcp` package's docs write one), lists its tools to the model in the chat template, calls them when
the model calls them, and gives their answers back as tool messages. Any MCP server works the same way, over stdio
(`mcp:<command>`) or streamable HTTP (`mcp:http://host:port/mcp`).

    python examples/mcp_tools.py
    python examples/mcp_tools.py --model tiny --max-steps 2
"""

import argparse
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/mcp")
parser.add_argument("--serve", action="store_true", help="run as the MCP server (rlvr starts it so)")
args = parser.parse_args()

if args.serve:
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("calculator", log_level="WARNING")

    @server.tool()
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    server.run()
    sys.exit(0)

from rlvr import GRPO  # noqa: E402  (the server above needs none of it)

rows = [{"prompt": f"What is {a} times {b}? Use the multiply tool.", "answer": str(a * b)}
        for a in range(11, 19) for b in (3, 7)]
grpo = GRPO(args.model, train_data=rows, max_steps=args.max_steps, output_dir=args.output_dir,
            environment=f"mcp:{sys.executable} {Path(__file__).resolve()} --serve",
            eval_before=False, eval_after=False,
            config={"environment": {"max_turns": 3, "params": {"max_calls": 2}},
                    "generation": {"max_new_tokens": 48}, "sampling": {"group_size": 4, "batch_size": 16}})
grpo.train()  # metrics.jsonl: env/turns, env/tool_calls, env/tool_errors; the answer scored by math_accuracy
