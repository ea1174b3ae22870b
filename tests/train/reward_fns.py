"""TRL-style reward functions used by the training tests (loaded by file path, like a user's would be)."""


def _text(completion):
    """TRL hands a completion over as text, or (chat prompts) as [{"role": "assistant", "content": text}]."""
    return completion if isinstance(completion, str) else completion[0]["content"]


def digit_share(completions, **kwargs):
    """Share of characters that are digits: a dense signal even a random model's samples vary on."""
    return [sum(ch.isdigit() for ch in _text(c)) / max(1, len(_text(c))) for c in completions]


def explode(completions, **kwargs):
    raise RuntimeError("this reward is broken on purpose")


def has_digit(completions, **kwargs):
    """1 when the completion contains a digit: coarse, so some groups are all 0 or all 1."""
    return [float(any(ch.isdigit() for ch in _text(c))) for c in completions]


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


SEEN = []  # what the TRL-style rewards below were called with


def conversational_digits(prompts, completions, solution, **kwargs):
    """Written for TRL's conversational form, as open-r1's rewards are: indexes the assistant message,
    and reads the gold answer as `solution`."""
    SEEN.append({"prompts": prompts, "completions": completions, "solution": solution})
    return [float(solution[i] in c[0]["content"]) for i, c in enumerate(completions)]


def get_length_reward(scale, cap=64):
    """A reward factory, like TRL's get_soft_overlong_punishment: the config's params go to it once."""
    def length_reward(completions, **kwargs):
        return [scale * min(len(_text(c)), cap) for c in completions]
    return length_reward


def get_nothing(scale=1.0):
    """A factory that forgets to return its reward."""


def has_digit_but_rank_1_fails(completions, **kwargs):
    """has_digit, except on rank 1 of a torchrun world, where it raises (a rank that fails alone)."""
    import os

    if os.environ.get("RANK") == "1":
        raise RuntimeError("this rank's reward is broken on purpose")
    return has_digit(completions)


def none_for_odd_answers(completions, answer, **kwargs):
    """digit_share, but None (TRL's "does not apply") for the completions of problems with an odd answer."""
    return [None if int(a) % 2 else v for a, v in zip(answer, digit_share(completions))]


def nan_for_odd_answers(completions, answer, **kwargs):
    """The same with NaN, which some users write instead of None."""
    return [float("nan") if v is None else v for v in none_for_odd_answers(completions, answer)]


def none_for_all(completions, **kwargs):
    return [None] * len(completions)


def swallows_interrupts(completions, **kwargs):
    """A bare `except:` around each completion's (slow) check: it catches the time limit's interruption too."""
    import time

    values = []
    for _ in completions:
        try:
            time.sleep(30)
        except:  # noqa: E722
            pass
        values.append(0.0)
    return values


def ignores_ctrl_c(completions, **kwargs):
    """Sets SIGINT to SIG_IGN (as `nohup`-minded code does), then hangs."""
    import signal
    import time

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(3600)


STALLS = []


def has_digit_but_rank_1_stalls(completions, **kwargs):
    """has_digit, except that on rank 1 of `rlvr --nproc 2` its second call stalls (a reward waiting on a
    server that went quiet) until rank 0 has given up waiting for it (distributed.timeout_s) and exited."""
    import os
    import time

    STALLS.append(1)
    if os.environ.get("RANK") == "1" and len(STALLS) == 2:
        torchrun = os.getppid()  # both ranks are its children (Linux lists them): wait until rank 1 is alone
        while len(open(f"/proc/{torchrun}/task/{torchrun}/children").read().split()) > 1:
            time.sleep(0.2)
    return has_digit(completions)


def uninterruptible_when_told(completions, **kwargs):
    """digit_share, until the file named by $RLVR_TEST_HANG exists: then it hangs where no interruption reaches
    it (as C code that never returns to Python would), saying so in FILE.hanging."""
    import os
    import signal
    import time

    if os.path.exists(os.environ["RLVR_TEST_HANG"]):
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2, signal.SIGINT, signal.SIGTERM])
        open(os.environ["RLVR_TEST_HANG"] + ".hanging", "w").close()
        time.sleep(3600)
    return digit_share(completions)


def always_one(completions, **kwargs):
    return [1.0] * len(completions)


def always_zero(completions, **kwargs):
    return [0.0] * len(completions)


def needs_level(completions, level, **kwargs):
    """Reads the `level` column: a required keyword, so a run whose rows have no `level` is refused."""
    return [float(lv) for lv in level]


def level_if_given(completions, level=None, **kwargs):
    """Reads the `level` column when the rows have one: optional, so rows without it are fine."""
    return [0.0 if level is None or lv is None else float(lv) for lv in (level or [None] * len(completions))]


def interrupts(completions, **kwargs):
    """Raises KeyboardInterrupt itself (no one pressed Ctrl-C)."""
    raise KeyboardInterrupt


def blanks_the_completions(completions, **kwargs):
    """Scores 0, after clearing the list it was given in place."""
    scores = [0.0] * len(completions)
    completions.clear()
    return scores


def digit_share_then_os_exit(completions, **kwargs):
    """digit_share, but its $RLVR_TEST_EXIT_AT-th call ends the process with os._exit(5) (a C library aborting, a
    user's own hard exit): nothing runs after it, no line, no finally."""
    import os

    calls = os.environ.get("RLVR_TEST_EXIT_AT")
    if calls:
        counter = os.environ["RLVR_TEST_EXIT_COUNT"]
        seen = (int(open(counter).read()) if os.path.exists(counter) else 0) + 1
        open(counter, "w").write(str(seen))
        if seen == int(calls):
            os._exit(5)
    return digit_share(completions)


def shaped_by_step(completions, trainer_state, log_metric, log_extra, **kwargs):
    """TRL's habits: a reward that reads the trainer's state, logs what it saw, and logs a column of its reasons."""
    texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
    log_metric("seen/global_step", trainer_state.global_step)
    log_metric("seen/max_steps", trainer_state.max_steps)
    log_metric("seen/epoch", trainer_state.epoch)
    log_extra("chars", [len(t) for t in texts])
    return [float(trainer_state.global_step >= 1) for _ in completions]


def logs_loss(completions, log_metric, **kwargs):
    """A metric logged under a name rlvr logs itself."""
    log_metric("loss", 1.0)
    return [1.0 for _ in completions]


def needs_environments(completions, environments, **kwargs):
    """TRL's `environments` habit (rlvr passes none)."""
    return [1.0 for _ in completions]
