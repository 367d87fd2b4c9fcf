"""Whether Triton can run on this machine: decided once, in the trusted parent, before any worker starts.

Triton ships wheels for Linux (x86_64, aarch64) only, so requirements.txt installs it there alone. On macOS and
Windows the grader still grades everything that needs no Triton (the static checks; the CUDA build and compiler
report where nvcc exists; the CUDA part's correctness and timing on a GPU) and says, in one line, why the Triton
part was not graded and the container command that grades it. No module of the trusted side imports triton at
module level; the worker imports it only to run Triton code, which is then never asked of it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

IMAGE = "kernel-grader"
# The README's container command (its options: tests/test_install.py checks that they agree).
DOCKER_RUN = (
    "docker",
    "run",
    "--rm",
    "--gpus",
    "all",
    "--network",
    "none",
    "--read-only",
    "--tmpfs",
    "/scratch:mode=1777,exec",
)  # exec: built kernels load from /scratch


def triton_missing() -> str | None:
    """Why Triton cannot run here (one clause), or None when this Python can import it."""
    try:
        if importlib.util.find_spec("triton") is not None:
            return None
    except (ImportError, ValueError):  # a broken or half-removed install
        pass
    if sys.platform == "darwin":
        return "Triton does not install on macOS (it has wheels for Linux only)"
    if sys.platform == "win32":
        return "Triton does not install on Windows (it has wheels for Linux only)"
    return "Triton is not installed in this Python (python -m pip install -c constraints.txt -r requirements.txt)"


def container_command(submission: Path, out: Path) -> str:
    """The command that grades `submission` in the grading container, from a checkout of the course repository."""
    return (
        f"docker build -t {IMAGE} . && "
        + " ".join(DOCKER_RUN)
        + f' -v "{submission.resolve()}:/submission:ro" -v "{out.resolve()}:/results" {IMAGE}'
    )


def not_graded_here(part: str, why: str, submission: Path, out: Path) -> str:
    """The one line a grade carries for a part that needs Triton where Triton cannot run."""
    return (
        f"{part}: not graded on this machine: {why}. Grade it in the container on a Linux host with an NVIDIA "
        f"GPU, from the course repository: {container_command(submission, out)}"
    )


def torch_compiled_each_start() -> str | None:
    """Why every grader process would compile torch from source here (one clause), or None.

    Each grade starts a parent and several workers, and each imports torch. Without torch's bytecode (a .pyc beside
    its modules: a pip install writes them; an install with --no-compile or a copied tree may have none) and with
    this process unable to write it (PYTHONDONTWRITEBYTECODE, as in the container; or torch's folder not writable by
    this user, as a system install is to a TA's account), every one of them compiles torch from source (workers
    never write it: they run with PYTHONDONTWRITEBYTECODE, as other users): on an H100 host `import torch` took
    4.7 s instead of 1.95 s and a worker's first profiled call 8.3 s instead of 1.6 s (docs/performance.md)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        cached = importlib.util.cache_from_source(spec.origin)
    except NotImplementedError:  # sys.implementation.cache_tag is None: this Python keeps no bytecode
        return None
    if Path(cached).is_file():
        return None
    if sys.dont_write_bytecode:
        cannot = "PYTHONDONTWRITEBYTECODE is set"
    else:
        folder = Path(cached).parent if Path(cached).parent.is_dir() else Path(spec.origin).parent
        if os.access(folder, os.W_OK):
            return None  # this process writes it at its first import, and every later one reads it
        cannot = f"this user cannot write it into {folder}"
    site = Path(spec.origin).parent.parent
    return (
        f"torch has no compiled bytecode ({Path(cached).name} is missing) and {cannot}, so every grade's processes "
        f"compile torch from source (seconds each): run `python -m compileall -q {site}` once, as the user who "
        "installed it"
    )
