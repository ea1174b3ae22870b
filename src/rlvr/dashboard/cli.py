"""`rlvr report RUN_DIR [--output FILE]`"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_report_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("report", help="write one self-contained HTML report of a run (charts, summary, samples, config)")
    p.add_argument("run_dir", help="a run directory made by rlvr train")
    p.add_argument("--output", help="the HTML file (default RUN_DIR/report.html)")
    return p


def run_report(args: argparse.Namespace) -> int:
    from rlvr.dashboard.report import write_report

    path = write_report(Path(args.run_dir), Path(args.output) if args.output else None)
    print(f"report: {path}")
    return 0
