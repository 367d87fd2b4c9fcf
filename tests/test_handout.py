"""The student handout (`python -m grader handout --out DIR`, grader/publish/handout.py): nothing staff-only goes in, and
the export grades on its own (its own grader, its own spec and reference, its stubs) with the command
`nox -s grade` runs.

`nox -s grade` itself is not run here: it would install torch into a fresh environment. The grade command it runs
(`python -m grader grade ...`) is, with the export as the working directory and no PYTHONPATH, and the nox
session of the handout export is checked with a stand-in for nox that records what the session runs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from grader import cli
from grader.publish import handout, handout_noxfile

ROOT = Path(__file__).resolve().parent.parent
STAFF = sorted((ROOT / "reference").glob("*/solution_*"))
# Staff-only by where they are: never a file under these in the handout.
# tests/data/ holds every problem's test submissions (tests/data/problems/<name>/: correct, broken, compile_fail).
STAFF_DIRS = ("docs/", "scripts/", ".github/", ".ci/", "tests/exploits/", "tests/data/")
# What students need: the stubs, the handout, the grader, the public problem files, the tooling.
MUST_HAVE = ("assignment/README.md", "assignment/glu/glu_triton.py", "assignment/glu/glu_cuda.cu", "grader/__init__.py",
             "grader/__main__.py", "grader/cli.py", "grader/child/worker.py", "grader/results.schema.json",
             "reference/__init__.py", "reference/glu/__init__.py", "reference/glu/spec.yaml",
             "reference/glu/reference.py", "pyproject.toml", "requirements.txt", "constraints.txt", "noxfile.py",
             "README.md", "tests/conftest.py")
# Names that only the staff solutions use (checked below: the repository's public files do not have them).
STAFF_MARKERS = ("glu_kernel_fixed", "SPECIALIZE_MIN", "GLU_VEC_UNROLL", "RowCol")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _files(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("handout") / "course-handout"
    assert cli.main(["handout", "--out", str(out)]) == 0
    return out


def _distinctive_staff_lines() -> dict[str, str]:
    """Lines of at least 30 characters of the staff solutions that neither the problem's contract files (stubs,
    handout, spec, reference) nor the grader package hold: computed here, independently of grader/publish/handout.py."""
    public = [*ROOT.glob("assignment/**/*"), *ROOT.glob("reference/*/spec.yaml"), *ROOT.glob("reference/*/reference.py"),
              *ROOT.glob("grader/**/*.py")]
    seen = {ln.strip() for p in public if p.is_file() for ln in p.read_text(encoding="utf-8").splitlines()}
    return {ln.strip(): p.name for p in STAFF for ln in p.read_text(encoding="utf-8").splitlines()
            if len(ln.strip()) >= 30 and ln.strip() not in seen}


def test_the_handout_has_what_students_need(export):
    files = set(_files(export))
    missing = [f for f in MUST_HAVE if f not in files]
    assert not missing, missing
    assert {f for f in files if f.startswith("tests/")} == {f"tests/{t}" for t in handout.STUDENT_TESTS}
    # The stubs and the handout are the repository's, byte for byte.
    for f in ("assignment/glu/glu_triton.py", "assignment/glu/glu_cuda.cu", "assignment/README.md", "reference/glu/spec.yaml"):
        assert (export / f).read_bytes() == (ROOT / f).read_bytes(), f
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)


def test_nothing_staff_only_is_in_the_handout(export):
    assert STAFF, "no staff solutions in this checkout: nothing to check against"
    files = _files(export)
    by_path = [f for f in files if f.startswith(STAFF_DIRS) or f == "Dockerfile" or re.search(r"(^|/)solution_", f)]
    assert not by_path, by_path
    names = {p.name for p in STAFF}
    assert not [f for f in files if Path(f).name in names]
    # By content: no distinctive line of a staff kernel, and none of the names only the staff kernels use.
    lines = _distinctive_staff_lines()
    assert len(lines) > 50 and any("glu_kernel_fixed" in ln for ln in lines), "the staff check lost its teeth"
    texts = {f: (export / f).read_text(encoding="utf-8", errors="replace") for f in files}
    leaked = {f: ln for f, t in texts.items() for ln in (s.strip() for s in t.splitlines()) if ln in lines}
    assert not leaked, leaked
    marked = {f: m for f, t in texts.items() for m in STAFF_MARKERS if m in t}
    assert not marked, marked
    # Not the exploit catalogue nor the correct designs' or broken submissions' notes, by their titles either.
    glu = "tests/data/problems/glu"
    for readme in ("tests/exploits/README.md", f"{glu}/correct/README.md", f"{glu}/compile_fail/README.md"):
        title = (ROOT / readme).read_text(encoding="utf-8").splitlines()[0]
        assert title.startswith("# ") and not [f for f, t in texts.items() if title in t.splitlines()], (readme, title)


def test_the_handout_readme_links_only_to_files_it_has(export):
    text = (export / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# ") and "student handout" in text
    for target in re.findall(r"\]\(([^)\s#]+)", text):
        if not re.match(r"^[a-z]+:", target):
            assert (export / target).exists(), target
    assert "| `docs/" not in text and "| `scripts/" not in text


# The handout's README and noxfile are the student's (issue 40 item 10): the staff README (test counts, docker
# build, sudo nox -s audit) and the staff sessions (audit, lint, handout, ...) do not apply in the handout.
STAFF_WORDS = ("docker", "sudo", "audit", "1043", "gradescope", "keygen", "secret-file", "batch", "slurm", "staff",
               "docs/", "scripts/", "tests/exploits")
STUDENT_SESSIONS = {"grade", "bench", "profile", "tests"}


def _nox_sessions(noxfile: str) -> set[str]:
    """The sessions a noxfile defines: `@nox.session` (or `(name="...")`) over a def."""
    return {m.group(1) or m.group(2)
            for m in re.finditer(r'^@nox\.session(?:\(name="([\w-]+)"\))?\ndef (\w+)\(', noxfile, re.M)}


def _named_sessions(text: str) -> set[str]:
    return set(re.findall(r"\bnox (?:--no-venv )?-s ([\w-]+)", text))


def test_the_handout_readme_is_the_student_s(export):
    text = (export / "README.md").read_text(encoding="utf-8")
    found = [w for w in STAFF_WORDS if w in text.lower()]
    assert not found, found
    cmds = handout_commands(text)
    assert cmds[:2] == [INSTALL_LINE, "nox -s grade"], cmds
    for needed in ("assignment/README.md", "assignment/glu/glu_triton.py", "grade-results/", "report.html",
                   "--no-venv", "Without a GPU", "With a GPU"):
        assert needed in text, needed
    paths = re.findall(r"`((?:assignment|grader|reference)/[^`<>]*)`", text)
    assert len(paths) >= 4 and all((export / p).exists() for p in paths), paths
    assert _named_sessions(text) <= _nox_sessions((export / "noxfile.py").read_text()), _named_sessions(text)
    for c in cmds:  # each grader option it shows is one the grader takes
        if c.startswith("nox -s grade -- ") and "--help" not in c:
            cli._parser().parse_args(["grade", *re.sub(r"\s+#.*", "", c).split()[4:]])


def test_the_handout_noxfile_has_the_student_sessions_only(export):
    text = (export / "noxfile.py").read_text(encoding="utf-8")
    assert _nox_sessions((ROOT / "noxfile.py").read_text()) > STUDENT_SESSIONS  # the course's has staff ones too
    assert _nox_sessions(text) == STUDENT_SESSIONS
    # Every session the handout's texts name is there; the docstring lists exactly the sessions there are.
    texts = [export / "README.md", *sorted((export / "assignment").glob("**/README.md"))]
    named = set().union(*(_named_sessions(p.read_text(encoding="utf-8")) for p in texts))
    assert {"grade", "bench", "profile", "tests"} <= named <= STUDENT_SESSIONS, named
    doc = text.split('"""', 2)[1]
    assert set(re.findall(r"^\s+nox -s ([\w-]+)", doc, re.M)) == STUDENT_SESSIONS
    # Nothing of the staff sessions' needs is left, and the tests session installs what the handout's tests import.
    for staff in ("LINT_DEPS", "hadolint", "actionlint", "scripts/", "Dockerfile", "audit", "lint checks"):
        assert staff not in text, staff
    assert re.search(r'^TEST_DEPS = \["pytest", "hypothesis"\]$', text, re.M)
    compile(text, "noxfile.py", "exec")


