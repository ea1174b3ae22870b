"""What every run from Python shares (rlvr.GRPO, PPO, SFT, RewardModel): callbacks after each step, the run
directory's rules (resume, overwrite, refused otherwise), what was given in memory written before the run
starts, a callback's failure said once the run has saved, and the trained model saved as a plain folder.

A callback runs under the contract of every user function (rlvr.deadline.call_user): a time limit
(CALLBACK_TIMEOUT_S), sys.exit or a KeyboardInterrupt of its own turned into one line, Ctrl-C or SIGTERM while
it runs heard; each ends the run saved at the step it follows."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlvr import paths
from rlvr.console import quiet_libraries
from rlvr.deadline import call_user
from rlvr.errors import StepAbandoned, UserError, a_kind, first_line, python_caller
from rlvr.run.directory import holds_a_run
from rlvr.run.stop import StopFlag

Callback = Callable[[int, dict[str, float]], Any]  # (step, its metrics) -> True to stop the run there (saved)
OnStepEnd = Callable[[int, dict[str, float], StopFlag], None]


def as_callbacks(given: Any) -> list[Callback]:
    """`callbacks=` as given: a list of callbacks, or one alone (as TRL's reward_funcs may be)."""
    many = isinstance(given, (list, tuple)) and not callable(given)
    return [as_callback(c) for c in (given if many else [given] if given else [])]


def run_directory(output_dir: Any, default: Any) -> Path:
    """`output_dir=` (None: `default`) as a folder path; one line for anything that cannot be one."""
    chosen = output_dir or default
    if not isinstance(chosen, (str, os.PathLike)):
        raise UserError(f"output_dir={chosen!r} is {a_kind(chosen)}: give the run directory's path (a str or Path)")
    return Path(chosen)


def as_callback(given: Any) -> Callback:
    """A callback as given (a function, or an object with on_step_end), or one line saying what it needs."""
    if any(cls.__name__ == "TrainerCallback" for cls in type(given).__mro__):
        raise UserError(f"callback {type(given).__name__} is a transformers TrainerCallback, which rlvr does not run "
                        "(it has no Trainer state or control): give a function (step, metrics) -> bool | None")
    if callable(given):
        return given  # type: ignore[no-any-return]
    if callable(getattr(given, "on_step_end", None)):
        method: Callback = given.on_step_end
        return method
    raise UserError(f"callback {given!r} is not callable: give a function (step, metrics) -> bool | None, or an "
                    "object with on_step_end(step, metrics)")


CALLBACK_TIMEOUT_S = 600.0  # a callback's time limit: past it, the run saves the step it finished and stops
CALLBACK_FIX = "return True from it to stop the run, or raise an exception"


def says_stop(returned: Any) -> bool:
    """Whether a callback's return value asks the run to stop: True, or a boolean scalar that is true (numpy's
    np.bool_, a one-element torch bool tensor), not any truthy value.

    >>> import numpy as np
    >>> says_stop(True), says_stop(np.bool_(True)), says_stop(np.float64(1.0)), says_stop(1), says_stop("stop")
    (True, True, False, False, False)
    """
    if isinstance(returned, bool):
        return returned
    dtype = str(getattr(returned, "dtype", ""))
    return dtype in ("bool", "torch.bool") and tuple(getattr(returned, "shape", (0,))) == () and bool(returned)


def train_from_python(run_dir: Path, launch: Callable[[OnStepEnd], dict[str, Any]],
                      write_inputs: Callable[[bool], None], callbacks: Sequence[Callback], *, resume: bool,
                      overwrite: bool) -> dict[str, Any]:
    """Run `launch(on_step_end)` in `run_dir` as a Python caller: a run there is continued (`resume`), deleted
    (`overwrite`) or refused; what was given in memory written first (`write_inputs(resume)`); the callbacks
    after every step (True from one, or an exception, stops the run, saved; the exception is said after)."""
    quiet_libraries()
    failed: list[str] = []

    def step_end(step: int, metrics: dict[str, float], stop: StopFlag) -> None:
        for callback in callbacks:
            name = f"callback {getattr(callback, '__name__', callback)!s}"
            try:  # under the contract of every user function (rlvr.deadline.call_user): a time limit, sys.exit
                call = functools.partial(callback, step, dict(metrics))
                wants_stop = says_stop(call_user(name, call, CALLBACK_TIMEOUT_S, "rlvr.api.running.CALLBACK_TIMEOUT_S",
                                                 CALLBACK_FIX))
            except StepAbandoned:  # Ctrl-C or SIGTERM while it ran: the step is done, the run saves it and stops
                wants_stop = True
            except UserError as e:  # sys.exit, its own KeyboardInterrupt, past its time limit: said after the save
                failed.append(f"{e} at step {step}")
                wants_stop = True
            except Exception as e:  # the user's code: the run saves, then says so in one line
                failed.append(f"{name} raised {type(e).__name__}: {first_line(e)} at step {step}")
                wants_stop = True
            if wants_stop:
                stop.request_stop()

    with python_caller():
        if resume and overwrite:
            raise UserError("resume=True continues the run in output_dir, overwrite=True deletes it: give one")
        if not (resume or overwrite) and paths.latest_checkpoint(run_dir) is not None:
            raise holds_a_run(run_dir)
        writable_folder(run_dir)
        try:
            write_inputs(resume)
        except OSError as e:  # (a read-only file system, a folder of someone else's)
            raise UserError(f"cannot write into {run_dir} ({e.strerror or e}): give an output_dir you can "
                            "write to") from None
        summary = launch(step_end)
    if failed:
        raise UserError(f"{failed[0]}; the run stopped there, saved: fix it and continue with resume=True")
    return summary


def writable_folder(folder: Path) -> None:
    """One line when `folder`, an output_dir, is a file (it is made when missing)."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"output_dir {folder} is a file: give a folder (it is made when missing)")


def save_from_python(run_dir: Path, path: str | Path, merge: bool, cache_dir: str) -> Path:
    """The run's latest model as a folder transformers (and peft, and vLLM) load without rlvr: with LoRA, the
    adapters, or with `merge` one plain checkpoint with them folded in."""
    from rlvr.models.export import export_model

    if not isinstance(path, (str, os.PathLike)):
        raise UserError(f"save({path!r}): give the folder to write as a str or Path")
    with python_caller():
        export_model(run_dir, Path(path), merge=merge, cache_dir=cache_dir)
    return Path(path)


def config_values(config: Any, cls: type, load: Callable[[str | Path], Any]) -> dict[str, Any]:
    """A config in any accepted form (a `cls`, a dict of its keys, a YAML file `load` reads, None) as settings."""
    if config is None:
        return {}
    if isinstance(config, cls):
        given: Any = config
        return dataclasses.asdict(given)
    if isinstance(config, dict):
        return dict(config)
    if isinstance(config, (str, Path)):
        loaded: Any = load(config)
        return dataclasses.asdict(loaded)
    raise UserError(f"config is {a_kind(config)}: give a {cls.__name__}, a dict of its keys or a YAML file")
