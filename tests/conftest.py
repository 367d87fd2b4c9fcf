"""Shared test setup: the `gpu` marker, the GLU problem, and an in-process grader helper.

On a machine without CUDA, TRITON_INTERPRET=1 is set before anything decorates a @triton.jit function, so test
modules that import Triton kernels directly run them in the interpreter on CPU tensors. (The grader's worker
processes set it themselves for --device cpu; this is for kernels imported into the pytest process.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _cuda_available() -> bool:
    # torch is imported here, not at module level, so that the env var below is decided before any test module
    # is imported. Importing torch imports no Triton kernel (triton itself is not imported by `import torch`).
    import torch

    return torch.cuda.is_available()


CUDA = _cuda_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
SPEC = REPO_ROOT / "reference" / "glu" / "spec.yaml"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked @pytest.mark.gpu are skipped cleanly when PyTorch sees no CUDA GPU."""
    if CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def problem():
    from grader.spec import load_problem

    return load_problem(SPEC)


@pytest.fixture(scope="session")
def grade_dir(problem, tmp_path_factory):
    """grade_dir(path, only=("triton",), device="cpu", *, staff=False) -> grader.results.Grade

    Runs grader.pipeline.grade in this process (each graded part still runs in its own child process). Results
    are cached for the session by (path, only, device, staff): one grade of the Triton part takes ~5-10 s on a
    CPU, so every test that asks about the same submission shares one grade. Treat the Grade as read-only.

    grade() is not re-entrant: at its end it kills every child process of the calling process (reap_strays),
    so never call it from two threads at once.
    """
    from grader.pipeline import Options, grade

    cache: dict[tuple, object] = {}

    def run(path, only=("triton",), device="cpu", *, staff=False):
        path = Path(path)
        key = (str(path.resolve()), tuple(only), device, staff)
        if key not in cache:
            out = tmp_path_factory.mktemp("grade-out")
            cache[key] = grade(problem, Options(submission=path, out=out, only=tuple(only), device=device, staff=staff))
        return cache[key]

    return run


def _blocked_ancestors(paths: list[Path]) -> list[Path]:
    """Directories on the way to `paths` that other users cannot enter (no o+x)."""
    import stat

    out: list[Path] = []
    for p in paths:
        for d in [*reversed(p.resolve().parents)]:
            try:
                if not os.stat(d).st_mode & stat.S_IXOTH and d not in out:
                    out.append(d)
            except OSError:
                pass
    return out


@pytest.fixture(scope="module")
def separated():
    """Grades in this session can run submission code as a separate uid (an official grade's condition).

    Needs root. This machine's Python may live under a directory other users cannot enter (/root is 0700 on CI):
    the fixture opens those directories for traversal only (o+x, no listing) for the module and restores them.
    Skips when not root."""
    import sys
    import sysconfig

    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("needs root: only root can run submission code as another uid")
    paths = [Path(sys.executable), Path(sysconfig.get_paths()["purelib"]), REPO_ROOT]
    blocked = _blocked_ancestors(paths)
    saved = {d: os.stat(d).st_mode for d in blocked}
    for d in blocked:
        os.chmod(d, saved[d] | 0o001)
    try:
        yield
    finally:
        for d, mode in saved.items():
            os.chmod(d, mode)