# A course noxfile in little: what only staff sessions use (a constant, a helper, the import only that helper
# needs, each with its comment) goes with them, whatever its name; what a student session uses, directly or through
# a kept helper, stays.
SMALL_NOXFILE = '''"""Sessions:

    nox -s grade   grade
    nox -s lint    lint
"""

from __future__ import annotations

import os
import shutil

import nox

nox.options.sessions = ["tests"]
INSTALL_ARGS = ["-r", "requirements.txt"]
TEST_DEPS = ["pytest", "ruff"]
# lint's own tool
STAFF_TOOL = "some-linter"
HELPER_ENV = {"A": "1"}


def _env() -> dict[str, str]:
    return {**os.environ, **HELPER_ENV}


def _grader(session: nox.Session) -> None:
    session.run("python", "-m", "grader", *INSTALL_ARGS, env=_env())


# only lint uses this
def _staff_helper(name: str) -> str | None:
    return shutil.which(name)


@nox.session
def grade(session: nox.Session) -> None:
    _grader(session)


@nox.session
def bench(session: nox.Session) -> None:
    _grader(session)


@nox.session
def profile(session: nox.Session) -> None:
    _grader(session)


@nox.session
def tests(session: nox.Session) -> None:
    session.run("pytest", *TEST_DEPS)


@nox.session
def lint(session: nox.Session) -> None:
    session.run(_staff_helper(STAFF_TOOL) or "true", *TEST_DEPS)
'''


