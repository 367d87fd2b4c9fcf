"""Gradescope's autograder zip: `python -m grader gradescope --out autograder.zip [--secret-file KEY]`.

Why: docs/architecture.md, "Modules: the why", grader/publish/gradescope.py.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import UsageError
from grader.publish import handout

ROOT = Path(__file__).resolve().parents[2]
# Under /opt, not /root: the grade's unprivileged uid must be able to start this Python (docs/SECURITY.md), so
# that a grade on Gradescope (root) runs student code as another user and can be official. Named for the product
# (a kernel assignment grader, pyproject.toml's kernel-grader), not for one of its problems.
INSTALL_DIR = "/opt/kernel-grader"
VENV = f"{INSTALL_DIR}/venv"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
KEY_NAME = "grader_key"
METADATA_NAME = "submission_metadata.json"  # Gradescope's, beside submission/ in /autograder
MAX_METADATA_BYTES = 1024 * 1024  # a real one is a few kB (it lists previous submissions too)
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed: the same tree gives the same zip

SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source, when it builds the autograder image (no GPU there).
# Use Gradescope's Ubuntu 24.04 base image: the grader needs Python 3.11 or later.
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update
# g++ (with its ASan/UBSan runtimes): the CUDA part's correctness runs there on the CPU layer (grader/cuda/cudacpu.py)
apt-get install -y python3 python3-pip python3-venv g++
# bubblewrap: a box for each of the grade's untrusted processes (grader/box.py), where the container allows one;
# Gradescope's does not (no CAP_SYS_ADMIN), and the grade then records "container" (run_autograder declares it)
apt-get install -y bubblewrap || echo "setup.sh: no bubblewrap: grades record containment 'container'" >&2
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the grader needs Python 3.11+: pick the Ubuntu 24.04 base image")'
python3 -m venv {VENV}
{VENV}/bin/python -m pip install --upgrade pip
# PyTorch's CPU-only wheel first (PyPI's Linux torch is the CUDA build, several GB), at the pinned version; then
# the rest at the versions in constraints.txt (torch is then already there).
TORCH_PIN="$(grep -E '^torch==' constraints.txt)"
{VENV}/bin/python -m pip install "$TORCH_PIN" --index-url {TORCH_CPU_INDEX}
{VENV}/bin/python -m pip install -c constraints.txt -r requirements.txt
# Readable and runnable by every user (the grade runs student code as an unprivileged uid), writable by root only.
chmod -R a+rX,go-w {INSTALL_DIR}
chmod +x run_autograder
"""  # noqa: E501 (a shell script: its python3 -c line stays whole)

RUN_AUTOGRADER_TEMPLATE = f"""#!/usr/bin/env bash
# Gradescope runs this, as root, for every submission: the student's files are in /autograder/submission, the
# grade goes to /autograder/results/results.json. No GPU there: the CPU checks are graded, and results.json says
# which points need a GPU (graded later by the course staff).
# For tests: AUTOGRADER_ROOT rebases /autograder, GRADER_PYTHON picks the Python (default: setup.sh's venv).
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PY="${{GRADER_PYTHON:-{VENV}/bin/python}}"
SRC="$ROOT/source"
mkdir -p "$ROOT/results"
args=(autograde --problem __PROBLEM__ --submission "$ROOT/submission" --out "$ROOT/results" --device auto)
args+=(--submission-metadata "$ROOT/{METADATA_NAME}")  # whose grade it is (signed into results.json)
if [ -f "$SRC/{KEY_NAME}" ]; then
  chmod 600 "$SRC/{KEY_NAME}"  # the grader refuses a key file other users can read; unzip may not keep the mode
  args+=(--secret-file "$SRC/{KEY_NAME}")
else
  args+=(--secret-file "$ROOT/secret/{KEY_NAME}")  # autograde's default path; absent: an advisory, unsigned grade
fi
export GRADER_GRADESCOPE=1  # results.json says which points are graded later on a GPU
# One grade per container, by Gradescope's design: where no box can be made, results.json says "container"
export GRADER_CONTAINMENT=container
cd "$SRC" && exec "$PY" -m grader "${{args[@]}}"
"""
PROBLEM_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")  # a folder name under reference/: safe in a shell word


def run_autograder(problem: str) -> str:
    """run_autograder for one problem (a name checked against PROBLEM_NAME, so it is one plain shell word)."""
    if not problem:
        raise GradescopeError("--problem: name the problem this autograder grades (one zip per Gradescope assignment)")
    if not PROBLEM_NAME.match(problem):
        raise GradescopeError(f"--problem {problem!r}: not a problem name (a folder under reference/)")
    return RUN_AUTOGRADER_TEMPLATE.replace("__PROBLEM__", problem)


class GradescopeError(UsageError):
    """The zip cannot be built, or Gradescope's submission metadata cannot be used; str(err) is one line saying why."""


@dataclass(frozen=True)
class SubmissionMeta:
    """Who a Gradescope submission is for: its id and its members (sid, email), from submission_metadata.json."""

    submission_id: str | None
    users: tuple[dict[str, str], ...] = field(default_factory=tuple)

    @property
    def student_id(self) -> str | None:
        """The first member's SID, else their email, else their Gradescope user id; None for no member."""
        return next((u[k] for u in self.users for k in ("sid", "email", "id") if u.get(k)), None)


def _id_text(v: object) -> str:
    from grader.signing import clean_id

    return clean_id(v) or ""


