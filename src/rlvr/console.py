"""What rlvr prints, and what the libraries under it are kept from printing.

- `quiet_libraries()`: no per-file download bars, no library log lines below errors, and none of the
  deprecation warnings transformers raises about how rlvr calls it (rlvr pins the behaviour it relies
  on in its tests; the warnings tell a user nothing they can act on). Called by every command that loads a
  model and by the Python API (rlvr.api); a user's own TRANSFORMERS_VERBOSITY wins.
- `progress(...)`: the progress bar of a training loop or an evaluation. On a terminal it redraws in
  place; anywhere else (a log file, a pipe, a notebook's captured stderr) each redraw is a line of its own,
  so the lines written between two redraws (sample groups, evaluations) never land inside a bar.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, TextIO

from tqdm import tqdm

# transformers' FutureWarnings about the calls rlvr makes (`past_key_values` is now `cache`, ...): the
# calls are tested against the versions rlvr supports, and a user cannot act on the warning
LIBRARY_DEPRECATIONS = (r".*`past_key_values` is deprecated", r".*is deprecated and will be removed in version")


def quiet_libraries() -> None:
    """Keep transformers' download bars, info logs and deprecation warnings off the console."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for message in LIBRARY_DEPRECATIONS:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)
    if "transformers" in sys.modules:  # already imported (a Python caller): tell it directly
        transformers = sys.modules["transformers"]
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()


class LineByLine:
    """A stream for tqdm that writes each redraw as a line of its own and drops the clearing writes.

    >>> import io
    >>> out = io.StringIO(); lines = LineByLine(out)
    >>> _ = lines.write("\\rGRPO: 1/4"); _ = lines.write("\\r" + " " * 9 + "\\r"); _ = lines.write("\\rGRPO: 2/4")
    >>> out.getvalue()
    'GRPO: 1/4\\nGRPO: 2/4\\n'
    """

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        shown = text.replace("\r", "").rstrip()
        if shown:
            self.stream.write(shown + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def progress(**kwargs: Any) -> tqdm:
    """A tqdm bar on stderr: redrawn in place on a terminal, a line per redraw elsewhere (at most one a second)."""
    stream = sys.stderr
    if stream.isatty():
        return tqdm(file=stream, dynamic_ncols=True, **kwargs)
    return tqdm(file=LineByLine(stream), ncols=100, mininterval=1.0, **kwargs)