def test_the_handout_noxfile_drops_what_only_staff_sessions_use():
    text = handout_noxfile.student_noxfile(SMALL_NOXFILE)
    for gone in ("STAFF_TOOL", "_staff_helper", "import shutil", "lint", "only lint uses this"):
        assert gone not in text, gone
    for kept in ("import os\n", "import nox\n", "from __future__ import annotations", 'nox.options.sessions = ["tests"]',
                 "HELPER_ENV = ", "def _env(", "def _grader(", "INSTALL_ARGS = "):
        assert kept in text, kept
    assert _nox_sessions(text) == STUDENT_SESSIONS
    compile(text, "noxfile.py", "exec")


@pytest.mark.slow  # a CLI grade from the exported handout: ~7 s
def test_grading_from_the_handout_uses_its_own_grader(export, tmp_path):
    env = _env()
    where = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"], cwd=export, env=env,
                           capture_output=True, text=True, check=False, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve() == (export / "grader" / "__init__.py").resolve()
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "grader", "grade", "--device", "cpu", "--no-perf", "--only", "triton",
                        "--out", str(out)],
                       cwd=export, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (out / "results.json").is_file() and (out / "report.html").is_file()
    import json

    res = json.loads((out / "results.json").read_text())
    assert Path(res["extra_data"]["submission"]).resolve() == (export / "assignment" / "glu").resolve()
    assert res["score"] == 0 and any("Part 1: the Triton kernel" in t["output"] for t in res["tests"])
    # The staff solutions are not there, and --staff says so (one line, exit 2).
    s = subprocess.run([sys.executable, "-m", "grader", "grade", "--staff", "--device", "cpu", "--no-perf",
                        "--out", str(tmp_path / "staff")],
                       cwd=export, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert s.returncode == 2 and "not in this install" in s.stderr and len(s.stderr.strip().splitlines()) == 1, s.stderr


def test_the_handout_tests_collect_without_staff_files(export):
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"], cwd=export,
                       env=_env(), capture_output=True, text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"\b\d{2,} tests? collected", r.stdout), r.stdout[-500:]


