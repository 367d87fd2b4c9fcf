"""The student handout: `python -m grader handout --out DIR [--ref COMMIT]` writes the repository students get.

It is built from a commit (HEAD unless --ref names another), never from the working tree, unpacked with
`git archive`. What goes in is an allow-list (the public files of grader/publish/public_files.py, TOP_FILES, a
student README, the student noxfile of grader/publish/handout_noxfile.py, STUDENT_TESTS); every file is checked
again on the way out (`staff_only`, a staff solution's lines, each stub still the starter: `not_starter`), and any
of these stops the export before anything is written. What is in, what is out and why: docs/architecture.md
("The student handout").
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader.errors import UsageError
from grader.problem.spec import Implementation, Problem, SpecError, load_problem
from grader.publish import public_files
from grader.publish.handout_noxfile import NOXFILE, NoxfileError, student_noxfile

ROOT = Path(__file__).resolve().parents[2]

# The grader's own tests that run from the handout: each needs only the grader, the public problem files and
# the stubs. Left out, with the reason: test_boundary, test_exploits, test_static, test_cudainfo, test_cuda_build,
# test_correct_designs, test_staff_kernels, test_gpucompile, test_correctness, test_interpcheck (staff
# solutions or staff test submissions), test_spec and test_reports (staff solutions; the recorded staff grade),
# test_ta_report_fuzz (the recorded staff grade), test_gpu (staff grade), test_delivery (Dockerfile, workflow),
# test_handout and test_roster (staff tooling).
STUDENT_TESTS = (
    "conftest.py",
    "test_inputs_check.py",
    "test_keys.py",
    "test_scoring.py",
    "test_timing_orchestration.py",
    "test_wire.py",
    "test_wire_fuzz.py",
)
TOP_FILES = ("pyproject.toml", "requirements.txt", "constraints.txt", "noxfile.py", ".gitignore")
README = "README.md"
# Staff-only by path, whatever the allow-list says (checked on every file written).
STAFF_DIRS = (
    "docs",
    "lab",
    "scripts",
    ".github",
    ".ci",
    "tests/exploits",
    "tests/data",  # every problem's test submissions (tests/data/problems/<name>/) and the recorded grades
)
STAFF_FILES = ("Dockerfile",)
STAFF_GLOBS = ("reference/*/solution_*",)
MIN_STAFF_LINE = 30  # a staff-solution line this long (stripped) that no public file has is staff-only text


# The line every starter stub has and every solved file has lost: the one the student is told to delete (the
# handout's TODO 3 / "delete the next line"), which makes the stub report "not implemented" when graded.
# Why a marker and not a comparison with git: the handout is built from a commit, and a solution committed into a
# stub *is* that commit's stub, so git has no other version to call the starter; the marker needs no history and
# also holds for a tree without git (ref=None, an unpacked archive).
# Triton: the entry function's first statement (after its docstring) is `raise NotImplementedError(...)`, so
# nothing of the wrapper can run before it. CUDA: an uncommented `return <PREFIX>_ERR_NOT_IMPLEMENTED;`.
_CUDA_MARKER = re.compile(r"^[ \t]*return[ \t]+[A-Z0-9_]*ERR_NOT_IMPLEMENTED[ \t]*;", re.M)
_C_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)


class HandoutError(UsageError):
    """The handout cannot be written; str(err) is one line saying why."""


@dataclass(frozen=True)
class Item:
    src: Path
    rel: str  # posix path inside the handout


def _problems(root: Path) -> list[Problem]:
    specs = sorted((root / "reference").glob("*/spec.yaml"))
    if not specs:
        raise HandoutError(f"no reference/*/spec.yaml under {root}: run this from the course repository")
    try:
        return [load_problem(s) for s in specs]
    except SpecError as e:
        raise HandoutError(str(e)) from None


def _rel(p: Path, root: Path) -> str:
    return p.resolve().relative_to(root.resolve()).as_posix()


def staff_paths(root: Path = ROOT) -> list[Path]:
    """Every staff solution in root: those the specs name, and any reference/*/solution_*."""
    out = {p for g in STAFF_GLOBS for p in root.glob(g) if p.is_file()}
    for prob in _problems(root):
        out |= {i.staff for i in prob.implementations.values() if i.staff.is_file()}
    return sorted(out)


def staff_only(rel: str, root: Path = ROOT, staff: list[Path] | None = None) -> bool:
    """Whether a handout path is staff-only by where it is (the content check is separate). `staff`: staff_paths(root)
    computed once by a caller that checks many paths (it reads every spec: 0.1 s a call, 15 s over a whole handout)."""
    if rel in STAFF_FILES or any(rel == d or rel.startswith(d + "/") for d in STAFF_DIRS):
        return True
    if any(Path(rel).match(g) for g in STAFF_GLOBS) or public_files.is_staff(rel):
        return True
    return any(rel == _rel(p, root) for p in (staff_paths(root) if staff is None else staff))


def _triton_marker(text: str, entry: str) -> str | None:
    """Why a Triton stub's text is not a starter (None: it is)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return "it does not parse"
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    if fn is None:
        return f"no function {entry}"
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    first = body[0] if body else None
    exc = first.exc if isinstance(first, ast.Raise) else None
    if isinstance(exc, ast.Call):
        exc = exc.func
    if not (isinstance(exc, ast.Name) and exc.id == "NotImplementedError"):
        return f"{entry} no longer starts with `raise NotImplementedError(...)`"
    return None


def not_starter(path: Path, impl: Implementation) -> str | None:
    """Why the stub at path is not the starter of `impl` (a solved or half-solved file), or None when it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "it cannot be read as UTF-8 text"
    if impl.kind == "triton":
        return _triton_marker(text, impl.entry)
    if impl.kind == "cuda":
        if _CUDA_MARKER.search(_C_BLOCK_COMMENT.sub("", text)) is None:
            return "its `return ..._ERR_NOT_IMPLEMENTED;` line is gone"
        return None
    return None  # a kind with no starter convention yet: nothing to check against


def starters(root: Path = ROOT) -> dict[str, str | None]:
    """Every stub the specs name (posix path from root) -> why it is not the starter, or None when it is."""
    out: dict[str, str | None] = {}
    for prob in _problems(root):
        for impl in prob.student_implementations.values():
            rel = Path(prob.stubs, impl.file).as_posix()
            out[rel] = not_starter(root / rel, impl)
    return out


def check_starters(root: Path = ROOT) -> None:
    """Raise HandoutError for the first stub that is not the starter, naming it and how to put the starter back."""
    for rel, why in starters(root).items():
        if why is not None:
            raise HandoutError(
                f"{rel}: not the starter stub ({why}), so the handout would give students a solution: put the "
                f"starter back in the commit the handout is built from (`git log -p -- {rel}` shows when it "
                f"changed; `git checkout <that commit>~1 -- {rel}`, then commit), or build from another with --ref"
            )


def plan(root: Path = ROOT) -> list[Item]:
    """The files of the handout, in the order they are written. Raises HandoutError when one is missing."""
    root = Path(root)
    items: list[Item] = []

    def add(p: Path) -> None:
        if not p.is_file():
            raise HandoutError(f"{p}: not found (the handout needs it)")
        items.append(Item(p, _rel(p, root)))

    public = public_files.files(root)
    for prob in _problems(root):
        named = [prob.handout] + [f"{prob.stubs}/{i.file}" for i in prob.student_implementations.values()]
        for rel in (Path(n).as_posix() for n in named):
            if rel not in public:
                raise HandoutError(
                    f"{rel}: {prob.name}'s spec names it for students, but it is not on the public list "
                    "(grader/publish/public_files.py PUBLIC) or not in this commit: add it there, or commit it"
                )
    for rel in public:
        add(root / rel)
    for name in TOP_FILES:
        if (root / name).is_file() or name != ".gitignore":
            add(root / name)
    add(root / README)
    for name in STUDENT_TESTS:
        add(root / "tests" / name)
    seen: set[str] = set()
    return [i for i in items if not (i.rel in seen or seen.add(i.rel))]  # type: ignore[func-returns-value]


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=120, check=False)
    except FileNotFoundError:
        raise HandoutError("git not found: the handout is built from a commit of the course repository") from None
    except subprocess.TimeoutExpired:
        raise HandoutError(f"git {args[0]} took over 120 s in {root}") from None


@contextmanager
def snapshot(root: Path, ref: str = "HEAD") -> Iterator[Path]:
    """The tree of commit `ref` of the git checkout at root, unpacked (git archive) into a temporary folder that
    is removed afterwards. Raises HandoutError naming what is wrong (not a git checkout, no such commit)."""
    root = Path(root)
    if ref.startswith("-"):
        raise HandoutError(f"--ref {ref}: not a commit (a branch, tag or commit id, e.g. HEAD or main)")
    r = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if r.returncode != 0:
        if _git(root, "rev-parse", "--git-dir").returncode != 0:
            raise HandoutError(
                f"{root} is not a git checkout: the handout is built from a commit (run it in the course repository)"
            )
        raise HandoutError(f"--ref {ref}: no such commit in {root} (a branch, tag or commit id, e.g. HEAD)")
    sha = r.stdout.decode().strip()
    tar = _git(root, "archive", "--format=tar", sha)
    if tar.returncode != 0:
        raise HandoutError(f"git archive {ref} failed: {tar.stderr.decode(errors='replace').strip()[:200]}")
    with tempfile.TemporaryDirectory(prefix="handout-src-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
            extract_all(t, Path(tmp))  # our own commit; still refuses links out and absolute names
        yield Path(tmp)


def extract_all(t: tarfile.TarFile, dest: Path) -> None:
    """`t` into `dest` with tarfile's "data" filter (no absolute names, nothing outside dest, no device files, no
    links that leave it). Python 3.11.2 (Debian 12's own) predates the filter argument (3.11.4): there every member
    is checked the same way first, and only regular files and folders are taken (git archive writes links too,
    which the handout does not need: the same few the filter would refuse are then skipped, not followed)."""
    if hasattr(tarfile, "data_filter"):
        t.extractall(dest, filter="data")
        return
    root = os.path.realpath(dest)
    keep = []
    for m in t.getmembers():
        target = os.path.realpath(os.path.join(root, m.name))
        if os.path.isabs(m.name) or not (target == root or target.startswith(root + os.sep)):
            raise HandoutError(f"the archive names a path outside its folder: {m.name[:200]!r}")
        if m.isfile() or m.isdir():
            m.mode &= 0o755  # as the data filter: no set-id bits, nothing others may write
            keep.append(m)
    t.extractall(dest, members=keep)


def uncommitted(root: Path) -> list[str]:
    """Files under grader/, reference/ or assignment/ whose working-tree state differs from HEAD (changed, new or
    deleted): what a handout built from HEAD does not have as it is on disk. Empty outside a git checkout."""
    r = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *public_files.SCOPE)
    if r.returncode != 0:
        return []
    out = []
    for entry in r.stdout.decode(errors="replace").split("\0"):
        if len(entry) > 3 and entry[2] == " ":
            rel = entry[3:]
            if public_files.is_public(rel) or public_files.is_staff(rel):
                out.append(rel)
    return sorted(set(out))


def staff_lines(root: Path = ROOT, public: list[Item] | None = None) -> dict[str, str]:
    """Distinctive lines of the staff solutions (line -> the file it is from): stripped lines of at least
    MIN_STAFF_LINE characters that neither the problem's contract files (handout, starter stubs, spec, reference)
    nor the grader package hold. One of them in a handout file (a test, a README, a stub) means staff code leaked.
    A stub vouches for its lines only while it is the starter (`starters`), and no other code file under
    assignment/ vouches at all: a solution committed into a stub, or beside it, would otherwise make every one of
    its own lines "public" and pass itself."""
    public = plan(root) if public is None else public
    starter = {rel for rel, why in starters(root).items() if why is None}
    seen: set[str] = set()
    for it in public:
        if not it.rel.startswith(("grader/", "assignment/", "reference/")):
            continue
        if it.rel.startswith("assignment/") and it.rel.endswith((".py", ".cu")) and it.rel not in starter:
            continue
        try:
            seen |= {ln.strip() for ln in it.src.read_text(encoding="utf-8").splitlines()}
        except UnicodeDecodeError:
            continue
    out: dict[str, str] = {}
    for p in staff_paths(root):
        for ln in p.read_text(encoding="utf-8", errors="replace").splitlines():
            s = ln.strip()
            if len(s) >= MIN_STAFF_LINE and s not in seen:
                out.setdefault(s, p.name)
    return out


# The handout's README.md. Short and for students only: nothing about the course's staff tooling, test counts or
# deployment (the staff README's subject), and every path it names is in the handout (tests/test_handout.py).
STUDENT_README = """\
# Kernels in Triton and CUDA (CS336 lecture 6): student handout

You write one memory-bound op twice, as a Triton kernel and as a CUDA kernel. The grader in this repository
checks and times them the way the course's autograder does.

## Set up

You need Python 3.11 or later. From this folder:

```bash
python -m pip install nox
nox -s grade
```

The first `nox` command makes `.nox/env` and installs torch and the rest into it (a few GB on Linux, minutes).
Later commands reuse it. On a GPU machine whose Python already has torch and triton with CUDA (such as the course
container), add `--no-venv` to use that Python instead: `nox --no-venv -s grade`.

## Where things are

- `assignment/README.md`: the assignment. Read it first.
- {files}: your files for {name}, the default problem.
  If your course gives you another problem, its files and README are in `assignment/<problem>/`.
- `grader/` and `reference/`: the grader and each problem's spec. You do not edit them.

## Grade

```bash
nox -s grade                     # grade {folder}/ (every part)
nox -s grade -- --only {part}{pad}# one part
nox -s grade -- --no-perf        # correctness only: faster while you debug
nox -s grade -- --problem NAME   # another problem
nox -s grade -- --help           # every option
```

The terminal shows a summary. The full report is in `grade-results/{name}/` (`grade-results/<problem>/`
for another problem): open `report.html` in a browser
(`report.md` is the same as text, `results.json` is what the autograder uploads). Each failed case says what
went wrong and where. Your grade here is advisory: only the course's autograder grade counts.

## CPU or GPU

Without a GPU the grader checks correctness only. Your Triton kernel runs in Triton's interpreter, with every
load and store bounds-checked. Your CUDA kernel is built as C++ (with `g++` or `clang++`) and run on the CPU.
Large cases and all timing need a GPU: the report lists their points as not earned on this machine. Grade on
a GPU before you submit.

With a GPU everything runs, timing included. Two more commands help there:

```bash
nox -s bench      # timing table: your kernels against PyTorch
nox -s profile    # profile your kernels
```

`nox -s tests` runs the grader's own tests (CPU is fine).
"""


def student_readme(root: Path = ROOT) -> str:
    """STUDENT_README for the course's default problem (its spec's name, stubs folder and files: data, never a name
    written here)."""
    from grader.problem.spec import default_problem

    try:
        prob = load_problem(default_problem(root))
    except SpecError as e:
        raise HandoutError(str(e)) from None
    impls = list(prob.student_implementations.items())
    files = " and ".join(f"`{Path(prob.stubs, impl.file).as_posix()}`" for _, impl in impls)
    part = impls[0][0] if impls else "PART"
    return STUDENT_README.format(
        name=prob.name, folder=Path(prob.stubs).as_posix(), files=files, part=part, pad=" " * max(1, 10 - len(part))
    )


def _readme(text: str, present: set[str]) -> str:
    """README.md for the handout: table rows whose first cell names a path the handout does not have are left
    out, and links to such paths become plain text."""

    def missing(target: str) -> bool:
        t = target.split("#", 1)[0].strip().rstrip("/")
        if not t or re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE) or t.startswith("/"):
            return False  # a URL, an anchor or an absolute path: not a file of this repository
        return t not in present and not any(p.startswith(t + "/") for p in present)

    out = []
    for line in text.splitlines():
        cell = re.match(r"^\|\s*`([^`]+)`\s*\|", line)
        if cell and missing(cell.group(1)):
            continue
        out.append(line)
    # Links are replaced over the whole text: a link's words may wrap onto the next line.
    kept = re.sub(
        r"\[([^\]]+)\]\(([^)\s]+)\)", lambda m: m.group(1) if missing(m.group(2)) else m.group(0), "\n".join(out)
    )
    out = kept.split("\n")
    note = (
        "> This is the student handout of the course repository: the staff solutions, staff notes (`docs/`), "
        "scripts and the staff's test submissions are not part of it."
    )
    head, _, rest = "\n".join(out).partition("\n")
    return f"{head}\n\n{note}\n{rest}\n" if head.startswith("# ") else f"{note}\n\n" + "\n".join(out) + "\n"


def export(out: Path, root: Path = ROOT, ref: str | None = "HEAD") -> list[str]:
    """Write the handout of commit `ref` (None: the working tree as it is, for tests) into out (new or empty).
    Returns the paths written, relative to out."""
    out = Path(out)
    root = Path(root)
    if out.exists() and not out.is_dir():
        raise HandoutError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise HandoutError(f"--out {out}: not empty (the handout goes into a new or empty directory)")
    if out.resolve() == root.resolve() or root.resolve() in out.resolve().parents:
        raise HandoutError(f"--out {out}: inside the course repository {root} (write the handout elsewhere)")
    if ref is None:
        return _export(out, root)
    with snapshot(root, ref) as tree:
        return _export(out, tree)


def _export(out: Path, root: Path) -> list[str]:
    items = plan(root)
    staff = staff_paths(root)
    for it in items:
        if staff_only(it.rel, root, staff):
            raise HandoutError(f"{it.rel}: staff-only, yet on the handout's list (grader/publish/handout.py)")
    check_starters(root)
    leaks = staff_lines(root, items)
    texts: dict[str, bytes] = {}
    for it in items:
        data = it.src.read_bytes()
        if it.rel == README:
            data = student_readme(root).encode("utf-8")  # the staff README is about staff tooling
        elif it.rel == NOXFILE:
            try:
                data = student_noxfile(data.decode("utf-8")).encode("utf-8")
            except NoxfileError as e:
                raise HandoutError(str(e)) from None
        text = data.decode("utf-8", errors="replace")
        hit = next((ln for ln in (s.strip() for s in text.splitlines()) if ln in leaks), None)
        if hit is not None:
            raise HandoutError(f"{it.rel}: holds a line of the staff solution {leaks[hit]} ({hit[:60]!r})")
        texts[it.rel] = data
    try:
        out.mkdir(parents=True, exist_ok=True)
        for it in items:
            dst = out / it.rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(texts[it.rel])
            shutil.copymode(it.src, dst)
    except OSError as e:
        raise HandoutError(f"cannot write the handout to {out}: {e.strerror or e}") from None
    return [it.rel for it in items]
