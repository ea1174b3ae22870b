"""Experiment trackers: a run's numbers sent where its users already look (`logging.report_to`).

    tensorboard   run_dir/tensorboard, torch's SummaryWriter
    wandb         Weights & Biases: wandb.init(project, name, group, job_type, config); WANDB_MODE=offline
                  keeps it on disk (run_dir/wandb), `wandb sync` uploads it later
    trackio       Hugging Face trackio: a local store (TRACKIO_DIR), `trackio show` opens it
    mlflow        MLflow: a run of the `logging.project` experiment in MLFLOW_TRACKING_URI's store

Each tracker gets the same things, from rank 0 only: the effective config once; every number of each
metrics.jsonl line at its step; the sample groups as a table (step, prompt, completion, reward, advantage)
every `sample_every` steps; the held-out evaluations (eval/... at step 0, every `eval_every` steps and
at the end); and the closing summary. A resumed run continues the same tracker run: the ids are kept in
run_dir/trackers.json (steps a tracker already holds past the checkpoint stay as it has them).
Tracker packages are optional extras; a missing one is a one-line error naming the extra.
"""

from __future__ import annotations

import importlib
import json
import math
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from rlvr.config.yaml_files import flat_settings
from rlvr.errors import UserError

IDS = "trackers.json"  # in the run directory: the tracker runs this run logs to, for --resume
# where each tracker takes its settings from, for the error when one cannot start
SETTINGS = {
    "tensorboard": "check that output_dir is writable",
    "wandb": "run `wandb login`, or set WANDB_MODE=offline",
    "trackio": "check TRACKIO_DIR (the local store) or the Space you log to",
    "mlflow": "set MLFLOW_TRACKING_URI to a server (http://...), to sqlite:///mlflow.db with the full `mlflow` "
              "package, or to file:./mlruns with MLFLOW_ALLOW_FILE_STORE=true",
}


