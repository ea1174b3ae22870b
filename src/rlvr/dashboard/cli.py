"""`rlvr report RUN_DIR [RUN_DIR ...] [--output FILE] [--x step|time]` (or one rlvr eval folder),
`rlvr dashboard RUN_DIR [RUN_DIR ...] [--host] [--port] [--allow-remote]`"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_report_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("report", help="write one self-contained HTML report of a run (charts, summary, "
                                             "samples, config) or of an rlvr eval folder (results, curves, problems)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="run directories made by rlvr train (several are overlaid, one line each), or one folder "
                        "rlvr eval wrote")
    p.add_argument("--output", help="the HTML file (default RUN_DIR/report.html; needed for several runs)")
    p.add_argument("--x", choices=["step", "time"], default="step",
                   help="the charts' x axis: the step (default) or wall-clock minutes of training")
    return p


def run_report(args: argparse.Namespace) -> int:
    from rlvr.dashboard.eval_page import kind_of, write_eval_report
    from rlvr.dashboard.report import write_report
    from rlvr.errors import UserError

    kinds = [kind_of(Path(r)) for r in args.run_dirs]
    if "eval" in kinds:
        if len(kinds) > 1:
            raise UserError("an rlvr eval folder makes a report of its own: give it alone (several run directories "
                            "are overlaid)")
        path = write_eval_report(Path(args.run_dirs[0]), Path(args.output) if args.output else None)
        print(f"report: {path}")
        return 0
    if len(args.run_dirs) > 1 and not args.output:
        raise UserError("several runs make one report: give --output FILE (e.g. --output compare.html)")
    path = write_report([Path(r) for r in args.run_dirs], Path(args.output) if args.output else None, x=args.x)
    print(f"report: {path}")
    return 0


def add_dashboard_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("dashboard",
                              help="a local page that follows runs live (metrics overlaid, samples by step)")
    p.add_argument("run_dirs", nargs="+", help="run directories made by rlvr train")
    _bind_options(p)
    return p


def _bind_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=port_number, default=8765)
    p.add_argument("--allow-remote", action="store_true", help="allow binding to an address other machines can reach")


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 to 65535 (0: a free one).

    >>> port_number("8000"), port_number("0")
    (8000, 0)
    """
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: give 0 to 65535 (0: a free one)")
    return port


def run_dashboard(args: argparse.Namespace) -> int:
    from rlvr.dashboard.server import serve

    serve([Path(r) for r in args.run_dirs], args.host, args.port, args.allow_remote)
    return 0


def add_explore_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("explore",
                              help="the GRPO explorer: edit a group's rewards, see the advantages (local page)")
    _bind_options(p)
    return p


def run_explore(args: argparse.Namespace) -> int:
    from rlvr.dashboard.server import serve

    serve([], args.host, args.port, args.allow_remote, page="/explore")
    return 0
