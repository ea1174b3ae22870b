"""`run_python`: run a Python program in a fresh sandbox and collect what it printed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

from rlvr.errors import UserError
from rlvr.sandbox.limits import Limits, RunResult
from rlvr.sandbox.process import SandboxProcess

MAIN = "main.py"


def run_python(
    source: str,
    *,
    stdin: str = "",
    limits: Limits = Limits(),
    files: dict[str, str] | None = None,
) -> RunResult:
    """Run `source` as ``python3 -I main.py`` in a fresh sandbox, feeding it `stdin`.

    `files` (relative path -> text) are placed next to ``main.py`` in the working directory.
    Never raises for anything the program does; an infrastructure failure comes back as status
    "infra_error". Under bubblewrap the working directory is a fresh tmpfs; without bubblewrap
    it is a fresh host temp dir, removed afterwards.

    >>> run_python("print(sum(map(int, input().split())))", stdin="2 3\\n").stdout
    '5\\n'
    """
    if files and MAIN in files:
        raise UserError(f"sandbox files may not be named {MAIN!r}: that is the program itself "
                        "(pass it as `source`, or rename the file)")
    return run_script([MAIN], {**(files or {}), MAIN: source}, stdin=stdin, limits=limits)


def run_script(
    script: list[str], files: Mapping[str, str], *, stdin: str = "", limits: Limits = Limits()
) -> RunResult:
    """Run ``python -I <script...>`` in a fresh sandbox holding `files`; see `run_python`."""
    with tempfile.TemporaryDirectory(prefix="rlvr-sandbox-") as host_dir:
        write_files(host_dir, files)
        process = SandboxProcess(script, host_dir, limits)
        process.send(stdin.encode(), close=True)
        return process.finish()


def write_files(directory: str, files: Mapping[str, str]) -> None:
    """Write each relative path -> text under `directory`, refusing paths that climb out."""
    root = os.path.realpath(directory)
    for name, text in files.items():
        path = os.path.realpath(os.path.join(root, name))
        if os.path.isabs(name) or not path.startswith(root + os.sep):
            raise UserError(
                f"sandbox file name {name!r} leaves the working directory "
                "(give relative paths without '..')"
            )
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
