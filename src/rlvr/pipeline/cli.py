"""`rlvr pipeline RECIPE.yaml [--output-dir DIR]`"""

from __future__ import annotations

import argparse


def add_pipeline_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("pipeline",
                              help="run a recipe's stages in order (sft, grpo, sample, rm), evaluating after each")
    p.add_argument("recipe", help="recipe YAML (see recipes/: tiny.yaml, r1_zero.yaml, r1.yaml, distill.yaml)")
    p.add_argument("--output-dir",
                   help="pipeline directory (default: the recipe's output_dir, or runs/pipeline-<name>)")
    return p


def run_pipeline_command(args: argparse.Namespace) -> int:
    from rlvr.pipeline.recipe import load_recipe

    load_recipe(args.recipe)  # a recipe's mistakes before torch and the models are imported
    from rlvr.pipeline.runner import run_pipeline

    summary = run_pipeline(args.recipe, args.output_dir)
    if "stopped_in" in summary:  # (a stage stopped by Ctrl-C or SIGTERM: 130 or 143, as the stage itself)
        from rlvr.run.stop import exit_code

        return exit_code(summary)
    print(f"\npipeline {summary['recipe']}: report in {summary['output_dir']}/report.md")
    for row in summary["stages"]:
        e = row.get("eval")
        score = (f"greedy {100 * e['greedy']['mean']:.1f}%  pass@1 {100 * e['pass@1']['mean']:.1f}%"
                 if e and e["greedy"] else "")
        print(f"  {row['stage']:16s} {row['kind']:6s} {score:34s} {row['result']}")
    return 0
