"""The maintainer's scripts are documented, and the lab is out of the product (issue 31, step 6).

Every file in scripts/ opens with a docstring (Python) or a header comment (shell) that says what it measures or
checks, on what machine, and gives a command line that runs it (`python ... scripts/NAME`, `bash scripts/NAME` or
`nox -s ...`); each is named in README.md or a docs/ page, beside the figure or check it backs. The old `lab`
folder (a measurement diary and session-named device checks) is gone, and no tracked file refers to a path under it
(this file, which spells the pattern, aside), grader/ included.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
# A path under the lab folder, as a word of its own ("lab/PERF_NOTES.md", "`lab/`", "(lab/..."), not "collab/".
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()
LAB_PATH = re.compile(r"(?<![\w./-])lab/")
HEADER_MAX_LINES = 80  # a header longer than this is not a header


def _scripts() -> list[Path]:
    return sorted(p for p in SCRIPTS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _header(path: Path) -> str:
    """The module docstring of a .py file, or the comment block at the top of a shell script (after a shebang)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return ast.get_docstring(ast.parse(text)) or ""
    lines = text.splitlines()[:HEADER_MAX_LINES]
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    block = []
    for line in lines:
        if not line.startswith("#"):
            break
        block.append(line[1:].strip())
    return "\n".join(block)


def test_there_are_scripts_and_only_python_or_shell_ones() -> None:
    files = _scripts()
    assert files, "scripts/ is empty"
    odd = [p.relative_to(ROOT).as_posix() for p in files if p.suffix not in (".py", ".sh")]
    assert not odd, f"scripts/ holds files that are neither Python nor shell (fold data into the script): {odd}"


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: p.name)
def test_each_script_says_what_it_measures_where_and_how_to_run_it(path: Path) -> None:
    header = _header(path)
    rel = path.relative_to(ROOT).as_posix()
    assert header, f"{rel}: no module docstring / header comment"
    run_line = re.compile(rf"^\s*(?:\S+=\S+\s+)*(?:python3?|bash)\b[^\n]*\b{re.escape(rel)}\b", re.MULTILINE)
    assert run_line.search(header), (
        f"{rel}: its header gives no command line that runs it (a line starting with `python ... {rel}` or "
        f"`bash {rel}`)"
    )
    prose = [
        ln for ln in header.splitlines() if ln.strip() and not re.match(r"\s*(?:\S+=\S+\s+)*(python3?|bash|nox)\b", ln)
    ]
    assert len(" ".join(prose).split()) >= 15, f"{rel}: the header does not say what it measures or checks"
    assert re.search(r"\b(GPU|CPU|H200|root)\b", header), f"{rel}: the header does not say what machine it needs"


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: p.name)
def test_each_script_is_named_where_its_figure_or_check_is_documented(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert any(rel in p.read_text(encoding="utf-8") for p in pages), (
        f"{rel} is named in neither README.md nor docs/: say there which figure or check it backs"
    )


def test_there_is_no_lab_folder() -> None:
    assert not (ROOT / "lab").exists(), "lab/ is back: a script a maintainer reruns goes to scripts/, with a header"


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a checkout")
def test_no_tracked_file_refers_to_a_lab_path() -> None:
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    )
    hits = []
    for name in files:
        if not name or name == THIS:
            continue
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if LAB_PATH.search(line):
                hits.append(f"{name}:{n}: {line.strip()[:120]}")
    assert not hits, "tracked files still point into lab/:\n" + "\n".join(hits)
