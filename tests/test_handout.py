"""The student handout (`python -m grader handout --out DIR`, grader/handout.py): nothing staff-only goes in, and
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

from grader import cli, handout

ROOT = Path(__file__).resolve().parent.parent
STAFF = sorted((ROOT / "reference").glob("*/solution_*"))
# Staff-only by where they are: never a file under these in the handout.
STAFF_DIRS = ("docs/", "scripts/", ".github/", ".ci/", "tests/correct/", "tests/exploits/", "tests/broken/",
              "tests/compile_fail/", "tests/data/")
# What students need: the stubs, the handout, the grader, the public problem files, the tooling.
MUST_HAVE = ("assignment/README.md", "assignment/glu_triton.py", "assignment/glu_cuda.cu", "grader/__init__.py",
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
    out = tmp_path_factory.mktemp("handout") / "glu-assignment"
    assert cli.main(["handout", "--out", str(out)]) == 0
    return out


def _distinctive_staff_lines() -> dict[str, str]:
    """Lines of at least 30 characters of the staff solutions that neither the problem's contract files (stubs,
    handout, spec, reference) nor the grader package hold: computed here, independently of grader/handout.py."""
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
    for f in ("assignment/glu_triton.py", "assignment/glu_cuda.cu", "assignment/README.md", "reference/glu/spec.yaml"):
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
    for readme in ("tests/exploits/README.md", "tests/correct/README.md", "tests/compile_fail/README.md"):
        title = (ROOT / readme).read_text(encoding="utf-8").splitlines()[0]
        assert title.startswith("# ") and not [f for f, t in texts.items() if title in t.splitlines()], (readme, title)


def test_the_handout_readme_links_only_to_files_it_has(export):
    text = (export / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# ") and "student handout" in text
    for target in re.findall(r"\]\(([^)\s#]+)", text):
        if not re.match(r"^[a-z]+:", target):
            assert (export / target).exists(), target
    assert "| `docs/" not in text and "| `scripts/" not in text


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
    assert Path(res["extra_data"]["submission"]).resolve() == (export / "assignment").resolve()
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
    assert (out / "assignment" / "glu_triton.py").is_file()


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
