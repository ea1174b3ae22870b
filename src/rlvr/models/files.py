"""Model folders whose files are all readable alike.

safetensors writes a weights file 0600 (readable by its owner alone), while every other file of the
folder (config.json, the tokenizer, trainer.pt beside it) gets what `open` gives: 0666 less the umask,
0644 under the usual 022. `match_umask` gives the weights that mode too, wherever a model is written.
"""

from __future__ import annotations

import os
from pathlib import Path


def match_umask(folder: Path) -> None:
    """Give every file under `folder` the mode a newly opened file gets: 0666 less the process's umask."""
    mode = 0o666 & ~umask()
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(mode)


def umask() -> int:
    """This process's umask, read without setting it (`os.umask` sets it, for a moment, for every thread)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # no /proc (not Linux): the one way there is
    os.umask(mask)
    return mask
