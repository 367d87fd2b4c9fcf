"""Shared test setup: the two test tiers, the `gpu` marker, the GLU problem, and an in-process grader helper.

Two tiers. Tests marked @pytest.mark.slow (a grade of many submissions, a real container or wheel build, a run of
nox: each costs tens of seconds to minutes on a 2-core CPU) are deselected by default, so a plain `pytest` and
`nox -s tests` run the fast tier (~4 minutes on 2 cores). The full tier runs everything:

    pytest --all                  nox -s tests -- --all

and is implied when the environment variable CI is "true" (GitHub Actions and most CI services set it): CI runs
.ci/run, which is exactly the README's `python -m pip install nox && nox -s tests`, so the full tier runs there
with no extra argument. The fast tier still runs at least one real CPU grade of the staff Triton solution and of a
broken submission, and every static check. Hypothesis tests take their example counts from a profile: "fast"
runs a fraction of the examples of "full" (the tier picks one; HYPOTHESIS_PROFILE overrides).

The tier chooses only when nothing more specific was asked for: slow tests in a file named on the command line
(`pytest tests/test_exploits.py`, or a test in it, tests/test_x.py::test_y) run in either tier, and so do the tests
that a `-m` expression selects (`pytest -m gpu`, `pytest -m slow`; `-m "not slow"` is the fast tier again).

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


def problem_names(root: Path = REPO_ROOT) -> list[str]:
    """Every problem of the repository, found as the grader finds them (reference/<name>/spec.yaml), sorted: a new
    problem's folder is tested with no list to extend. A test module takes them through the `problem_name`
    parameter (pytest_generate_tests below) or, for a module-level list, `from conftest import problem_names`."""
    return sorted(p.parent.name for p in (root / "reference").glob("*/spec.yaml"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test with a `problem_name` argument runs once per problem (problem_names), unless it parametrizes it itself."""
    if "problem_name" in metafunc.fixturenames and not any(
        "problem_name" in m.args[0] for m in metafunc.definition.iter_markers("parametrize")
    ):
        metafunc.parametrize("problem_name", problem_names())


def full_tier(config: pytest.Config) -> bool:
    """The full tier: `--all`, or CI=true in the environment."""
    return bool(config.getoption("--all")) or os.environ.get("CI", "").lower() == "true"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all", action="store_true", default=False,
        help="run the full tier: also the tests marked slow (deselected by default; implied by CI=true)",
    )


# Hypothesis profiles for the two tiers. A test module's settings() without max_examples of its own takes it from
# the profile loaded here (settings() reads the loaded profile when the module is imported, after this hook); the
# fuzz tests with a count of their own keep it in both tiers.
HYPOTHESIS_EXAMPLES = {"fast": 25, "full": 120}


def pytest_configure(config: pytest.Config) -> None:
    try:
        from hypothesis import settings
    except ImportError:  # hypothesis is a test dependency; without it the fuzz modules fail on import anyway
        return
    for name, n in HYPOTHESIS_EXAMPLES.items():
        settings.register_profile(name, max_examples=n)
    if config.getoption("hypothesis_profile", None):  # hypothesis's own --hypothesis-profile: it loads that one
        return
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("full" if full_tier(config) else "fast"))


def _named(item: pytest.Item, config: pytest.Config) -> bool:
    """Whether the command line names this test's file (tests/test_x.py) or the test itself (tests/test_x.py::test_y,
    or a class in it): a directory, or no path at all, names nothing."""
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        f = Path(config.invocation_params.dir, path).resolve()
        if not f.is_file() or item.path.resolve() != f:
            continue
        if not sep:
            return True
        name = item.nodeid.partition("::")[2]
        if name == rest or name.startswith((rest + "::", rest + "[")):
            return True
    return False


_SLOW_DESELECTED = pytest.StashKey[int]()  # how many slow tests the fast tier deselected, for the summary line


SLOW_MEASURED = Path(__file__).resolve().parent / "slow_measured.txt"


