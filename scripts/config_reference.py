"""Write docs/config.md, the reference of every setting, from the config dataclasses' docstrings:

    .venv/bin/python scripts/config_reference.py

tests/test_config_reference.py fails while the page differs from what this writes."""

from pathlib import Path

from rlvr.config.reference import markdown

PAGE = Path(__file__).resolve().parents[1] / "docs" / "config.md"

if __name__ == "__main__":
    PAGE.write_text(markdown())
    print(f"wrote {PAGE}")
