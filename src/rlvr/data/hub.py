"""An `hf:` data source the Hub cannot give now: told in about 2 seconds instead of `datasets`' retries.

Offline, `datasets.load_dataset("openai/gsm8k")` retries the Hub five times over about 30 seconds before it
fails (measured here: `rlvr eval` with no network, 2026-12-01). A dataset in neither local cache (the Hub's
download cache, `datasets`' own) is asked of the Hub once, within 2 seconds (rlvr.models.hub does the same for
models); a cached one, or one under HF_HUB_OFFLINE / HF_DATASETS_OFFLINE, is left to `datasets`.
"""

from __future__ import annotations

import os
from pathlib import Path

HUB_TIMEOUT_S = 2.0  # (as rlvr.models.hub asks of models)


def dataset_problem(name: str) -> str | None:
    """Why dataset `name` (owner/name) cannot load from the Hub now, or None when it can or may."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError

    if _offline() or _cached(name):
        return None
    try:
        HfApi().dataset_info(name, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:  # (`datasets` says what access it needs)
        return None
    except (RepositoryNotFoundError, HFValidationError):
        return "the Hub has no such dataset (check the name)"
    except Exception as e:  # (no network, a proxy, the Hub down: whatever the HTTP client raises)
        return f"it is not in the local cache and the Hub could not be reached ({type(e).__name__})"
    return None


def _offline() -> bool:
    return any(os.environ.get(v, "") not in ("", "0") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _cached(name: str) -> bool:
    """Whether either cache holds anything of `name`: then `datasets` may load it without the Hub."""
    from huggingface_hub import constants

    try:
        from datasets import config

        home = Path(config.HF_DATASETS_CACHE)
    except (ImportError, AttributeError):
        home = Path(constants.HF_HOME) / "datasets"
    hub = Path(constants.HF_HUB_CACHE) / f"datasets--{name.replace('/', '--')}"
    return hub.exists() or (home / name.replace("/", "___")).exists()
