"""Rejection sampling and distillation data: ``rlvr sample`` (docs/sampling.md).

    rlvr sample --model TEACHER --data train.jsonl --output sft.jsonl    # sample, verify, filter
    rlvr sft --model STUDENT --data sft.jsonl                            # distillation's second half

- filters.py: the pure filters (verdict, length, format, de-duplication, max_per_prompt) and `filter_samples`
- dataset.py: `sft_row`, the atomic JSONL writer, and sample_summary.json
- runner.py: `run_sample(config)`: rlvr eval's resumable sampler, then the filters
- cli.py: ``rlvr sample``

Nothing heavy is imported here, so ``rlvr`` starts fast whichever command it runs.
"""
