"""`dambreak --version`, and Taichi's start-up lines only with --verbose.

Each command runs in a fresh process: Taichi prints its version line when first imported, so
only a new interpreter shows what a user sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver import __version__

ROOT = Path(__file__).resolve().parents[1]
TINY_RUN = ["run", "configs/quick.toml", "--backend", "cpu", "--set", "particles.dp=0.08"]
TINY_RUN += ["--set", "time.end=0.01", "--set", "time.output_interval=0.01"]


def dambreak(*args: str) -> subprocess.CompletedProcess[str]:
    """This checkout's `dambreak ARGS` in a new process, Taichi's switch left to the command."""
    env = {k: v for k, v in os.environ.items() if k != "ENABLE_TAICHI_HEADER_PRINT"}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "solver.cli", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--help"], 0), (["run", "--help"], 0), (["run", "nowhere.toml"], 2)],
)
def test_no_taichi_banner(args: list[str], code: int) -> None:
    done = dambreak(*args)
    assert done.returncode == code, done.stderr
    assert "[Taichi]" not in done.stdout + done.stderr


def test_version() -> None:
    done = dambreak("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"dambreak {__version__}\n"
    assert done.stderr == ""


def test_verbose_shows_the_version_line() -> None:
    done = dambreak("--verbose", "run", "nowhere.toml")
    assert done.returncode == 2, done.stderr
    assert "[Taichi] version" in done.stdout


def test_a_run_names_its_backend_in_our_words_only(tmp_path: Path) -> None:
    quiet = dambreak(*TINY_RUN, "--out", str(tmp_path / "quiet"))
    assert quiet.returncode == 0, quiet.stderr
    assert "[Taichi]" not in quiet.stdout + quiet.stderr
    assert "case quick on cpu (" in quiet.stderr
    verbose = dambreak("--verbose", *TINY_RUN, "--out", str(tmp_path / "verbose"))
    assert verbose.returncode == 0, verbose.stderr
    assert "[Taichi] Starting on arch=" in verbose.stdout
