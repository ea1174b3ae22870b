"""The loop every training recipe runs in: GRPO, PPO, SFT and reward-model training.

    start fresh or resume ─▶ evaluate before ─▶ [ step ─▶ log ─▶ evaluate? ─▶ record samples? ─▶ save? ]*
                          ─▶ save ─▶ evaluate after ─▶ summary.json

A recipe supplies the step and what is specific to it (its models, its state, its evaluation); the run
core supplies everything around it, the same for all: the directory rules, seeding, metrics.jsonl and
TensorBoard, Ctrl-C, atomic checkpoints, and one resume semantics (`--resume RUN_DIR` continues
exactly: the weights, optimizer, schedule, data order and RNG of the checkpoint, and the "before"
evaluation measured when the run started).

Under torchrun every rank runs this loop on its share of each step (rlvr.distributed.world): rank 0 alone writes the
run's files and the bar, and a stop asked of any rank (Ctrl-C, SIGTERM) is agreed at the end of the step."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from tqdm import tqdm

from rlvr import deadline, paths
from rlvr.config import save_config
from rlvr.config.sections import DistributedConfig, LoggingConfig, ModelConfig
from rlvr.console import progress
from rlvr.distributed.world import World, any_across, barrier, join, tag_warnings
from rlvr.errors import StepAbandoned, UserError, for_caller
from rlvr.records import Evaluation
from rlvr.run import best as best_kept
from rlvr.run.checkpoint import load_state, rng_state, save_checkpoint, set_rng_state
from rlvr.run.directory import legacy_before, past_the_end, refuse_changes, resume_point, set_aside, start_fresh
from rlvr.run.lock import run_lock
from rlvr.run.metrics import MetricsWriter, record_samples, truncate_jsonl
from rlvr.run.process import configure_process
from rlvr.run.sharded import restore_rng, save_sharded_checkpoint
from rlvr.run.stop import SIGNALS, StopFlag, stop_on_signals
from rlvr.run.tally import SignalWatch, run_totals, said_at_start, time_line
from rlvr.run.trackers import open_trackers


@dataclass(frozen=True)
class Schedule:
    """When the loop does what, in steps."""

    total_steps: int
    save_every: int = 0  # 0 = only at the end (or when stopped)
    eval_every: int = 0  # 0 = only before and after
    sample_every: int = 0  # record the step's sample groups every N steps (0 = never)
    eval_before: bool = True
    eval_after: bool = True
    keep_checkpoints: int = 2  # the newest N checkpoints stay on disk (0 = all)
    keep_best: bool = False  # also keep the checkpoint of the best validation accuracy (rlvr.run.best)


@dataclass(frozen=True)
class StepResult:
    """What one step reports: its metrics, and groups of completions worth recording (samples.jsonl)."""

    metrics: dict[str, float]
    samples: list[dict[str, Any]] = field(default_factory=list)


class RunConfig(Protocol):
    """What the run core reads of a recipe's config: its run section (rlvr.config.run.RunSection, which GRPO's and
    PPO's TrainConfig, SFTConfig and RewardModelConfig extend) and its model's device (each a dataclass, saved as
    config.yaml)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def output_dir(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def threads(self) -> int: ...  # torch threads (0: the cores this process may use)
    @property
    def model(self) -> ModelConfig: ...  # (its device)
    @property
    def distributed(self) -> DistributedConfig: ...  # (its timeout)
    @property
    def logging(self) -> LoggingConfig: ...


class Recipe(Protocol):
    """A training loop's own part; see the module docstring for the rest. What a recipe may also do is one of
    the capabilities below (`Sharded`, `KeepsBest`, `Closes`), checked by type, not by name."""

    @property
    def resume_hint(self) -> str: ...  # how to continue it, with {run_dir}: "rlvr train --resume {run_dir}"
    @property
    def label(self) -> str: ...  # the progress bar's name
    @property
    def job(self) -> str: ...  # what the trackers call this kind of run: train, ppo, sft, rm
    @property
    def config(self) -> RunConfig: ...
    @property
    def schedule(self) -> Schedule: ...
    @property
    def step_count(self) -> int: ...
    @property
    def world(self) -> World: ...  # the ranks it runs on (one process: rlvr.distributed.world.SINGLE)

    def step(self) -> StepResult: ...
    def evaluate(self) -> Evaluation | None: ...  # held-out measurement; None = nothing to measure
    def progress(self, metrics: dict[str, float]) -> dict[str, str]: ...  # the progress bar's postfix
    def write_checkpoint(self, folder: Path) -> None: ...  # models (model/ loads with transformers), extra files
    # optimizer, scheduler, data order, ... (not the step, not the RNG); called on every rank before rank 0
    # writes the checkpoint, so that what is sharded across ranks can be gathered
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...  # sets step_count from state["step"] too
    def summary(self, before: dict[str, Any] | None, after: dict[str, Any] | None, seconds: float,
                checkpoint: Path) -> dict[str, Any]: ...


@runtime_checkable
class Sharded(Protocol):
    """A recipe whose ranks write and read their parts of a checkpoint (rlvr.run.sharded), when distributed."""

    def sharded_state(self) -> dict[str, Any]: ...
    def load_sharded(self, checkpoint: Path) -> None: ...


@runtime_checkable
class KeepsBest(Protocol):
    """A recipe that can keep its best checkpoint (keep_best): the held-out accuracy and gain of an evaluation."""

    def compared(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]: ...


@runtime_checkable
class Closes(Protocol):
    """A recipe that holds more than memory (a sampling engine, a server): closed when the run ends, however."""

    def close(self) -> None: ...


OnStepEnd = Callable[[int, dict[str, float], StopFlag], None]


def launch(build: Callable[[Any, Path | None, World], Recipe], config: Any, *, resume: bool = False,
           on_step_end: OnStepEnd | None = None, overwrite: bool = False) -> dict[str, Any]:
    """Run `build(config, checkpoint, world)` to its end in config.output_dir: fresh (`overwrite`: over the run
    it holds), or resumed from the latest checkpoint (`build` loads that checkpoint's weights; the rest of its
    state is restored here). Under torchrun, this process is one rank of the world its environment describes."""
    from rlvr.models.devices import resolve_device, resolved_precision

    run_dir, world = Path(config.output_dir), World.from_env()
    config, said = resolved_precision(config)
    checkpoint, broken = resume_point(run_dir) if resume else (None, [])
    with run_lock(run_dir) if world.is_main else nullcontext():
        if checkpoint is not None:
            refuse_changes(config, checkpoint)
            if world.is_main:
                set_aside(broken, checkpoint)
        elif world.is_main:
            start_fresh(run_dir, overwrite, type(config), config.model.name)
        join(world, resolve_device(config.model.device), config.distributed.timeout_s)
        tag_warnings(world)
        configure_process(config.threads, config.seed)
        recipe = build(config, checkpoint, world)
        try:
            before = None
            if checkpoint is not None:
                state = load_state(checkpoint)
                recipe.load_state_dict(state)
                if (checkpoint / paths.SHARDS).is_dir():  # what several ranks wrote in parts (rlvr.run.sharded)
                    if not isinstance(recipe, Sharded):
                        raise UserError(f"cannot resume: {checkpoint} was written in parts by several ranks, "
                                        f"which a {recipe.label} run does not read; resume it as the run it was")
                    recipe.load_sharded(checkpoint)
                restore_rng(checkpoint, state, world)
                before = state["before"] if "before" in state else legacy_before(run_dir)
                _at_the_end(recipe, run_dir)
            return run_training(recipe, before=before, resumed=checkpoint is not None, on_step_end=on_step_end,
                                precision=said)
        finally:
            if isinstance(recipe, Closes):
                recipe.close()


def _at_the_end(recipe: Recipe, run_dir: Path) -> None:
    """A resumed run whose schedule (max_steps, or SFT's epochs) ends before the step it reached is refused;
    one that ends at it is told so: nothing is left to train (it saves, measures and sums itself up again)."""
    reached, total = recipe.step_count, recipe.schedule.total_steps
    if reached > total:
        raise past_the_end(run_dir, reached, total)
    if reached == total and recipe.world.is_main:
        print(f"rlvr: {run_dir} is at its last step ({total}) already: nothing to train; give a "
              f"{for_caller('--max-steps', 'max_steps')} "
              f"above {total} to train further", file=sys.stderr)


def run_training(recipe: Recipe, *, before: dict[str, Any] | None = None, resumed: bool = False,
                 on_step_end: OnStepEnd | None = None, precision: str | None = None) -> dict[str, Any]:
    """The loop itself, for a recipe built and (when `resumed`) restored already; `precision`, the run's
    precision in words, goes into its summary."""
    with run_lock(Path(recipe.config.output_dir)) if recipe.world.is_main else nullcontext():
        return _run(recipe, before, resumed, on_step_end, precision)


def _run(recipe: Recipe, before: dict[str, Any] | None, resumed: bool, on_step_end: OnStepEnd | None,
         precision: str | None) -> dict[str, Any]:
    run_dir, schedule, main = Path(recipe.config.output_dir), recipe.schedule, recipe.world.is_main
    if main:
        save_config(recipe.config, run_dir / paths.CONFIG)
        if resumed:
            truncate_jsonl(run_dir / paths.SAMPLES, recipe.step_count)
    writer = _writer(recipe, resumed) if main else None
    if main and precision is not None and recipe.step_count < schedule.total_steps:  # (once all checks passed)
        print(said_at_start(precision, getattr(recipe, "memory_plan", None)), file=sys.stderr)
    try:
        if not resumed and schedule.eval_before:
            first = _evaluate(recipe, "before")
            before = first.result if first is not None else None
            if writer is not None and first is not None:  # the trackers' curves start from it, at step 0
                writer.to_trackers(0, first.metrics)

        def save() -> Path:  # every rank gives its state; several ranks write their parts, rank 0 the rest
            state = {**recipe.state_dict(), "step": recipe.step_count, "before": before}
            if recipe.world.distributed and isinstance(recipe, Sharded):
                return save_sharded_checkpoint(run_dir, recipe.step_count, write=recipe.write_checkpoint,
                                               state=state, config=recipe.config, shards=recipe.sharded_state(),
                                               world=recipe.world, keep=schedule.keep_checkpoints)
            if main:
                save_checkpoint(run_dir, recipe.step_count, write=recipe.write_checkpoint, config=recipe.config,
                                state=state, keep=schedule.keep_checkpoints)
            barrier(recipe.world)
            return paths.step_dir(run_dir, recipe.step_count)

        stop, start = StopFlag(), time.perf_counter()
        best = best_kept.load(run_dir) if schedule.keep_best and resumed else None
        last, best = _loop(recipe, save, stop, on_step_end, writer, best)
        path = save()
        if stop.stop_requested and recipe.step_count < schedule.total_steps:
            return _stopped(recipe, path, stop)
        # the weights were just measured when the last step was an eval_every step: the same numbers
        reuse = last is not None and last.result["step"] == recipe.step_count
        measured = (last if reuse else _evaluate(recipe, "after")) if schedule.eval_after else None
        after = measured.result if measured is not None else None
        summary = recipe.summary(before, after, time.perf_counter() - start, path)
        if precision is not None:  # (and the machine it was chosen for: speeds and noise depend on it)
            from rlvr.models.devices import machine_name

            summary |= {"precision": precision, "machine": machine_name(recipe.config.model.device)}
        if schedule.keep_best:
            best = best if reuse else best_kept.consider(run_dir, after, best, save, main)
            summary["best"] = _best_summary(recipe, before, best, run_dir)
        if writer is not None:
            summary |= run_totals(run_dir)  # (skipped updates, and where the time went: said at the end)
            tqdm.write(time_line(summary["time"]))
            (run_dir / paths.SUMMARY).write_text(json.dumps(summary, indent=2))
            writer.to_trackers(recipe.step_count, measured.metrics if measured is not None else {})
            writer.summary(recipe.step_count, summary)
        return summary
    finally:
        if writer is not None:
            writer.close()


def _stopped(recipe: Recipe, checkpoint: Path, stop: StopFlag) -> dict[str, Any]:
    """The summary of a run stopped before its end (by a signal, `stopped_by` names it; by a caller, None)."""
    if recipe.world.is_main:
        tqdm.write(f"stopped at step {recipe.step_count}; checkpoint {checkpoint}; "
                   f"continue with: {resume_hint(recipe)}")
    return {"stopped_at": recipe.step_count, "checkpoint": str(checkpoint),
            "run_dir": str(Path(recipe.config.output_dir)), "stopped_by": stop.signal and SIGNALS[stop.signal]}


def _writer(recipe: Recipe, resumed: bool) -> MetricsWriter:
    """metrics.jsonl and the trackers of `logging.report_to` (SFT's older `tensorboard: false` drops TensorBoard)."""
    config, run_dir = recipe.config, Path(recipe.config.output_dir)
    names = [n for n in config.logging.report_to if n != "tensorboard" or getattr(config, "tensorboard", True)]
    resume_step = recipe.step_count if resumed else None
    trackers = open_trackers(names, run_dir, config=dataclasses.asdict(config), project=config.logging.project,
                             run_name=config.logging.run_name, group=config.logging.group, job=recipe.job,
                             resume_step=resume_step)
    return MetricsWriter(run_dir, resume_step=resume_step, trackers=trackers)


def _best_summary(recipe: Recipe, before: dict[str, Any] | None, best: best_kept.Best | None,
                  run_dir: Path) -> dict[str, Any] | None:
    """summary.json's `best`: the step chosen, where it is, its validation and held-out accuracy and gain."""
    if best is None:
        return None
    assert isinstance(recipe, KeepsBest)  # (keep_best is refused for the recipes that cannot: their configs)
    compared = recipe.compared(before, best.evaluation)
    untrained = best_kept.score_of(before)  # the untrained model is no candidate, but the bar to clear
    return {"step": best.step, "checkpoint": str(run_dir / best_kept.BEST),
            "validation": best.evaluation["validation"], **compared,
            "beats_untrained": None if untrained is None else best.score > untrained}


def _loop(recipe: Recipe, save: Callable[[], Path], stop: StopFlag, on_step_end: OnStepEnd | None,
          writer: MetricsWriter | None, best: best_kept.Best | None
          ) -> tuple[Evaluation | None, best_kept.Best | None]:
    """The steps, until the last or a stop; returns the latest held-out evaluation made on the way, and the
    best checkpoint (keep_best)."""
    schedule, run_dir, world = recipe.schedule, Path(recipe.config.output_dir), recipe.world
    bar = progress(total=schedule.total_steps, initial=recipe.step_count, desc=recipe.label, unit="step",
                   disable=not world.is_main)
    evaluation: Evaluation | None = None
    watch = SignalWatch()  # (steps in a row without a learning signal, said as they happen)
    try:
        # a rank waits for the others at the end of its step, so a signal never abandons a step there
        agreed = False  # the ranks' decision to stop, taken together at the end of each step
        with stop_on_signals(stop, distributed=world.distributed), deadline.exit_note(lambda: _kept(recipe)):
            # one process stops as soon as asked; a rank only on the agreed decision: a signal that lands
            # after it (on one rank) waits for the next step's, or that rank would leave the others behind
            while recipe.step_count < schedule.total_steps and not (agreed if world.distributed
                                                                    else stop.stop_requested):
                result = _step(recipe, save)
                if result is None:
                    break  # abandoned on a signal, rolled back: the run core saves and stops
                step, metrics = recipe.step_count, dict(result.metrics)
                if schedule.eval_every and step % schedule.eval_every == 0:
                    evaluation = _evaluate(recipe, f"step {step}")
                    metrics.update(evaluation.metrics if evaluation is not None else {})
                    if schedule.keep_best:
                        best = best_kept.consider(run_dir, evaluation.result if evaluation is not None else None,
                                                  best, save, world.is_main)
                if writer is not None:
                    writer.write(step, metrics)
                    said = watch.see(metrics)
                    if said:
                        tqdm.write(said, file=sys.stderr)
                bar.set_postfix(recipe.progress(metrics), refresh=False)
                bar.update(1)
                recorded = schedule.sample_every and step % schedule.sample_every == 0 and result.samples
                if recorded and writer is not None:
                    record_samples(run_dir, step, result.samples)
                    writer.samples(step, result.samples)
                if on_step_end is not None:
                    on_step_end(step, metrics, stop)
                agreed = any_across(stop.stop_requested, world)  # one rank's Ctrl-C or SIGTERM stops them all
                if agreed:
                    stop.request_stop()
                due = schedule.save_every and step % schedule.save_every == 0 and step < schedule.total_steps
                if due and not agreed:
                    save()
    finally:
        bar.close()
    return evaluation, best


def resume_hint(recipe: Recipe) -> str:
    """How to continue the recipe's run, for whoever called (the command, or Python: rlvr.errors.for_caller)."""
    run_dir = recipe.config.output_dir
    return for_caller(recipe.resume_hint.format(run_dir=run_dir),
                      f"the same call with resume=True (output_dir {str(run_dir)!r})")


def _kept(recipe: Recipe) -> str:
    """What a process that user code ends mid-step leaves behind (the last words of rlvr.deadline)."""
    run_dir = Path(recipe.config.output_dir)
    latest = paths.latest_checkpoint(run_dir)
    if latest is None:
        return "no checkpoint was saved yet"
    return f"the last checkpoint, {latest}, is kept: continue with {resume_hint(recipe)}"


def _step(recipe: Recipe, save: Callable[[], Path]) -> StepResult | None:
    """One step, or None when a signal abandoned it. A step that fails on a user mistake (a reward that
    throws, hangs past its limit or calls sys.exit) or is abandoned leaves the run as it was before the
    step: the recipe rolls back what it consumed (its prompt order), the RNG is put back here, and a
    failure saves the finished steps' work before it is reported."""
    done, rng = recipe.step_count, rng_state()
    try:
        return recipe.step()
    except StepAbandoned:
        set_rng_state(rng)
        return None
    except UserError:  # (data-parallel, the other ranks wait in a collective: the last checkpoint stands)
        if recipe.step_count == done and done > 0 and not recipe.world.distributed:
            set_rng_state(rng)
            path = save()  # the weights are those of the last finished step
            tqdm.write(f"progress saved to {path}; fix the problem and continue with "
                       f"{resume_hint(recipe)}")
        raise


def _evaluate(recipe: Recipe, when: str) -> Evaluation | None:
    """The recipe's held-out measurement of its weights as they are now, tied to the step they are at."""
    evaluation = recipe.evaluate()
    if evaluation is None:
        return None
    if recipe.world.is_main:
        tqdm.write(f"  {when}: {evaluation.line}")
    return dataclasses.replace(evaluation, result={"step": recipe.step_count, **evaluation.result})

