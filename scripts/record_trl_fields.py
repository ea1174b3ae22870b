"""Write src/rlvr/trl/recorded.py: every init field of TRL's GRPOConfig with its default, read from the
installed TRL. rlvr.trl refuses a TRL argument it does not support only when it is set to a value other than
TRL's default, so it needs the defaults without TRL installed. Run after upgrading TRL, then review the diff:

    .venv/bin/python scripts/record_trl_fields.py
"""

import ast
import dataclasses
import sys
from pathlib import Path

import trl
from trl import GRPOConfig

OUT = Path(__file__).resolve().parents[1] / "src" / "rlvr" / "trl" / "recorded.py"


def default(field: dataclasses.Field) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def main() -> int:
    rows = []
    for field in dataclasses.fields(GRPOConfig):
        if not field.init or field.name.startswith("_"):
            continue
        value = default(field)
        value = getattr(value, "value", value)  # (an enum's value)
        if ast.literal_eval(repr(value)) != value:
            print(f"{field.name}: default {value!r} is not a literal", file=sys.stderr)
            return 1
        rows.append(f"    {field.name!r}: {value!r},")
    OUT.write_text(
        f'"""TRL {trl.__version__}\'s GRPOConfig fields and their defaults (written by scripts/record_trl_fields.py;\n'
        'do not edit). rlvr.trl takes a TRL argument rlvr does not support as long as it keeps this default."""\n\n'
        f'TRL_VERSION = {trl.__version__!r}\n\nDEFAULTS: dict[str, object] = {{\n' + "\n".join(rows) + "\n}\n")
    print(f"{len(rows)} fields of TRL {trl.__version__} -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