@pytest.mark.slow
def test_the_handout_tests_pass(export):
    """What `nox -s tests` runs, in the handout (about 35 s on 2 cores)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"], cwd=export,
                       env=_env(), capture_output=True, text=True, check=False, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def _fake_nox() -> types.ModuleType:
    nox = types.ModuleType("nox")
    nox.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    nox.session = lambda f=None, **kw: f if f is not None else (lambda g: g)  # type: ignore[attr-defined]

    class PassthroughEnv:
        pass

    nox.virtualenv = types.SimpleNamespace(PassthroughEnv=PassthroughEnv)  # type: ignore[attr-defined]
    nox.Session = object  # type: ignore[attr-defined]
    return nox


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_nox_handout_session_runs_the_handout_command(tmp_path, monkeypatch):
    """`nox -s handout -- --out DIR`: the session runs `python -m grader handout --out DIR` (checked with a stand-in
    for nox, then run for real)."""
    monkeypatch.setitem(sys.modules, "nox", _fake_nox())
    monkeypatch.setattr(sys, "argv", ["nox", "--no-venv", "-s", "handout"])  # use this Python, install nothing
    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    runs: list[tuple[str, ...]] = []
    out = tmp_path / "handout"
    passthrough = sys.modules["nox"].virtualenv.PassthroughEnv()  # `nox --no-venv`: no install step
    session = types.SimpleNamespace(posargs=["--out", str(out)], virtualenv=passthrough,
                                    run=lambda *a, **k: runs.append(a), install=lambda *a, **k: None)
    mod.handout(session)
    assert runs == [("python", "-m", "grader", "handout", "--out", str(out))]
    r = subprocess.run([sys.executable, *runs[0][1:]], cwd=ROOT, env=_env(), capture_output=True, text=True,
                       check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (out / "assignment" / "glu" / "glu_triton.py").is_file()


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_a_non_empty_or_unusable_out_is_refused(tmp_path, capsys):
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    assert cli.main(["handout", "--out", str(full)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grader error: ") and "not empty" in err and len(err.strip().splitlines()) == 1
    assert _files(full) == ["notes.txt"]
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert cli.main(["handout", "--out", str(a_file)]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert cli.main(["handout", "--out", str(ROOT / "handout-here")]) == 2
    assert "inside the course repository" in capsys.readouterr().err and not (ROOT / "handout-here").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["handout", "--out", str(empty)]) == 0
    assert (empty / "noxfile.py").is_file()


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_a_staff_file_on_the_list_stops_the_export(tmp_path, monkeypatch):
    """The allow-list is checked on the way out: a test that holds staff kernel code, or a staff-only path,
    stops the export before anything is written."""
    monkeypatch.setattr(handout, "STUDENT_TESTS", (*handout.STUDENT_TESTS, "test_static.py"))
    with pytest.raises(handout.HandoutError, match=r"tests/test_static.py: holds a line of the staff solution"):
        handout.export(tmp_path / "a")
    assert not (tmp_path / "a").exists()
    monkeypatch.setattr(handout, "STUDENT_TESTS", ("conftest.py",))
    monkeypatch.setattr(handout, "TOP_FILES", (*handout.TOP_FILES, "Dockerfile"))
    with pytest.raises(handout.HandoutError, match=r"Dockerfile: staff-only"):
        handout.export(tmp_path / "b")
    assert not (tmp_path / "b").exists()


# ------------------------------------------------------------------------------------------------------------
# Every command the handout shows is run (issue 18 item 5): its shell blocks, as a student types them, from the
# exported repository's root. `nox` is the stand-in above, running the real noxfile: its sessions' commands are
# recorded, then run for real, with the shared environment (.nox/env) already made: a wrapper for this Python and
# the stamp of an install, so that nothing is downloaded.

HANDOUT = ROOT / "assignment" / "README.md"
INSTALL_LINE = "python -m pip install nox"  # the one line not run here: it installs nox from the package registry
# Shown for a GPU box: run by the gpu test below (on a CPU they cannot work: no CUDA, or a perf case's 1 GiB input
# in the interpreter).
GPU_ONLY = ("nox -s bench", "nox -s profile -- --only triton --case lecture_16k")


def handout_commands(text: str) -> list[str]:
    """The commands of the handout's ```bash blocks: one per line (a trailing # comment dropped), a heredoc
    (`... <<'EOF'` to `EOF`) as one command."""
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if "<<'EOF'" in line:
                end = lines.index("EOF", i)
                out.append("\n".join(lines[i : end + 1]))
                i = end + 1
                continue
            cmd = re.sub(r"\s+#\s.*$", "", line).strip()
            if cmd:
                out.append(cmd)
            i += 1
    return out


def _gpu_only(cmd: str) -> bool:
    return cmd in GPU_ONLY or 'device="cuda"' in cmd


def test_every_command_of_the_handout_is_classified():
    cmds = handout_commands(HANDOUT.read_text(encoding="utf-8"))
    assert INSTALL_LINE in cmds and len(cmds) >= 12, cmds
    for c in cmds:
        assert c == INSTALL_LINE or c.startswith(("nox ", "python - <<'EOF'", ".nox/env/bin/python - <<'EOF'")), c
    assert set(GPU_ONLY) <= set(cmds), "a GPU-only command is no longer in the handout: update GPU_ONLY"


def test_the_handout_s_inline_grader_commands_parse_and_its_nvcc_line_is_the_grader_s():
    from grader.cuda import build

    text = HANDOUT.read_text(encoding="utf-8")
    inline = re.findall(r"`((?:\.nox/env/bin/)?python -m grader [a-z]+[^`]*?)(?: \.\.\.)?`", text)
    assert len(inline) >= 3, inline
    for cmd in inline:
        cli._parser().parse_args(cmd.split()[3:])  # argparse exits (SystemExit) on anything it does not take
    sessions = set(re.findall(r"`nox (?:--no-venv )?-s (\w+)", text)) | {
        m for c in handout_commands(text) for m in re.findall(r"^nox (?:--no-venv )?-s (\w+)", c)}
    assert {"grade", "profile", "bench"} <= sessions
    noxfile = (ROOT / "noxfile.py").read_text()
    for s in sessions:
        assert re.search(rf"^def {s}\(session", noxfile, re.M), f"nox -s {s}: no such session"
    shown = re.search(r"^\s+nvcc (.*) -arch=sm_XY -o <cache>/<key>\.so glu_cuda\.cu$", text, re.M)
    assert shown and tuple(shown.group(1).split()) == build.BASE_FLAGS, shown


def _nox_env(root: Path) -> None:
    """.nox/env as `nox -s grade` leaves it: a python (here a wrapper for this one) and the install's stamp."""
    bindir = root / ".nox" / "env" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bindir / "python").chmod(0o755)


