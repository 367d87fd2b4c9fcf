"""Official grading from a Python in a private home (issue 40 item 5b): pyenv or conda under a 0700 /root or
/home/x, as `nox -s grade` runs it. Outside a box the grade's uid cannot start that Python; the grade (and the
preflight, before any grade) says which folders are in the way and the one command that opens them for passing
through, or a box (which binds the interpreter's own folders under fresh 0755 parents, grader/box.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader import box, identity, pipeline


def test_the_closed_folders_on_the_way_are_named_outermost_first(tmp_path):
    home = tmp_path / "home"
    prefix = home / ".pyenv" / "versions" / "3.12"
    (prefix / "bin").mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    os.chmod(home, 0o700)
    os.chmod(home / ".pyenv", 0o711)
    os.chmod(home / ".pyenv" / "versions", 0o750)
    exe = prefix / "bin" / "python"

    def mine(paths: list[Path]) -> list[Path]:  # pytest's own base folder is 0700 too: only what is under tmp_path
        return [d for d in identity.closed_folders(paths) if tmp_path in d.parents]

    assert mine([exe, prefix]) == [home, home / ".pyenv" / "versions"]
    os.chmod(home, 0o701)
    os.chmod(home / ".pyenv" / "versions", 0o755)
    assert mine([exe]) == []


def test_the_reason_names_the_command_that_fixes_it(tmp_path, monkeypatch):
    private = tmp_path / "private home"
    private.mkdir(mode=0o700)
    os.chmod(tmp_path, 0o755)
    monkeypatch.setattr(sys, "executable", str(private / "bin" / "python"))
    monkeypatch.setattr(box, "interpreter_paths", lambda executable=None: [private / "lib"])
    why = identity.unreachable_python("PermissionError: [Errno 13] Permission denied")
    command = why.split("`chmod o+x ", 1)[1].split("`", 1)[0]
    assert f"'{private}'" in command, why  # quoted for the shell: the name has a space
    assert "apt-get install bubblewrap" in why and "Permission denied" in why


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="a separate uid needs root")
def test_without_a_box_a_python_under_a_private_folder_is_refused_with_the_fix(tmp_path, monkeypatch):
    """The real probe, as the grade's uid: this Python reached through a link in a 0700 folder (as a venv's
    bin/python under a pyenv in a private home is), no box. The grade falls back to the grader's own uid (never official) and
    its reason carries the command."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(tmp_path, 0o755)
    exe = private / "python"
    exe.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(exe))
    monkeypatch.setenv(box.BWRAP_ENV, str(tmp_path / "no-bwrap"))  # no box: the uid meets the folder's modes
    monkeypatch.setenv(box.DECLARE_ENV, box.CONTAINER)
    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    box.support.cache_clear()
    try:
        with pipeline.open_scratch() as scratch:
            assert not scratch.identity.separated
            why = " ".join(scratch.identity.why_not)
    finally:
        box.support.cache_clear()
    assert "could not start this Python" in why and "`chmod o+x " in why, why
    assert str(private) in why.split("`chmod o+x ", 1)[1].split("`", 1)[0], why
