"""Sessions:

    nox -s grade  -- [grader args]   grade assignment/ (see `python -m grader grade --help`)
    nox -s bench  -- [grader args]   lecture-style timing table (GPU)
    nox -s tests  -- [pytest args]   the grader's own tests

On a machine whose Python already has torch/triton (a GPU host, the container) use `nox --no-venv -s ...`:
installs are skipped there, because the host's CUDA build of torch must not be replaced.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

REQS = ["-r", "requirements.txt"]  # shared with the Dockerfile


def _install(session: nox.Session, *extra: str) -> None:
    # `nox --no-venv`: session.install would raise (or touch the system Python); use what is there.
    if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv):
        return
    session.install("-c", "constraints.txt", *REQS, *extra)


@nox.session
def grade(session: nox.Session) -> None:
    """Grade a submission. Args after `--` go to `python -m grader grade`."""
    _install(session)
    session.run("python", "-m", "grader", "grade", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Baselines vs Triton vs CUDA, per perf case (needs a GPU)."""
    _install(session)
    session.run("python", "-m", "grader", "bench", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The grader's own test suite. Args after `--` go to pytest."""
    _install(session, "pytest")
    session.run("python", "-m", "pytest", *(session.posargs or ["-q"]))