def _load_noxfile(root: Path, argv: list[str], monkeypatch):
    monkeypatch.setitem(sys.modules, "nox", _fake_nox())
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.chdir(root)
    spec = importlib.util.spec_from_file_location("noxfile_handout_cmd", root / "noxfile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    (root / ".nox" / "env" / "installed-base").write_text(mod._stamp([]) + "\n")
    return mod


def _nox(cmd: str, root: Path, monkeypatch) -> tuple[list[str], dict[str, str]]:
    """What `cmd` (a `nox ... -s NAME [-- ARGS]` line) runs: the real noxfile's session, with nox stood in for."""
    words = shlex_split(cmd)
    before, _, posargs = " ".join(words).partition(" -- ")
    head = before.split()
    assert head[0] == "nox" and "-s" in head, cmd
    name = head[head.index("-s") + 1]
    mod = _load_noxfile(root, head, monkeypatch)
    runs: list[tuple] = []
    session = types.SimpleNamespace(posargs=shlex_split(posargs), env={}, run=lambda *a, **k: runs.append(a),
                                    log=lambda *a, **k: None, error=lambda msg: pytest.fail(msg),
                                    install=lambda *a, **k: pytest.fail("the session tried to install"))
    getattr(mod, name)(session)
    assert len(runs) == 1, runs
    env = {**_env(), **session.env}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # `python` for --no-venv
    return [str(a) for a in runs[0]], env


def shlex_split(s: str) -> list[str]:
    import shlex

    return shlex.split(s)


@pytest.fixture(scope="module")
def student_repo(export, tmp_path_factory) -> Path:
    """The exported handout as a student has it after a first `nox -s grade`, with the staff Triton solution as
    their glu_triton.py (so that the quick test, which asserts right answers, can pass)."""
    import shutil

    root = tmp_path_factory.mktemp("student") / "repo"
    shutil.copytree(export, root)
    _nox_env(root)
    shutil.copy(ROOT / "reference" / "glu" / "solution_triton.py", root / "assignment" / "glu" / "glu_triton.py")
    return root


CPU_COMMANDS = [c for c in handout_commands(HANDOUT.read_text(encoding="utf-8"))
                if c != INSTALL_LINE and not _gpu_only(c)]


@pytest.mark.slow  # each a CLI grade (or profile) of the handout: 5-25 s
@pytest.mark.parametrize("cmd", CPU_COMMANDS, ids=[c.splitlines()[0][:60] for c in CPU_COMMANDS])
def test_each_handout_command_runs(cmd, student_repo, monkeypatch, tmp_path):
    env = {**_env(), "TRITON_INTERPRET": "1"}  # the handout: prepend it on a machine without a GPU
    if not cmd.startswith("nox "):
        r = subprocess.run(["bash", "-c", cmd], cwd=student_repo, env=env, capture_output=True, text=True,
                           check=False, timeout=300)
        assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-2000:]
        return
    argv, nenv = _nox(cmd, student_repo, monkeypatch)
    assert argv[1:4] == ["-m", "grader", argv[3]] and argv[3] in ("grade", "profile", "bench"), argv
    if argv[3] == "grade":
        argv += ["--out", str(tmp_path / "out")]  # the handout's default (grade-results/<problem>/) is the student's folder
    if "--watch" in argv:
        p = subprocess.Popen(argv, cwd=student_repo, env=nenv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        seen = []
        for line in p.stdout:  # type: ignore[union-attr]
            seen.append(line)
            if "for changes" in line:
                p.send_signal(__import__("signal").SIGINT)
                break
        rest, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and "stopped watching" in rest, "".join(seen) + rest
        assert (tmp_path / "out" / "results.json").is_file()
        return
    r = subprocess.run(argv, cwd=student_repo, env=nenv, capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    if argv[3] == "grade":
        import json

        # (a --case grade is partial: written to OUT/partial/, beside the last full grade)
        res = json.loads((tmp_path / "out" / ("partial" if "--case" in argv else "") / "results.json").read_text())
        graded = {t["extra_data"].get("case") for t in res["tests"] if t["extra_data"]["kind"] == "correctness"}
        if "--case" in argv:
            assert res["extra_data"]["partial_cases"] and graded == {"odd_h_1001/float32", "odd_h_1001/float16",
                                                                     "odd_h_1001/bfloat16", "strided_rows/float32"}
        assert res["score"] > 0  # the staff Triton kernel stands in for the student's
    else:
        assert "== triton (glu_triton.py)" in r.stdout and "glu_kernel[grid" in r.stdout, r.stdout[-2000:]


GPU_COMMANDS = [c for c in handout_commands(HANDOUT.read_text(encoding="utf-8")) if _gpu_only(c)]


@pytest.mark.gpu
@pytest.mark.parametrize("cmd", GPU_COMMANDS, ids=[c.splitlines()[0][:60] for c in GPU_COMMANDS])
def test_each_gpu_handout_command_runs(cmd, student_repo, monkeypatch):
    """On the GPU box: the CUDA quick test (with the staff CUDA solution as glu_cuda.cu), the profiler snippet,
    bench and the profile of a perf case."""
    import shutil

    shutil.copy(ROOT / "reference" / "glu" / "solution_cuda.cu", student_repo / "assignment" / "glu" / "glu_cuda.cu")
    if not cmd.startswith("nox "):
        env = {**_env(), "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        r = subprocess.run(["bash", "-c", cmd], cwd=student_repo, env=env, capture_output=True, text=True,
                           check=False, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return
    argv, nenv = _nox(cmd, student_repo, monkeypatch)
    r = subprocess.run(argv, cwd=student_repo, env=nenv, capture_output=True, text=True, check=False, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_the_export_extracts_without_tarfile_s_filter_as_python_3_11_2_must(tmp_path, monkeypatch):
    """Debian 12's own Python is 3.11.2, before tarfile's `filter` (3.11.4): the handout's export raised
    TypeError there ("extractall() got an unexpected keyword argument 'filter'"). Without the filter, members are
    checked as it would: regular files and folders kept, a name that leaves the folder refused."""
    import io
    import tarfile

    from grader.publish import handout

    def archive(names: list[str]) -> tarfile.TarFile:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for n in names:
                info = tarfile.TarInfo(n)
                info.size = 2
                info.mode = 0o4777
                t.addfile(info, io.BytesIO(b"ok"))
            link = tarfile.TarInfo("link")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            t.addfile(link)
        buf.seek(0)
        return tarfile.open(fileobj=buf)

    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    real = tarfile.TarFile.extractall

    def old_extractall(self, path=".", members=None, *, numeric_owner=False, **kw):  # 3.11.2's signature
        assert "filter" not in kw, "3.11.2 has no filter argument"
        return real(self, path, members, numeric_owner=numeric_owner)

    monkeypatch.setattr(tarfile.TarFile, "extractall", old_extractall)
    with archive(["a/b.txt", "c.txt"]) as t:
        handout.extract_all(t, tmp_path / "out")
    assert (tmp_path / "out" / "a" / "b.txt").read_text() == "ok" and not (tmp_path / "out" / "link").exists()
    assert oct((tmp_path / "out" / "c.txt").stat().st_mode & 0o7777) == oct(0o755)
    with archive(["../escape.txt"]) as t, pytest.raises(handout.HandoutError, match="outside its folder"):
        handout.extract_all(t, tmp_path / "out2")
    assert not (tmp_path / "escape.txt").exists()


# ------------------------------------------------------------------------------------------------------------
# A solution committed into a stub (issue 40 item 1): the stub is a public file, so its lines used to vouch for
# themselves and the export called itself clean. Each stub must still be the starter (it keeps the line students
# are told to delete), and only a starter stub's lines count as public in the staff-line check.

def _course_tree(tmp_path: Path) -> Path:
    """The files the handout reads, copied (no git: exported with ref=None)."""
    import shutil

    tree = tmp_path / "course"
    for top in ("grader", "reference", "assignment"):
        shutil.copytree(ROOT / top, tree / top, ignore=shutil.ignore_patterns("__pycache__"))
    for f in (*handout.TOP_FILES, handout.README):
        if (ROOT / f).is_file():
            shutil.copy2(ROOT / f, tree / f)
    (tree / "tests").mkdir()
    for f in handout.STUDENT_TESTS:
        shutil.copy2(ROOT / "tests" / f, tree / "tests" / f)
    return tree


def _ta_solved_triton(stub: str) -> str:
    """The starter with its marked line replaced by a TA's own (working) wrapper: no staff line in it."""
    start = stub.index("    raise NotImplementedError(")
    end = stub.index(")\n", start) + 2
    return stub[:start] + "    return x[..., : x.shape[-1] // 2] * torch.sigmoid(x[..., x.shape[-1] // 2 :])\n" + stub[end:]


SOLVED_STUBS = {
    "staff_triton": ("glu_triton.py", lambda stub: (ROOT / "reference/glu/solution_triton.py").read_text()),
    "staff_cuda": ("glu_cuda.cu", lambda stub: (ROOT / "reference/glu/solution_cuda.cu").read_text()),
    "ta_triton": ("glu_triton.py", _ta_solved_triton),
    "cuda_marker_commented_out": ("glu_cuda.cu", lambda stub: stub.replace("    return GLU_ERR_NOT_IMPLEMENTED;",
                                                                          "    // return GLU_ERR_NOT_IMPLEMENTED;")),
}


@pytest.mark.parametrize("case", sorted(SOLVED_STUBS))
def test_a_solved_stub_stops_the_handout_and_the_zip(case, tmp_path):
    from grader.publish import gradescope

    tree = _course_tree(tmp_path)
    name, solve = SOLVED_STUBS[case]
    stub = tree / "assignment" / "glu" / name
    solved = solve(stub.read_text())
    assert solved != stub.read_text()
    stub.write_text(solved)
    rel = f"assignment/glu/{name}"
    with pytest.raises(handout.HandoutError) as e:
        handout.export(tmp_path / "out", tree, ref=None)
    msg = str(e.value)
    assert msg.startswith(f"{rel}: not the starter stub (") and f"git log -p -- {rel}" in msg, msg
    assert len(msg.splitlines()) == 1 and not (tmp_path / "out").exists()
    if case == "staff_triton":  # the autograder zip holds the stubs too (once: each build reads every spec, ~1 s)
        with pytest.raises(gradescope.GradescopeError, match=f"^{rel}: not the starter stub"):
            gradescope.build(tmp_path / "ag.zip", root=tree, ref=None, problem="glu")
        assert not (tmp_path / "ag.zip").exists()


def test_the_starter_stubs_pass_and_a_stub_s_comment_edit_is_still_the_starter(tmp_path):
    tree = _course_tree(tmp_path)
    assert handout.starters(tree) and not any(handout.starters(tree).values()), handout.starters(tree)
    stub = tree / "assignment" / "glu" / "glu_triton.py"
    stub.write_text(stub.read_text() + "\n# a TA's note\n")
    assert "assignment/glu/glu_triton.py" in handout.export(tmp_path / "out", tree, ref=None)


def test_only_a_starter_stub_vouches_for_lines_of_the_staff_solution(tmp_path):
    """The staff-line check, on its own: the staff kernel's lines are staff lines when a solved stub holds them
    (they were 'public' before, being in a public file), and a staff solution beside the stubs stops the export."""
    tree = _course_tree(tmp_path)
    staff = (ROOT / "reference/glu/solution_triton.py").read_text()
    kernel = [ln.strip() for ln in staff.splitlines() if "glu_kernel_fixed" in ln and len(ln.strip()) >= 30]
    assert kernel, "the staff kernel changed: pick another of its names"
    (tree / "assignment" / "glu" / "glu_triton.py").write_text(staff)
    lines = handout.staff_lines(tree)
    assert set(kernel) <= set(lines), kernel
    (tree / "assignment" / "glu" / "glu_triton.py").write_bytes((ROOT / "assignment/glu/glu_triton.py").read_bytes())
    (tree / "assignment" / "glu" / "my_notes.py").write_text(staff)  # on the public list: assignment/*/*.py
    with pytest.raises(handout.HandoutError, match=r"^assignment/glu/my_notes.py: holds a line of the staff solution"):
        handout.export(tmp_path / "out", tree, ref=None)
    assert not (tmp_path / "out").exists()
