"""`rlvr sft`: supervised fine-tuning with the loss on completion tokens only (docs/sft.md).

    data.py      rows (prompt/completion or messages) -> checked, split, SFTExample(input_ids, labels)
    masking.py   which tokens are trained: completions / assistant turns and their end-of-turn token
    packing.py   a step's examples -> micro-batches, optionally packed with block-diagonal attention
    loss.py      Σ NLL of the trained tokens; held-out loss
    train.py     train_sft(config): the loop, checkpoints, resume, summary
"""

from rlvr.sft.data import SFTData, SFTExample, prepare_data, read_rows
from rlvr.sft.masking import IGNORE
from rlvr.sft.train import resume_config, train_sft

__all__ = ["IGNORE", "SFTData", "SFTExample", "prepare_data", "read_rows", "resume_config", "train_sft"]
