"""`rlvr serve --tinker [--host H] [--port P] [--dir D]`: Tinker's training API on this machine (rlvr.tinker.server)."""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path

from rlvr.dashboard.cli import port_number
from rlvr.errors import UserError


def add_serve_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("serve", help="serve Tinker's training API (--tinker) on this machine: loops written "
                                            "for the tinker SDK train rlvr's models, unchanged")
    p.add_argument("--tinker", action="store_true", help="speak the tinker SDK's protocol (TINKER_BASE_URL)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s: this machine only; "
                                                       "nothing checks the API key)")
    p.add_argument("--port", type=port_number, default=8000, help="port (default %(default)s; 0: a free one, printed)")
    p.add_argument("--dir", default="runs/tinker", help="where checkpoints (tinker:// paths) are kept "
                                                        "(default %(default)s)")
    p.add_argument("--cache-dir", default="~/.cache/rlvr", help="where models are converted (default %(default)s)")
    p.add_argument("--alias", action="append", default=[], metavar="NAME=MODEL",
                   help="serve base model NAME (as a client asks for it: a Hub name a recipe knows) as MODEL (what "
                        "rlvr loads: tiny, smollm2, a folder); repeatable")
    return p


def run_serve(args: argparse.Namespace) -> int:
    if not args.tinker:
        raise UserError("rlvr serve speaks Tinker's API: give --tinker (rlvr serve --tinker --port 8000)")
    from rlvr.tinker.server import serve  # (the SDK's schema and the models only once the arguments are sound)
    from rlvr.tinker.wire import WireError, schema

    try:
        schema()
    except WireError as e:
        raise UserError(str(e)) from None
    bad = [a for a in args.alias if "=" not in a or not all(a.split("=", 1))]
    if bad:
        raise UserError(f"--alias {bad[0]!r}: give NAME=MODEL (e.g. --alias meta-llama/Llama-3.2-1B=smollm2)")
    from rlvr.models.hub import path_problem

    missing = next((p for a in args.alias if (p := path_problem(a.split("=", 1)[1]))), None)
    if missing:
        raise UserError(f"--alias: {missing}")
    try:
        serve(Path(args.dir), args.host, args.port, args.cache_dir, dict(a.split("=", 1) for a in args.alias))
    except OSError as e:
        if e.filename is not None:  # (a path, not the socket: --dir; said by rlvr.cli as a path's error)
            raise
        wrong = "--host" if isinstance(e, socket.gaierror) or e.errno == errno.EADDRNOTAVAIL else "--port"
        raise UserError(f"cannot listen on {args.host}:{args.port}: {e.strerror} (give another {wrong})") from None
    return 0