def slow_measured() -> set[str]:
    """The node ids tests/slow_measured.txt lists: measured over 3 s each, slow as if marked so."""
    lines = SLOW_MEASURED.read_text(encoding="utf-8").splitlines() if SLOW_MEASURED.exists() else []
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast tier deselects tests marked slow, or listed in tests/slow_measured.txt (reported as "N deselected",
    not as skips); tests marked @pytest.mark.gpu are skipped cleanly when PyTorch sees no CUDA GPU."""
    measured = slow_measured()
    for item in items:
        if item.nodeid in measured:
            item.add_marker(pytest.mark.slow)
    if not full_tier(config) and not config.getoption("markexpr"):
        keep, drop = [], []
        for item in items:
            (drop if item.get_closest_marker("slow") is not None and not _named(item, config) else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
            config.stash[_SLOW_DESELECTED] = len(drop)
    if CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> str:
    if full_tier(config):
        why = "--all" if config.getoption("--all") else "CI=true"
        return f"test tier: full ({why}): slow tests included"
    return "test tier: fast (tests marked slow are deselected; `--all` or CI=true runs them)"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    n = config.stash.get(_SLOW_DESELECTED, 0)
    if n:
        terminalreporter.write_line(
            f"fast tier: {n} slow test{'s' if n != 1 else ''} deselected; "
            "`pytest --all` or `nox -s tests -- --all` runs them"
        )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def problem():
    from grader.problem.spec import load_problem

    return load_problem(SPEC)


@pytest.fixture(scope="session")
def grade_dir(problem, tmp_path_factory):
    """grade_dir(path, only=("triton",), device="cpu", *, staff=False, cases=()) -> grader.results.Grade

    Runs grader.pipeline.grade in this process (each graded part still runs in its own child process). Results
    are cached for the session by (path, only, device, staff, cases): one grade of the Triton part takes ~5-10 s on a
    CPU, so every test that asks about the same submission shares one grade (`cases`: --case globs, a partial grade
    of only those cases, for tests about a few). Treat the Grade as read-only.

    grade() is not re-entrant: at its end it kills every child process of the calling process (reap_strays),
    so never call it from two threads at once.
    """
    from grader.pipeline import Options, grade

    cache: dict[tuple, object] = {}

    def run(path, only=("triton",), device="cpu", *, staff=False, cases=()):
        path = Path(path)
        key = (str(path.resolve()), tuple(only), device, staff, tuple(cases))
        if key not in cache:
            out = tmp_path_factory.mktemp("grade-out")
            cache[key] = grade(problem, Options(submission=path, out=out, only=tuple(only), device=device, staff=staff,
                                                cases=tuple(cases)))
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


BWRAP_APT_TIMEOUT_S = 300


def _install_bwrap() -> str:
    """'' when a box can be made here (grader/box.py); else why not. As root with apt-get, Debian's bubblewrap is
    installed when missing, as tests/slurm_cluster.py installs Slurm: official grades need kernel containment, and
    CI's clean machine has no bwrap."""
    import shutil
    import subprocess

    from grader import box

    if hasattr(os, "getuid") and os.getuid() == 0 and box.bwrap_path() is None and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "bubblewrap"]):
            try:
                subprocess.run(cmd, capture_output=True, timeout=BWRAP_APT_TIMEOUT_S, env=env, check=False)
            except subprocess.TimeoutExpired:
                break
        box.support.cache_clear()
    return box.support()


@pytest.fixture(scope="session", autouse=True)
def _bwrap_for_root() -> None:
    """As root, bubblewrap is installed before the first test (when missing, with apt-get): every official grade
    as root needs its box, and tests that grade as root should not depend on whether an earlier test asked for
    one. Elsewhere (not root, no apt-get) nothing happens here; `boxes` skips the tests that need one."""
    if hasattr(os, "getuid") and os.getuid() == 0:
        _install_bwrap()


@pytest.fixture(scope="session")
def boxes() -> str:
    """Grades in this session can put submission code in a box (grader/box.py): bubblewrap installed when missing
    (as root with apt-get). Skips, with the reason, where no box can be made."""
    why = _install_bwrap()
    if why:
        pytest.skip(f"no kernel containment here: {why}")
    return ""


@pytest.fixture
def no_box(monkeypatch):
    """Grades here make no box (GRADER_BWRAP names no program) and the deployment declares one grade per container
    (GRADER_CONTAINMENT=container), as on Gradescope: what the grader checks where the kernel cannot contain a
    grade (modes, the staff probe)."""
    from grader import box

    monkeypatch.setenv(box.BWRAP_ENV, "/nonexistent/bwrap")
    monkeypatch.setenv(box.DECLARE_ENV, box.CONTAINER)
    box.support.cache_clear()
    yield
    box.support.cache_clear()


@pytest.fixture(scope="module")
def separated(request: pytest.FixtureRequest):
    """Grades in this session can run submission code as a separate uid (an official grade's condition).

    Needs root. This machine's Python may live under a directory other users cannot enter (/root is 0700 on CI):
    the fixture opens those directories for traversal only (o+x, no listing) for the module and restores them.
    Skips when not root."""
    import sys
    import sysconfig

    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("needs root: only root can run submission code as another uid")
    request.getfixturevalue("boxes")  # an official grade needs its box
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
