"""TRL-style reward functions used by the training tests (loaded by file path, like a user's would be)."""


def digit_share(completions, **kwargs):
    """Share of characters that are digits: a dense signal even a random model's samples vary on."""
    return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]


def explode(completions, **kwargs):
    raise RuntimeError("this reward is broken on purpose")


def has_digit(completions, **kwargs):
    """1 when the completion contains a digit: coarse, so some groups are all 0 or all 1."""
    return [float(any(ch.isdigit() for ch in c)) for c in completions]


def hang(completions, **kwargs):
    """Never returns on its own (a reward waiting on a server that went away)."""
    import time

    time.sleep(3600)


def hang_when_told(completions, **kwargs):
    """digit_share, until the file named by $RLVR_TEST_HANG exists: then it hangs (saying so in FILE.hanging)."""
    import os
    import time

    if os.path.exists(os.environ["RLVR_TEST_HANG"]):
        open(os.environ["RLVR_TEST_HANG"] + ".hanging", "w").close()
        time.sleep(3600)
    return digit_share(completions)


def interrupted_while_hanging(completions, **kwargs):
    """Ctrl-C arrives while this reward hangs."""
    import os
    import signal
    import time

    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(3600)


def exits(completions, **kwargs):
    import sys

    sys.exit(3)


def digit_share_but_not_the_second(completions, **kwargs):
    """digit_share, with None for the second completion of every group of 4 (a check that failed there)."""
    return [None if i % 4 == 1 else v for i, v in enumerate(digit_share(completions))]
