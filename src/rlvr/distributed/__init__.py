"""Distribution, apart from the run loop: the processes of a run and how the model is spread over them.

    world.py      the ranks (one, or several under torchrun on torch.distributed): collectives, sharding a
                  batch's prompts over the ranks
    parallel.py   the model over the ranks (`distributed.strategy`): DDP or FSDP2, behind the policy handle
    launcher.py   `--nproc N`: the same command on N processes of this machine
    torchrun.py   torchrun as `--nproc` starts it, its failure report cut to one line

Nothing is imported here: import from the modules.
"""
