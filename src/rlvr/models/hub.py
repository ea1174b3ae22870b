"""A model name that is no folder and no name rlvr knows: found in the local Hugging Face cache, or on the Hub
(asked once, within 2 seconds), or one line naming rlvr's nearest names instead of transformers' retries (a
misspelled `smolm2` spent 70 s retrying the Hub and suggested nothing)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from difflib import get_close_matches
from pathlib import Path

HUB_TIMEOUT_S = 2.0


def path_problem(name: str) -> str | None:
    """Why `name`, written as a path (`./x`, `/x`, `~/x`, `a/b/c`), cannot be a model: it does not exist (a Hub
    id has one slash). Cheap: the command line asks it before torch loads.

    >>> path_problem("./no/such/model")
    'model path not found: ./no/such/model (give a checkpoint directory, a .gguf file, `smollm2` or `tiny`)'
    >>> path_problem("Qwen/Qwen2.5-0.5B") is None, path_problem("tiny") is None
    (True, True)
    """
    if not Path(name).expanduser().exists() and (name.startswith((".", "/", "~")) or name.count("/") > 1):
        return f"model path not found: {name} (give a checkpoint directory, a .gguf file, `smollm2` or `tiny`)"
    return None


def hub_problem(name: str, known: Sequence[str]) -> str | None:
    """Why `name` cannot load from the Hub (the words of a UserError), or None when it can or may (it is in the
    local cache, the Hub has it, or the Hub holds it gated and transformers will say what it needs)."""
    from huggingface_hub import HfApi, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError

    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return None
    except HFValidationError:  # (not a Hub id at all)
        pass
    nearest = get_close_matches(name, known, n=3, cutoff=0.5)
    fix = (f"did you mean {' or '.join(repr(n) for n in nearest)}?" if nearest else
           f"give a checkpoint folder, a .gguf file, one of {', '.join(known)}, or a Hub id")
    what = f"model {name!r} is no folder, no name rlvr knows and not in the local Hugging Face cache"
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return f"{what}, and HF_HUB_OFFLINE is set: {fix}"
    try:
        HfApi().model_info(name, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return None
    except (RepositoryNotFoundError, HFValidationError):
        return f"{what}, nor on the Hub: {fix}"
    except Exception as e:  # (no network, a proxy, the Hub down: whatever the HTTP client raises)
        return f"{what}, and the Hub could not be reached ({type(e).__name__}): {fix}"
    return None
