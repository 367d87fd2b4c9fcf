"""grader/identity.py and the build cache's integrity: who may read or write what, which uid a grade uses, and
that a cached library whose bytes changed is not used."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from grader import identity
from grader.cuda import build


def test_a_non_root_grader_cannot_separate_and_says_why(monkeypatch):
    monkeypatch.setattr(os, "getuid", lambda: 1234)
    ident = identity.pick_identity()
    assert not ident.separated and ident.uid == 1234
    assert any("not root" in w for w in ident.why_not)
    assert ident.popen_kwargs() == {}


def test_root_picks_a_fresh_uid_or_the_configured_one(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(identity, "LOCK_DIRS", (tmp_path / "uids",))
    monkeypatch.delenv("GRADER_STUDENT_UID", raising=False)
    a = identity.pick_identity()
    assert a.separated and identity.UID_RANGE[0] <= a.uid <= identity.UID_RANGE[1]
    assert a.popen_kwargs() == {"user": a.uid, "group": a.gid, "extra_groups": [], "umask": 0o077}
    first = identity.pick_identity("10001")
    assert first.uid == 10001
    first.release()
    # Issue 38, item 5: a uid serves one grade. The configured one, given back, is not handed out twice (a batch's
    # second grade would share its keyrings and files): the next grade gets a fresh one, and so does a third.
    second, third = identity.pick_identity("10001"), identity.pick_identity("10001")
    assert second.separated and len({10001, second.uid, third.uid}) == 3
    assert {p.name for p in (tmp_path / "uids").glob("*.used")} >= {f"{u}.used" for u in (10001, second.uid)}
    assert not identity.pick_identity("0").separated  # never root
    assert not identity.pick_identity("abc").separated
    monkeypatch.setenv("GRADER_SAME_UID", "1")
    assert not identity.pick_identity().separated  # asked for: a local or test grade


def test_modes_decide_what_another_uid_may_read_and_write(tmp_path):
    other = identity.Identity(1_950_000, 1_950_000, True)
    d = tmp_path / "d"
    d.mkdir()
    f = d / "f"
    f.write_text("x")
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o755)
    os.chmod(f, 0o644)
    assert identity.readable_by(f, other) == bool(_all_traversable(tmp_path))
    os.chmod(f, 0o600)
    assert not identity.readable_by(f, other)
    os.chmod(d, 0o777)
    assert identity.writable_by(d, other)
    os.chmod(d, 0o755)
    assert not identity.writable_by(d, other)


def _all_traversable(p: Path) -> bool:
    return all(os.stat(q).st_mode & stat.S_IXOTH for q in p.resolve().parents)


def test_a_worker_environment_is_an_allow_list(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("PATH", "/usr/bin")
    env = identity.worker_env(tmp_path, tmp_path / "lib")
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["PATH"] == "/usr/bin"
    assert env["USER"] and env["LOGNAME"]  # getpass.getuser() needs no passwd entry for a per-grade uid
    for k in ("HOME", "TMPDIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME"):
        assert env[k].startswith(str(tmp_path)), k


def test_the_scratch_holds_only_grader_child_and_is_removed(tmp_path):
    ident = identity.Identity(os.getuid(), os.getgid(), False)
    with identity.Scratch(ident, tmp_path / "trusted", base=tmp_path) as s:
        assert (s.lib / "grader" / "child" / "worker.py").is_file()
        assert not (s.lib / "grader" / "pipeline.py").exists() and not (s.lib / "reference").exists()
        assert stat.S_IMODE(os.stat(s.home).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(tmp_path / "trusted").st_mode) == 0o700
        sub = tmp_path / "sub"
        sub.mkdir()
        (sub / "glu_triton.py").write_text("x = 1\n")
        os.symlink("/etc/hostname", sub / "link.py")
        skipped = s.add_submission(sub)
        assert (s.submission / "glu_triton.py").read_text() == "x = 1\n" and skipped == ["link.py"]
        root = s.root
    assert not root.exists()


@pytest.mark.nvcc
def test_a_cached_library_whose_bytes_changed_is_rebuilt(tmp_path, repo_root):
    if build.find_nvcc() is None:
        pytest.skip("needs nvcc")
    src = tmp_path / "glu_cuda.cu"
    shutil.copy(repo_root / "tests/data/problems/glu/correct/cuda_row_blocks/glu_cuda.cu", src)
    first = build.build_cuda(src, cache_dir=tmp_path / "cache", timeout_s=300)
    assert first.ok and not first.cached and first.lib is not None
    again = build.build_cuda(src, cache_dir=tmp_path / "cache", timeout_s=300)
    assert again.ok and again.cached
    first.lib.write_bytes(b"planted by someone else")  # another submission, or anything that reached the cache
    third = build.build_cuda(src, cache_dir=tmp_path / "cache", timeout_s=300)
    assert third.ok and not third.cached
    assert third.lib is not None and third.lib.read_bytes() != b"planted by someone else"


def test_the_probe_passes_for_a_uid_that_can_start_the_worker(tmp_path, separated):
    ident = identity.pick_identity()
    # The scratch goes in the system's temporary folder, as in a grade: pytest's tmp_path is under a 0700 folder.
    with identity.Scratch(ident, tmp_path / "trusted") as s:
        assert identity.probe(ident, s) == ""


def test_the_probe_names_what_the_uid_cannot_reach(tmp_path, separated, no_box, monkeypatch):
    """Without a box, the untrusted uid cannot enter a 0700 folder holding the interpreter (as with a venv under
    /root): the probe reports it (and the grade then falls back, unofficial), rather than every worker failing
    later. (A box shows the interpreter's folders to the uid through 0755 folders of its own.)"""
    import sys

    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    os.chmod(hidden, 0o700)
    os.symlink(sys.executable, hidden / "python")
    monkeypatch.setattr(sys, "executable", str(hidden / "python"))
    ident = identity.pick_identity()
    with identity.Scratch(ident, tmp_path / "trusted") as s:
        why = identity.probe(ident, s)
    assert "Permission denied" in why or "PermissionError" in why, why
