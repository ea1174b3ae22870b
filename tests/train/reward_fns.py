"""TRL-style reward functions used by the training tests (loaded by file path, like a user's would be)."""


def digit_share(completions, **kwargs):
    """Share of characters that are digits: a dense signal even a random model's samples vary on."""
    return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]


def explode(completions, **kwargs):
    raise RuntimeError("this reward is broken on purpose")


def has_digit(completions, **kwargs):
    """1 when the completion contains a digit: coarse, so some groups are all 0 or all 1."""
    return [float(any(ch.isdigit() for ch in c)) for c in completions]