def read_submission_metadata(path: Path) -> SubmissionMeta:
    """Gradescope's submission_metadata.json ({"id": ..., "users": [{"email", "id", "name", "sid"}], ...}), read as
    input that is not the grader's own: at most MAX_METADATA_BYTES, checked before it is read (a larger file is
    refused unread), strict JSON, every id bounded (grader/signing.py clean_id), at most 50 members. Raises
    GradescopeError naming what is wrong."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_METADATA_BYTES + 1)
    except OSError as e:
        raise GradescopeError(f"--submission-metadata {path}: cannot read ({e.strerror or e})") from None
    if len(raw) > MAX_METADATA_BYTES:
        raise GradescopeError(
            f"--submission-metadata {path}: over {MAX_METADATA_BYTES // 1024} kB (Gradescope's is a few kB)"
        )

    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise GradescopeError(f"--submission-metadata {path}: not JSON ({' '.join(str(e).split())[:120]})") from None
    if not isinstance(data, dict):
        raise GradescopeError(f"--submission-metadata {path}: not Gradescope's metadata (want a JSON object)")
    users = data.get("users")
    members = tuple(
        {k: _id_text(u.get(k)) for k in ("sid", "email", "id")}
        for u in (users if isinstance(users, list) else [])[:50]
        if isinstance(u, dict)
    )
    return SubmissionMeta(_id_text(data.get("id")) or None, tuple(m for m in members if any(m.values())))


def plan(root: Path = ROOT) -> list[handout.Item]:
    """The course files of the zip: the handout's allow-list without its tests, each checked as staff-only."""
    items = [i for i in handout.plan(root) if not i.rel.startswith("tests/") and i.rel != ".gitignore"]
    staff = handout.staff_paths(root)
    for it in items:
        if handout.staff_only(it.rel, root, staff) or Path(it.rel).name.startswith("solution_"):
            raise GradescopeError(f"{it.rel}: staff-only, yet on the autograder's list (grader/publish/handout.py)")
    return items


def _info(name: str, mode: int) -> zipfile.ZipInfo:
    zi = zipfile.ZipInfo(name, date_time=ZIP_DATE)
    zi.external_attr = (stat.S_IFREG | mode) << 16
    zi.create_system = 3  # Unix, so that unzip applies the mode
    zi.compress_type = zipfile.ZIP_DEFLATED
    return zi


def build(
    out: Path, key: Path | None = None, root: Path = ROOT, ref: str | None = "HEAD", problem: str = ""
) -> list[str]:
    """Write the autograder zip of commit `ref` (None: the working tree, for tests) to out (which must not exist),
    for `problem` (a name under reference/; no default: the grader has no favourite problem). Returns the names in
    the zip."""
    out, root = Path(out), Path(root)
    if out.exists() or out.is_symlink():
        raise GradescopeError(f"--out {out}: already exists (not overwritten; remove it or pick another name)")
    if not out.parent.is_dir():
        raise GradescopeError(f"--out {out}: no such directory {out.parent}")
    if key is not None and not Path(key).is_file():
        raise GradescopeError(f"--secret-file {key}: no such file (make one with `python -m grader keygen --out KEY`)")
    script = run_autograder(problem)
    try:
        if ref is None:
            files = _files(root, problem, script)
        else:
            with handout.snapshot(root, ref) as tree:
                files = _files(tree, problem, script)
    except handout.HandoutError as e:
        raise GradescopeError(str(e)) from None
    if key is not None:
        files.append((KEY_NAME, Path(key).read_bytes(), 0o600))
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if key is not None else 0o644)
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w") as z:
            for name, data, mode in files:
                z.writestr(_info(name, mode), data)
        os.link(tmp, out)  # fails if out appeared meanwhile: never overwritten
    except FileExistsError:
        raise GradescopeError(
            f"--out {out}: already exists (not overwritten; remove it or pick another name)"
        ) from None
    except OSError as e:
        raise GradescopeError(f"cannot write {out}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return [name for name, _, _ in files]


def _files(root: Path, problem: str, script: str) -> list[tuple[str, bytes, int]]:
    """(name, bytes, mode) of every file of the zip from the tree at root, checked for staff material."""
    if not (root / "reference" / problem / "spec.yaml").is_file():
        names = sorted(p.parent.name for p in (root / "reference").glob("*/spec.yaml"))
        raise GradescopeError(f"--problem {problem}: no such problem (choose from {', '.join(names) or 'none'})")
    items = plan(root)
    try:
        handout.check_starters(root)  # the zip holds the stubs too (the default submission of a local run)
    except handout.HandoutError as e:
        raise GradescopeError(str(e)) from None
    leaks = handout.staff_lines(root, handout.plan(root))
    present = {it.rel for it in items}
    files: list[tuple[str, bytes, int]] = [
        ("setup.sh", SETUP_SH.encode(), 0o755),
        ("run_autograder", script.encode(), 0o755),
    ]
    for it in items:
        data = it.src.read_bytes()
        if it.rel == handout.README:
            data = handout._readme(data.decode("utf-8"), present).encode("utf-8")
        text = data.decode("utf-8", errors="replace")
        hit = next((ln for ln in (s.strip() for s in text.splitlines()) if ln in leaks), None)
        if hit is not None:
            raise GradescopeError(f"{it.rel}: holds a line of the staff solution {leaks[hit]} ({hit[:60]!r})")
        files.append((it.rel, data, 0o755 if os.access(it.src, os.X_OK) else 0o644))
    return files