class Tracker(Protocol):
    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def samples(self, step: int, rows: list[dict[str, Any]]) -> None: ...
    def summary(self, step: int, values: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


def open_trackers(names: Sequence[str], run_dir: Path, *, config: dict[str, Any], project: str, run_name: str | None,
                  group: str | None, job: str, resume_step: int | None) -> list[Tracker]:
    """One open tracker per name in `names` (see the module docstring), for the run in `run_dir`."""
    ids_path = run_dir / IDS
    ids = json.loads(ids_path.read_text()) if resume_step is not None and ids_path.is_file() else {}
    name = run_name or run_dir.resolve().name
    starts: dict[str, Callable[[], Tracker]] = {
        "tensorboard": lambda: TensorBoard(run_dir, resume_step),
        "wandb": lambda: WandB(run_dir, ids, config=config, project=project, name=name, group=group, job=job),
        "trackio": lambda: Trackio(config=config, project=project, name=name, group=group,
                                   resume=resume_step is not None),
        "mlflow": lambda: MLflow(ids, config=config, project=project, name=name, group=group, job=job),
    }
    opened: list[Tracker] = []
    for tracker in names:
        if tracker not in starts:
            raise UserError(f"logging.report_to names {tracker!r}: choose from {', '.join(starts)}")
        try:
            opened.append(starts[tracker]())
        except Exception as e:  # the tracker's own refusal (no login, a store it cannot open): its words, one line
            for started in opened:
                started.close()
            if isinstance(e, UserError):
                raise
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UserError(f"{tracker} could not start a run: {first} ({SETTINGS[tracker]}; or drop {tracker} "
                            "from logging.report_to)") from None
    if ids:
        ids_path.write_text(json.dumps(ids, indent=2))
    return opened


def numbers(values: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of a nested mapping, keyed by their path ("after/strict/accuracy").

    >>> numbers({"loss": 0.5, "note": "x", "after": {"strict": {"accuracy": 0.9, "n": 100}}, "kl": float("nan")})
    {'loss': 0.5, 'after/strict/accuracy': 0.9, 'after/strict/n': 100}
    """
    out: dict[str, float] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(numbers(value, f"{prefix}{key}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[prefix + key] = value
    return out


def sample_rows(step: int, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per completion of the step's sample groups.

    >>> sample_rows(3, [{"prompt": "1+1?", "completions": ["2", "3"], "rewards": [1.0, 0.0],
    ...                  "advantages": [1.0, -1.0]}])[1]
    {'step': 3, 'prompt': '1+1?', 'completion': '3', 'reward': 0.0, 'advantage': -1.0}
    """
    return [{"step": step, "prompt": group["prompt"], "completion": text, "reward": reward, "advantage": advantage}
            for group in groups
            for text, reward, advantage in zip(group["completions"], group["rewards"], group["advantages"])]


COLUMNS = ("step", "prompt", "completion", "reward", "advantage")


def _require(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"logging.report_to includes {extra} but {module} is not installed: "
                        f"pip install 'rlvr[{extra}]' (or drop {extra} from logging.report_to)") from None


class TensorBoard:
    def __init__(self, run_dir: Path, resume_step: int | None):
        from torch.utils.tensorboard import SummaryWriter

        from rlvr import paths

        purge = None if resume_step is None else resume_step + 1  # events past the checkpoint are dropped
        self.writer = SummaryWriter(str(run_dir / paths.TENSORBOARD), purge_step=purge)

    def metrics(self, step: int, values: dict[str, float]) -> None:
        for key, value in numbers(values).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        cells = lambda row: " | ".join(_cell_text(cell) for cell in row)  # noqa: E731
        table = "\n".join([" | ".join(COLUMNS), " | ".join("---" for _ in COLUMNS), *map(cells, table_data(rows))])
        self.writer.add_text("samples", table, step)

    def summary(self, step: int, values: dict[str, Any]) -> None:
        self.writer.add_text("summary", "```\n" + json.dumps(values, indent=2) + "\n```", step)

    def close(self) -> None:
        self.writer.close()


def _cell_text(cell: Any) -> str:
    """A sample table's cell as Markdown table text; None is a reward missing (rlvr.rewards.batch.unscored)."""
    return ("unscored" if cell is None else str(cell)).replace("|", "\\|").replace("\n", " ")


def table_data(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """The sample rows as a table's data, cell by cell in COLUMNS order."""
    return [[row[c] for c in COLUMNS] for row in rows]


class _LogsRuns:
    """W&B and trackio share one API: `module.init(...)` a run, `run.log(values, step=)`, `module.Table`,
    `run.finish()`."""

    module: Any
    run: Any

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.run.log(numbers(values), step=step)

    def samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        self.run.log({"samples": self.module.Table(columns=list(COLUMNS), data=table_data(rows))}, step=step)

    def close(self) -> None:
        self.run.finish()


class WandB(_LogsRuns):
    def __init__(self, run_dir: Path, ids: dict[str, Any], *, config: dict[str, Any], project: str, name: str,
                 group: str | None, job: str):
        self.module = _require("wandb", "wandb")
        ids.setdefault("wandb", secrets.token_hex(4))  # W&B run ids are [a-z0-9]
        self.run = self.module.init(project=project, name=name, group=group, job_type=job, config=config,
                                    dir=str(run_dir), id=ids["wandb"], resume="allow")

    def summary(self, step: int, values: dict[str, Any]) -> None:
        self.run.summary.update(numbers(values))


class Trackio(_LogsRuns):
    def __init__(self, *, config: dict[str, Any], project: str, name: str, group: str | None, resume: bool):
        self.module = _require("trackio", "trackio")
        self.run = self.module.init(project=project, name=name, group=group, config=config,
                                    resume="allow" if resume else "never", auto_log_cpu=False, auto_log_gpu=False)

    def summary(self, step: int, values: dict[str, Any]) -> None:
        # trackio keeps no separate summary: the closing numbers are logged under summary/ at the last step
        self.run.log({f"summary/{key}": value for key, value in numbers(values).items()}, step=step)


class MLflow:
    def __init__(self, ids: dict[str, Any], *, config: dict[str, Any], project: str, name: str,
                 group: str | None, job: str):
        self.mlflow = _require("mlflow", "mlflow")
        self.mlflow.set_experiment(project)
        tags = {"rlvr.job": job, **({"rlvr.group": group} if group else {})}
        self.run = self.mlflow.start_run(run_id=ids.get("mlflow"), run_name=None if "mlflow" in ids else name,
                                         tags=tags)
        if "mlflow" not in ids:
            params = {key: str(value)[:6000] for key, value in flat_settings(config).items()}
            items = list(params.items())
            for i in range(0, len(items), 100):  # MLflow takes at most 100 parameters per call
                self.mlflow.log_params(dict(items[i:i + 100]))
        ids["mlflow"] = self.run.info.run_id

    def metrics(self, step: int, values: dict[str, float]) -> None:
        # MLflow's metric names allow letters, digits and _ - . / and space: the rest becomes _
        self.mlflow.log_metrics({_mlflow_key(k): v for k, v in numbers(values).items()}, step=step)

    def samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        self.mlflow.log_dict({"columns": list(COLUMNS), "data": table_data(rows)},
                             f"samples/step_{step:06d}.json")

    def summary(self, step: int, values: dict[str, Any]) -> None:
        self.mlflow.log_dict(values, "summary.json")
        self.mlflow.log_metrics({_mlflow_key(f"summary/{k}"): v for k, v in numbers(values).items()}, step=step)

    def close(self) -> None:
        self.mlflow.end_run()


def _mlflow_key(key: str) -> str:
    """A metric name MLflow takes: letters, digits and _ - . / and space, with no empty, "." or ".." part (MLflow
    refuses names that would resolve to another path: a reward named by an absolute file path gives "//").

    >>> _mlflow_key("reward//home/me/r.py:check/mean"), _mlflow_key("reward/../r.py:f/mean")
    ('reward/home/me/r.py_check/mean', 'reward/_/r.py_f/mean')
    """
    safe = "".join(c if c.isalnum() or c in "_-./ " else "_" for c in key)
    return "/".join("_" if part in (".", "..") else part for part in safe.split("/") if part)
