"""`rlvr eval --model M --data D [--samples n] [--k 1,4,16,64] [--output-dir DIR] ...`"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlvr.config import EvalConfig
from rlvr.distributed.launcher import is_main_rank
from rlvr.errors import Interrupted, UserError

_DEFAULTS = EvalConfig()
# command-line option -> config key (the rest have the same name)
_KEYS = {"model": "model.name", "data": "data.name", "data_dir": "data.dir", "limit": "data.limit",
         "difficulty": "data.difficulty", "template": "data.template", "system_prompt": "data.system_prompt",
         "few_shot": "data.few_shot", "instruction": "data.instruction", "reward": "reward.name",
         "correct_at": "reward.correct_at",
         "temperature": "generation.temperature", "top_p": "generation.top_p",
         "max_new_tokens": "generation.max_new_tokens"}


def add_eval_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval", help="pass@1, pass@k, maj@k and best-of-N of a model on a benchmark "
                     "(gsm8k, math500, aime24, humaneval, a task, a file)")
    p.add_argument("--config", help="YAML file of EvalConfig settings")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set generation.top_k=20 (repeatable)")
    p.add_argument("--model",
                   help="tiny, smollm2, a .gguf, a model or checkpoint directory, or a hub id (default smollm2)")
    p.add_argument("--data",
                   help="gsm8k, math500, aime24, humaneval, a built-in task, or a .jsonl/.parquet file (default gsm8k)")
    p.add_argument("--data-dir", help="folder with local benchmark copies (<dir>/gsm8k/test.jsonl, ...); "
                                      "default: the public datasets")
    p.add_argument("--limit", type=int, help="the first N problems only")
    p.add_argument("--samples", type=int,
                   help=f"completions sampled per problem, n (default {_DEFAULTS.samples}; 0 = the greedy one only)")
    p.add_argument("--k", type=_int_list,
                   help="k values for pass@k and maj@k, e.g. 1,4,16,64 (default: those <= samples, and samples)")
    p.add_argument("--temperature", type=float, help="default 0.6, as DeepSeek-R1")
    p.add_argument("--top-p", type=float, help="default 0.95, as DeepSeek-R1")
    p.add_argument("--max-new-tokens", type=int, help="completion budget (default: the benchmark's)")
    p.add_argument("--template", help="chat, plain, r1_zero, or a string with {prompt} (default: chat)")
    p.add_argument("--system-prompt", help="system prompt text")
    p.add_argument("--no-few-shot", dest="few_shot", action="store_false", default=None,
                   help="ask a built-in task's questions alone, without the example exchange training shows")
    p.add_argument("--instruction", help="a line added after every question (default: R1's step-by-step and "
                                         "\\boxed{} instruction for gsm8k, math500, aime24; none for tasks and files)")
    p.add_argument("--no-instruction", dest="instruction", action="store_const", const="",
                   help="ask the questions as they are, without the benchmark's instruction")
    p.add_argument("--reward", help="judge the answers with your reward, file.py:function or module:function "
                                    "(data without `answer` or tests)")
    p.add_argument("--correct-at", type=float,
                   help="with --reward: the score from which an answer counts as correct (default 1.0)")
    p.add_argument("--no-greedy", dest="greedy", action="store_false", default=None,
                   help="skip the greedy completion per problem")
    p.add_argument("--reward-model", help="reward model directory (rlvr rm) for best-of-N")
    p.add_argument("--process-reward-model", help="process reward model directory for best-of-N")
    p.add_argument("--budgets", type=_int_list, help="token budgets for the thinking-length curve, e.g. 64,128,256")
    p.add_argument("--batch-size", type=int, help="completions decoded together (default 64)")
    p.add_argument("--seed", type=int)
    p.add_argument("--difficulty", type=int, help="difficulty of a built-in task")
    p.add_argument("--output-dir", help=f"results directory (default {_DEFAULTS.output_dir}); re-running resumes")
    p.add_argument("--threads", type=int, help="CPU threads (0 = all)")
    return p


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 1,4,16, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def named_benchmark_exists(model: str, data: str) -> None:
    """The model path and the benchmark (or data file) a command names, checked before torch loads (seconds)."""
    from rlvr.evaluate.benchmarks import benchmark_problem
    from rlvr.run.options import named_paths_exist

    named_paths_exist(model, [])
    problem = benchmark_problem(data)
    if problem:
        raise UserError(problem)


def run_eval_command(args: argparse.Namespace) -> int:
    from rlvr.config import load_command_config

    if args.correct_at is not None and not args.reward:
        raise UserError("--correct-at is the score from which your reward counts an answer correct: give the "
                        "reward with --reward file.py:function")
    options = {k: v for k, v in vars(args).items() if k not in ("command", "config", "overrides", "nproc")}
    keys = {_KEYS.get(k, k): v for k, v in options.items()}
    from rlvr.run.directory import refuse_another_commands_config

    refuse_another_commands_config(EvalConfig, args.config, "rlvr eval")
    config = load_command_config(EvalConfig, args.config, args.overrides, **keys)
    named_benchmark_exists(config.model.name, config.data.name)
    from rlvr.evaluate.report import headline  # torch and the models only once the config is known to be sound
    from rlvr.evaluate.runner import run_eval

    try:
        summary = run_eval(config)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; finished problems are saved in {config.output_dir}: "
                        "run the same command to resume") from None
    if not is_main_rank():  # under torchrun, rank 0 reports
        return 0
    s = summary["settings"]
    print(f"\n{s['benchmark']} · {s['model']} · {summary['strict']['problems']} problems · n={s['samples']} · "
          f"T={s['temperature']} top-p={s['top_p']} · {s['max_new_tokens']} tokens · {s['template']} template")
    width = max(len(m) for m, _, _ in headline(summary))
    print(f"  {'':{width}s}  {'strict':22s}  lenient")
    for metric, strict, lenient in headline(summary):
        print(f"  {metric:{width}s}  {strict:22s}  {lenient}")
    plot = ", curves.png" if (Path(config.output_dir) / "curves.png").exists() else ""
    print(f"results: {Path(config.output_dir) / 'summary.json'}, samples.jsonl, report.md{plot}")
    return 0


def add_compare_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``compare`` to the ``rlvr`` command's subparsers; run it with `run_compare`."""
    p = subparsers.add_parser("compare", help="a run's held-out gain over its control run (rlvr train --control "
                                              "random), paired, with a 95%% interval")
    p.add_argument("run", help="the run's directory")
    p.add_argument("control", help="the control run's directory (the same config, with --control)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def run_compare(args: argparse.Namespace) -> int:
    import json

    from rlvr.evaluate.compare import compare_runs, describe

    result = compare_runs(Path(args.run), Path(args.control))
    print(json.dumps(result, indent=2) if args.json else describe(result, Path(args.run), Path(args.control)))
    return 0
