"""Lint and types on the grader's own code, so that CI's `nox -s tests` runs them (issue 17 item 6).

ruff (lint and format) and mypy over grader/ and noxfile.py, with pyproject.toml's [tool.ruff] and [tool.mypy]:
the same checks as `nox -s lint` and .pre-commit-config.yaml. nox -s tests installs both (noxfile.py TEST_DEPS,
pinned in constraints.txt); where they are not installed, the tests skip and say so.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ["grader", "noxfile.py"]


def _run(tool: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} not installed (nox -s tests installs it: noxfile.py TEST_DEPS, pinned in constraints.txt)")
    return subprocess.run(
        [sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=timeout
    )


def test_ruff_check_is_clean():
    r = _run("ruff", "check", "--no-cache", *TARGETS)
    assert r.returncode == 0, f"ruff check {' '.join(TARGETS)}:\n{r.stdout[-6000:]}{r.stderr[-2000:]}"


def test_ruff_format_is_clean():
    r = _run("ruff", "format", "--check", "--no-cache", *TARGETS)
    assert r.returncode == 0, (
        f"ruff format --check {' '.join(TARGETS)} (run `ruff format {' '.join(TARGETS)}`):\n"
        f"{r.stdout[-6000:]}{r.stderr[-2000:]}"
    )


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_mypy_is_clean(tmp_path):
    # Its files come from pyproject.toml's [tool.mypy]; the cache goes outside the checkout.
    r = _run("mypy", "--cache-dir", str(tmp_path / "mypy-cache"), timeout=600)
    assert r.returncode == 0, f"mypy:\n{r.stdout[-6000:]}{r.stderr[-2000:]}"


def test_the_complexity_gate_fails_a_function_above_15(tmp_path):
    """pyproject.toml's [tool.ruff.lint] turns on C901 at 15 (issue 31): a 16-branch function fails ruff check."""
    src = tmp_path / "complex.py"
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(16))
    src.write_text(f"def f(x: int) -> int:\n{body}    return -1\n")
    r = _run("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(src))
    assert r.returncode == 1 and "C901" in r.stdout and "(17 > 15)" in r.stdout, r.stdout


@pytest.mark.slow  # a mypy start, ~5-10 s
def test_the_strict_types_gate_fails_an_untyped_function(tmp_path):
    """pyproject.toml's [tool.mypy] is strict (issue 31): a function without annotations fails mypy."""
    src = tmp_path / "untyped.py"
    src.write_text("def f(x):\n    return x\n")
    r = _run(
        "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "c"), str(src), timeout=600
    )
    assert r.returncode == 1 and "no-untyped-def" in r.stdout, r.stdout
