"""The README a user reads and the docs site: the quick start runs as printed (on the tiny model), the README
stays short, its links resolve, and `mkdocs build --strict` passes (a broken link or API reference fails it)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.M | re.S)


def blocks():
    """(language, title or None, text) of every fenced block of the README."""
    found = []
    for language, info, text in FENCE.findall(README):
        title = re.search(r'title="([^"]+)"', info)
        found.append((language, title.group(1) if title else None, text))
    return found


def on_tiny(text):
    """The quick start as printed, on the tiny model for 2 steps (the one change the test makes)."""
    return text.replace("smollm2", "tiny").replace("max_steps: 10", "max_steps: 2").replace("max_steps=10",
                                                                                            "max_steps=2")


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 150


def test_the_readme_links_resolve():
    missing = [link for link in re.findall(r"\]\(([^)#]+)", README)
               if not link.startswith("http") and not (ROOT / link).exists()]
    assert not missing


def test_the_quick_start_runs_as_printed_from_the_command_line_and_from_python(tmp_path):
    files = [(title, text) for _, title, text in blocks() if title]
    assert [t for t, _ in files] == ["mydata.py", "myreward.py", "myrun.yaml"]
    for title, text in files:
        (tmp_path / title).write_text(on_tiny(text))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    (command,) = [text.strip() for language, title, text in blocks() if "rlvr train --config myrun.yaml" in text]
    make_data, train = command.split(" && ")
    assert make_data == ".venv/bin/python mydata.py"
    subprocess.run([sys.executable, "mydata.py"], cwd=tmp_path, check=True, timeout=60)
    assert [len((tmp_path / f).read_text().splitlines()) for f in ("mydata.jsonl", "myeval.jsonl")] == [70, 30]
    program, *arguments = train.split()
    assert program == ".venv/bin/rlvr"
    cli = subprocess.run([str(Path(sys.executable).with_name("rlvr")), *arguments], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "before: strict" in cli.stdout + cli.stderr and "after: strict" in cli.stdout + cli.stderr  # (held out)
    (python,) = [text for language, title, text in blocks() if language == "python" and "from rlvr import" in text]
    (tmp_path / "quick_start.py").write_text(on_tiny(python))
    done = subprocess.run([sys.executable, "quick_start.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    for run in ("sums", "sums-py"):
        assert (tmp_path / "runs" / run / "summary.json").is_file()


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="MkDocs is not installed (pip install -e '.[dev]')")
def test_the_docs_site_builds_strict(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "GRPOTrainer" in (tmp_path / "site" / "api" / "index.html").read_text()
