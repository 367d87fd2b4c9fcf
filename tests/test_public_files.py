"""One list of public files (issue 29 item 2): the container image (.dockerignore), the wheel and sdist
(pyproject.toml, MANIFEST.in, setup.py), the student handout (grader/publish/handout.py) and Gradescope's zip
(grader/publish/gradescope.py) hold the same files under grader/, reference/ and assignment/ as grader/publish/public_files.py's
PUBLIC, every problem's hints.yaml among them, and no staff solution. The handout and the zip are built from a
commit: a TA's uncommitted solved stub never goes in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader.publish import gradescope, handout, public_files

ROOT = Path(__file__).resolve().parent.parent
PRUNE = {".git", ".nox", ".venv", "__pycache__", ".pytest_cache", "grade-results", "build", "dist"}
DIST_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "requirements.txt", "constraints.txt")


def image_files(root: Path) -> set[str]:
    """What .dockerignore lets into the build context, as Docker reads it: every line a pattern over the path or
    one of its folders, `!` re-includes, the last line that matches decides."""
    rules = []
    for line in (root / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keep = line.startswith("!")
            rules.append((keep, public_files.regex(line.lstrip("!"))))
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in PRUNE]
        for n in filenames:
            rel = Path(dirpath, n).relative_to(root).as_posix()
            parts = rel.split("/")
            prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            keep = True
            for k, r in rules:
                if any(r.match(p) for p in prefixes):
                    keep = k
            if keep:
                out.add(rel)
    return out


def dist_files(root: Path, tmp: Path) -> dict[str, set[str]]:
    """The wheel's and the sdist's files, built by `python -m build` without isolation (this environment's
    setuptools: no network) from a copy of what the build reads."""
    src = tmp / "src"
    for top in public_files.SCOPE:
        shutil.copytree(root / top, src / top, ignore=shutil.ignore_patterns("__pycache__"))
    for f in DIST_FILES:
        shutil.copy2(root / f, src / f)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--sdist",
            "--wheel",
            "--outdir",
            str(tmp / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (tmp / "dist").glob("*.whl")
    (sdist,) = (tmp / "dist").glob("*.tar.gz")
    with zipfile.ZipFile(whl) as z:
        wheel = set(z.namelist())
    with tarfile.open(sdist) as t:
        sd = {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile() and "/" in m.name}
    return {"wheel": wheel, "sdist": sd}


def course(names: set[str] | list[str]) -> set[str]:
    return {n for n in names if public_files.in_scope(n)}


def four_sets(root: Path, tmp: Path) -> dict[str, set[str]]:
    zip_names = gradescope.build(tmp / "autograder.zip", root=root, ref=None, problem="glu")
    return {
        "image (.dockerignore)": course(image_files(root)),
        **{k: course(v) for k, v in dist_files(root, tmp).items()},
        "handout": course(i.rel for i in handout.plan(root)),
        "Gradescope zip": course(zip_names),
    }


@pytest.mark.slow  # a wheel and sdist build, the handout and zip plans: ~20-50 s on 2 cores
def test_the_image_the_wheel_the_handout_and_the_zip_hold_the_public_list(tmp_path):
    pytest.importorskip("build", reason="build not installed (nox -s tests installs it: noxfile.py TEST_DEPS)")
    want = set(public_files.files(ROOT))
    for spec in ROOT.glob("reference/*/spec.yaml"):  # every problem's words, spec, truth and stubs are public
        name = spec.parent.name
        assert {f"reference/{name}/hints.yaml", f"reference/{name}/spec.yaml", f"reference/{name}/reference.py"} <= want
    assert not [f for f in want if "solution_" in f], want
    for kind, got in four_sets(ROOT, tmp_path).items():
        assert got == want, (
            f"{kind}: missing {sorted(want - got)}, not on the list {sorted(got - want)} "
            "(grader/publish/public_files.py PUBLIC is the list: change it and every deliverable together)"
        )
        assert not [f for f in got if public_files.is_staff(f) or Path(f).name.startswith("solution_")], kind


def test_a_staff_file_is_never_public():
    for rel in (
        "reference/glu/solution_triton.py",
        "reference/gelu/solution_naive_cuda.cu",
        "assignment/solution_glu.py",
        "grader/solution_x.py",
        "grader/__pycache__/cli.cpython-311.pyc",
        "grader/__pycache__/x.py",
        "tests/test_static.py",
        "docs/SECURITY.md",
        "Dockerfile",
    ):
        assert not public_files.is_public(rel), rel
    for rel in (
        "grader/cli.py",
        "grader/child/cudacpu/include/cuda.h",
        "reference/glu/hints.yaml",
        "assignment/gelu/gelu_cuda.cu",
        "assignment/README.md",
    ):
        assert public_files.is_public(rel), rel


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


@pytest.fixture
def course_repo(tmp_path) -> Path:
    """A git checkout of the course files the handout reads, everything committed."""
    repo = tmp_path / "course"
    for top in (*public_files.SCOPE,):
        shutil.copytree(ROOT / top, repo / top, ignore=shutil.ignore_patterns("__pycache__"))
    for f in (*handout.TOP_FILES, handout.README):
        if (ROOT / f).is_file():
            shutil.copy2(ROOT / f, repo / f)
    for f in handout.STUDENT_TESTS:
        (repo / "tests").mkdir(exist_ok=True)
        shutil.copy2(ROOT / "tests" / f, repo / "tests" / f)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "course")
    return repo


@pytest.mark.slow  # three handout and zip builds from a git checkout: ~25 s
def test_the_handout_of_a_dirty_tree_is_built_from_the_commit(course_repo, tmp_path, capsys):
    """A TA's uncommitted solved stub and a new file in reference/ are not in the handout (or the zip): both are
    built from HEAD, and the CLI names what it left out."""
    stub = course_repo / "assignment" / "glu" / "glu_triton.py"
    committed = stub.read_bytes()
    stub.write_bytes(committed + b"\n# TA-SOLVED: out = a * tl.sigmoid(b)  (uncommitted)\n")
    (course_repo / "reference" / "glu" / "hints.yaml").write_text("uncommitted: edit\n")
    (course_repo / "assignment" / "gelu" / "new_notes.py").write_text("# not committed\n")
    written = handout.export(tmp_path / "out", course_repo)
    assert (tmp_path / "out" / "assignment" / "glu" / "glu_triton.py").read_bytes() == committed
    assert "assignment/gelu/new_notes.py" not in written
    assert (tmp_path / "out" / "reference" / "glu" / "hints.yaml").read_text() != "uncommitted: edit\n"
    assert handout.uncommitted(course_repo) == [
        "assignment/gelu/new_notes.py",
        "assignment/glu/glu_triton.py",
        "reference/glu/hints.yaml",
    ]
    names = gradescope.build(tmp_path / "ag.zip", root=course_repo, problem="glu")
    with zipfile.ZipFile(tmp_path / "ag.zip") as z:
        assert z.read("assignment/glu/glu_triton.py") == committed
        assert b"TA-SOLVED" not in b"".join(z.read(n) for n in names)
    # --ref: an older commit is what goes out; a name that is no commit is one clear error
    _git(course_repo, "commit", "-q", "-am", "solved stub")
    old = handout.export(tmp_path / "old", course_repo, "HEAD~1")
    assert (tmp_path / "old" / "assignment" / "glu" / "glu_triton.py").read_bytes() == committed and old
    with pytest.raises(handout.HandoutError, match=r"--ref nope: no such commit"):
        handout.export(tmp_path / "x", course_repo, "nope")
    with pytest.raises(handout.HandoutError, match=r"not a commit"):
        handout.export(tmp_path / "y", course_repo, "--output=/tmp/evil")


def test_outside_a_git_checkout_the_handout_is_refused(tmp_path):
    bare = tmp_path / "bare"
    (bare / "reference").mkdir(parents=True)
    with pytest.raises(handout.HandoutError, match=r"not a git checkout"):
        handout.export(tmp_path / "out", bare)
    assert not (tmp_path / "out").exists()
