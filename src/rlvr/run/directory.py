"""The rules of a run directory: a fresh run never mixes with an old one, and `--resume` continues one.

    fresh   refused over a directory that holds a checkpointed run (it would append to the old
            metrics and skip saving at the old run's steps), unless asked to overwrite it (--overwrite,
            overwrite=True, TRL's habit under rlvr.trl): then that run is deleted; the files of a run that died before
            its first checkpoint are removed, so nothing stale is appended to; a folder holding
            such files without a run's config.yaml (an `rlvr eval` output, say) is refused, never emptied
    resume  the newest intact checkpoint (rlvr.intact), with the config it was saved with (plus overrides);
            newer broken ones are set aside as broken-step-N, never removed, so the resumed run saves
            those steps anew; model.lora cannot change (the checkpoint's adapters are what loads),
            nor can the run end before the step it reached, nor what decides its data, samples and
            rewards (KEPT); other settings changed are said in one line (QUIET: none need be)
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from rlvr import paths
from rlvr.config import load_command_config
from rlvr.config.loading import Config
from rlvr.config.yaml_files import flat_settings
from rlvr.distributed.launcher import is_main_rank
from rlvr.errors import UserError, for_caller
from rlvr.intact import newest_intact

C = TypeVar("C", bound=Config)
# What a resumed run keeps (a change is refused): its data and held-out problems, their order, its samples'
# shape and its rewards; a different one is another run (from this one's model), or its numbers are wrong
KEPT = ("seed", "preset", "data", "sampling.group_size", "sampling.batch_size", "rewards", "environment.name",
        "environment.params", "control", "eval_fraction", "batch_size", "template", "system_prompt", "max_length",
        "packing")
REWARD_IDENTITY = ("name", "weight", "params", "when")  # (the rest of a reward's settings is resolved as it loads)
# What may change without a word: how far it goes, how it is saved, measured, logged and run
QUIET = ("output_dir", "threads", "max_steps", "epochs", "save_every", "eval_every", "keep_checkpoints", "keep_best",
         "distributed", "logging", "tensorboard", "sample_every", "eval_before", "eval_after", "eval_alone_every",
         "preflight", "stats_completions")
# What a run writes outside checkpoints/: cleared when a run that never checkpointed starts again.
RUN_FILES = (paths.METRICS, paths.SAMPLES, paths.SUMMARY, paths.TENSORBOARD, paths.BEST, paths.HELDOUT,
             "eval_before.json", "eval_after.json")  # (the last two: runs checkpointed before the run core)


def start_fresh(run_dir: Path, overwrite: bool = False, cls: type | None = None, model: str | None = None) -> None:
    """Make `run_dir` ready for a new run (of `cls`'s command, starting from `model`), or refuse with the fix when
    it holds one (`overwrite`: delete it, unless the model to start from is in what would be deleted)."""
    if paths.latest_checkpoint(run_dir) is not None and not overwrite:
        raise holds_a_run(run_dir, cls)
    stale = [name for name in RUN_FILES + ((paths.CHECKPOINTS,) if overwrite else ()) if (run_dir / name).exists()]
    if stale and not (run_dir / paths.CONFIG).is_file():
        raise UserError(f"{run_dir} holds {', '.join(stale)} but is not a run directory (no config.yaml): "
                        f"pick another {for_caller('--output-dir', 'output_dir')}")
    doomed = [(run_dir / name).resolve() for name in stale]
    loaded = Path(model).expanduser().resolve() if model and doomed else None
    if loaded is not None and (loaded == run_dir.resolve() or any(loaded.is_relative_to(d) for d in doomed)):
        raise UserError(f"cannot start afresh over {run_dir}: the model to start from, {model}, is the run's own, "
                        "which starting afresh deletes; start from it in another "
                        f"{for_caller('--output-dir', 'output_dir')}")
    for name in stale:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def resume_point(run_dir: Path) -> tuple[Path, list[tuple[Path, str]]]:
    """The newest intact checkpoint of the run in `run_dir`, and the newer ones found broken with what is
    wrong with each (newest first). Every rank of a run finds the same: the same files, checked alike."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"cannot resume: {run_dir} is a file: give a run directory")
    if not run_dir.is_dir():
        raise UserError(f"cannot resume: {run_dir} has no complete checkpoint: the directory does not exist")
    if not (run_dir / paths.CONFIG).is_file():
        raise UserError(f"cannot resume: {run_dir} has no config.yaml "
                        "(is it a run directory made by `rlvr train`, `sft` or `rm`?)")
    checkpoint, broken = newest_intact(run_dir)
    if checkpoint is None and not broken:
        raise UserError(f"cannot resume: {run_dir} has no complete checkpoint yet (start it again without "
                        f"{for_caller('--resume', 'resume=True')})")
    if checkpoint is None:
        latest, problem = broken[0]
        raise UserError(f"cannot resume: none of the {len(broken)} checkpoints of {run_dir} is intact; the latest, "
                        f"{latest.name}: {problem}; restore it from a copy, or start again in a new "
                        f"{for_caller('--output-dir', 'output_dir')}")
    return checkpoint, broken


def set_aside(broken: list[tuple[Path, str]], resumed: Path) -> None:
    """Rename the broken checkpoints newer than `resumed` to broken-step-N and say so, one line each: their
    files stay, and the resumed run writes their steps anew (a step-N that exists is never rewritten)."""
    for checkpoint, problem in broken:
        target = checkpoint.with_name(paths.BROKEN_PREFIX + checkpoint.name)
        for n in range(2, 1000):  # broken at that step before, and kept
            if not target.exists():
                break
            target = checkpoint.with_name(f"{paths.BROKEN_PREFIX}{checkpoint.name}.{n}")
        checkpoint.rename(target)
        print(f"rlvr: checkpoint {checkpoint} is broken: {problem}; kept as {target.name}; "
              f"resuming from step {paths.step_of(resumed)}", file=sys.stderr)


def refuse_changes(config: Any, checkpoint: Path) -> None:
    """Before the model loads: refuse the overrides a resumed run could not honour. The checkpoint's own
    adapters load whatever model.lora says, so it cannot change; a max_steps below the step reached would
    train nothing and call the run finished there (SFT's epochs are checked once the data is counted)."""
    run_dir = Path(config.output_dir)
    _refuse_another_kind(type(config), checkpoint / paths.CONFIG, run_dir)  # (from Python too: one line)
    saved = load_command_config(type(config), checkpoint / paths.CONFIG)
    if not _same_model(saved.model.name, config.model.name):
        raise UserError(f"cannot resume {run_dir} with model {config.model.name!r}: the run goes on from its "
                        f"checkpoint's weights of {saved.model.name!r}; drop the model (or start a new run from this "
                        f"one: {for_caller('--model', 'model=')} {run_dir} and a new "
                        f"{for_caller('--output-dir', 'output_dir')})")
    change = lora_change(saved.model.lora, config.model.lora)
    if change:
        raise UserError(f"cannot resume {run_dir} with {change}: a run keeps the adapter settings it started with; "
                        f"start a new run from its model instead (--set model.name={run_dir} --output-dir NEW_DIR)")
    changed = {key: pair for key, pair in _changes(saved, config).items()
               if key != "model.name" and not key.startswith("model.lora")}
    saved_rewards, rewards = changed.get("rewards", ([], []))
    if rewards is None or _identities(saved_rewards) == _identities(rewards):  # (None: the data's own, as it started)
        changed.pop("rewards", None)
    kept = [key for key in changed if any(key == k or key.startswith(f"{k}.") for k in KEPT)
            and not (key == "data" and isinstance(changed[key][1], str))]  # (SFT's file: rlvr.run.supervised
    # compares its rows, wherever it is)
    if kept:
        old, new = changed[kept[0]]
        raise UserError(f"cannot resume {run_dir} with {kept[0]}={new!r} (the run's is {old!r}): a resumed run keeps "
                        "the data, samples and rewards it started with; start a new run from its model instead "
                        f"({for_caller('--set model.name=', 'model=')}{run_dir} and a new "
                        f"{for_caller('--output-dir', 'output_dir')})")
    said = [f"{key}={new!r} (the run's: {old!r})" for key, (old, new) in changed.items()
            if key.split(".")[0] not in QUIET]
    if said and is_main_rank():
        print(f"rlvr: resuming {run_dir} with other settings: {', '.join(said)}; from here on it is not the run it "
              "would have been unbroken", file=sys.stderr)
    reached = paths.step_of(checkpoint)
    if 0 < getattr(config, "max_steps", 0) < reached:
        raise past_the_end(run_dir, reached, config.max_steps)


def _identities(rewards: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """What makes each reward what it is (REWARD_IDENTITY); the rest is resolved as it loads."""
    return [{key: reward.get(key) for key in REWARD_IDENTITY} for reward in rewards or []]


def _changes(saved: Any, config: Any) -> dict[str, tuple[Any, Any]]:
    """Each setting (dotted) whose value differs between two configs of one command: (saved, config)'s.

    >>> from rlvr.config import SFTConfig
    >>> _changes(SFTConfig(seed=1), SFTConfig(seed=2, max_steps=5))
    {'seed': (1, 2), 'max_steps': (0, 5)}
    """
    a, b = flat_settings(dataclasses.asdict(saved)), flat_settings(dataclasses.asdict(config))
    return {key: (a.get(key), b.get(key)) for key in [*a, *(k for k in b if k not in a)] if a.get(key) != b.get(key)}


def _same_model(saved: str, given: str) -> bool:
    """Whether two model names name the same model: equal, or paths to the same place."""
    if saved == given:
        return True
    a, b = Path(saved).expanduser(), Path(given).expanduser()
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def past_the_end(run_dir: Path, reached: int, total: int) -> UserError:
    """The one-line error of a resumed run asked to end before the step it has reached."""
    return UserError(f"cannot resume {run_dir} to end at step {total}: it is at step {reached} already; "
                     f"give a {for_caller('--max-steps', 'max_steps')} above {reached} (or none, to finish as "
                     "configured)")


def holds_a_run(run_dir: Path, cls: type | None = None) -> UserError:
    """The one-line error of a fresh run (of `cls`'s command) asked to start in a directory that holds a
    checkpointed run."""
    other = None if cls is None else another_kind(cls, run_dir / paths.CONFIG)
    if other is not None:  # (--resume would be refused: it is another command's run)
        return UserError(f"{run_dir} already holds a run of `{other}` (`{other} --resume {run_dir}` continues it): "
                         f"pick another {for_caller('--output-dir', 'output_dir')}, or start afresh over it with "
                         f"{for_caller('--overwrite', 'overwrite=True')}")
    return UserError(f"{run_dir} already holds a run: continue it with "
                     f"{for_caller(f'--resume {run_dir}', 'resume=True')}, start afresh over it with "
                     f"{for_caller('--overwrite', 'overwrite=True')}, or pick another "
                     f"{for_caller('--output-dir', 'output_dir')}")


def lora_change(saved: Any, wanted: Any) -> str | None:
    """How model.lora (`wanted`) differs from the run's own (`saved`), in words; None when it does not.

    >>> from rlvr.config import LoraConfig
    >>> print(lora_change(LoraConfig(rank=4), LoraConfig(rank=16)))
    model.lora.rank=16 (the run's is 4)
    >>> print(lora_change(None, LoraConfig()))
    model.lora (the run trains every weight, without adapters)
    >>> lora_change(LoraConfig(target_modules=["q", "v"]), LoraConfig(target_modules=["v", "q"])) is None
    True
    """
    if saved is None or wanted is None:
        if saved is wanted:
            return None
        return ("model.lora (the run trains every weight, without adapters)" if saved is None
                else "model.lora removed (the run trains adapters)")
    for f in dataclasses.fields(saved):
        old, new = getattr(saved, f.name), getattr(wanted, f.name)
        if (sorted(old) != sorted(new)) if isinstance(old, list) else old != new:  # (layer names in any order)
            return f"model.lora.{f.name}={new} (the run's is {old})"
    return None


def resume_config(cls: type[C], run_dir: Path, overrides: Sequence[str] = (), **cli: Any) -> C:
    """The config the newest intact checkpoint of `run_dir` was saved with, `overrides` (e.g. max_steps=80)
    applied, and output_dir set to `run_dir` (wherever the run was first written)."""
    saved = resume_point(run_dir)[0] / paths.CONFIG
    _refuse_another_kind(cls, saved, run_dir)
    return load_command_config(cls, saved, overrides, **{**cli, "output_dir": str(run_dir)})


def _refuse_another_kind(cls: type, saved: Path, run_dir: Path) -> None:
    """A run that another command made (an SFT run given to `rlvr train --resume`) is one line naming that
    command, rather than its first setting this command does not know."""
    command = another_kind(cls, saved)
    if command is not None:
        raise UserError(f"cannot resume {run_dir} with this command: it is a run of `{command}`; continue it "
                        f"with {command} --resume {run_dir}")


def another_kind(cls: type, saved: Path) -> str | None:
    """The command (`rlvr sft`, ...) whose config `saved` (a config.yaml) is, when it is not `cls`'s; None when it
    is, or when that cannot be told (no file, or its own mistakes, said when it loads)."""
    from rlvr.config import RewardModelConfig, SFTConfig, TrainConfig
    from rlvr.config.yaml_files import read_yaml_file

    keys = read_yaml_file(saved, f"config file {saved}") if saved.is_file() else None
    if not isinstance(keys, dict) or set(keys) <= {f.name for f in dataclasses.fields(cls)}:
        return None
    made = {"rlvr train": TrainConfig, "rlvr sft": SFTConfig, "rlvr rm": RewardModelConfig}
    return next((command for command, kind in made.items()
                 if kind is not cls and set(keys) <= {f.name for f in dataclasses.fields(kind)}), None)


def refuse_another_commands_config(cls: type, path: str | None, command: str) -> None:
    """A --config of another command (a training config given to `rlvr eval`) is one line saying so, rather than
    its first key this command does not know ("unknown config key 'rewards'; did you mean 'reward'?")."""
    other = another_kind(cls, Path(path)) if path else None
    if other is not None:
        raise UserError(f"{path} is a config of `{other}`: `{command}` takes settings of its own ({command} --help); "
                        "to use that run's model, give --model RUN_DIR")


def legacy_before(run_dir: Path) -> dict[str, Any] | None:
    """The "before" evaluation of a run checkpointed before the run core, which kept it beside the checkpoints."""
    path = run_dir / "eval_before.json"
    return json.loads(path.read_text()) if path.is_file() else None
