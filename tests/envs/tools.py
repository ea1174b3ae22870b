"""Functions as a model's tools (rlvr.envs.function_tools), named by the tests as tests/envs/tools.py:NAME."""


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


async def lookup(word: str) -> dict:
    """Look a word up.

    Args:
        word: the word to look up
    """
    return {"word": word, "letters": len(word)}


def divide(a: float, b: float) -> float:
    """Divide a by b.

    Args:
        a: the dividend
        b: the divisor
    """
    return a / b


def undocumented(x):
    return x
