"""Issue 28, class 2: every submission of a batch has one identity (grader/classfiles/discover.py).

One id (its folder under OUT) and one graded content per item, settled before anything is fetched: repositories
whose names collide are two students, each graded at its own commit (recorded); a cached clone is reused only for
the URL it was cloned from; folder names that become the same id are told apart; and a repository's commit is
unpacked the same way on every Python the project supports (tarfile's `filter=` needs 3.11.4, Debian 12 has 3.11.2).
What a grade is given is the item's folder (`Item.path`), so the tests read what each item's folder holds.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from grader.classfiles import discover

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
DEADLINE = "2026-12-01T23:59:59Z"


def _git_env(when: str) -> dict[str, str]:
    return {
        **os.environ,
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
        "GIT_AUTHOR_NAME": "s",
        "GIT_AUTHOR_EMAIL": "s@x",
        "GIT_COMMITTER_NAME": "s",
        "GIT_COMMITTER_EMAIL": "s@x",
    }


def _repo(path: Path, text: str, when: str = "2026-12-01T20:00:00+00:00") -> str:
    """A repository at path (made if need be) with one more commit whose assignment/glu_triton.py is text."""
    if not (path / ".git").is_dir():
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "assignment").mkdir(exist_ok=True)
    (path / "assignment" / "glu_triton.py").write_text(text)
    env = _git_env(when)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", text], cwd=path, check=True, env=env)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True, text=True
    ).stdout.strip()


@needs_git
def test_two_repositories_of_one_name_are_two_students_each_graded_at_its_own_commit(tmp_path):
    """a/glu.git and b/glu.git used to become one cache entry (cache/glu.git): the second student was graded at
    the first one's commit, then renamed glu-2. Now: two ids, each its own clone, content and recorded commit."""
    a = _repo(tmp_path / "repos" / "a" / "glu", "# alice's kernel\n")
    b = _repo(tmp_path / "repos" / "b" / "glu", "# bob's kernel\n")
    lst = tmp_path / "repos.txt"
    lst.write_text(f"{tmp_path / 'repos' / 'a' / 'glu'}\n{tmp_path / 'repos' / 'b' / 'glu'}\n")
    found = discover.discover(lst, ("glu_triton.py",), tmp_path / "work", DEADLINE)
    assert not found.skipped, found.skipped
    got = {it.sid: (it.meta["commit"], (it.path / "glu_triton.py").read_text(), it.content) for it in found.items}
    assert set(got) == {"a-glu", "b-glu"}
    assert got["a-glu"][:2] == (a, "# alice's kernel\n") and got["b-glu"][:2] == (b, "# bob's kernel\n")
    assert got["a-glu"][2] != got["b-glu"][2] and len({it.path for it in found.items}) == 2
    assert [it.meta["repository"] for it in found.items] == [str(tmp_path / "repos" / x / "glu") for x in "ab"]
    assert len(list((tmp_path / "work" / "git" / "repos").iterdir())) == 2  # one clone per URL


@needs_git
def test_a_cached_clone_is_reused_only_for_the_url_it_was_cloned_from(tmp_path):
    """The same id (glu) for another URL in a later run must not fetch the old clone's `origin`; the same URL
    again reuses its clone and sees its new commits."""
    work = tmp_path / "work"
    files = ("glu_triton.py",)
    a_path, b_path = tmp_path / "a" / "glu", tmp_path / "b" / "glu"
    a1 = _repo(a_path, "# a, first\n", "2026-11-01T10:00:00+00:00")
    b1 = _repo(b_path, "# b\n", "2026-11-01T10:00:00+00:00")
    lst = tmp_path / "list.txt"
    lst.write_text(f"{a_path}\n")
    (it,) = discover.discover(lst, files, work, DEADLINE).items
    assert (it.sid, it.meta["commit"]) == ("glu", a1)
    lst.write_text(f"{b_path}\n")  # another student's repository of the same name, same id
    (it,) = discover.discover(lst, files, work, DEADLINE).items
    assert (it.sid, it.meta["commit"]) == ("glu", b1)
    assert (it.path / "glu_triton.py").read_text() == "# b\n"
    a2 = _repo(a_path, "# a, second\n", "2026-11-02T10:00:00+00:00")
    clone = work / "git" / "repos" / discover.cache_key(str(a_path))
    inode = clone.stat().st_ino
    lst.write_text(f"{a_path}\n")
    (it,) = discover.discover(lst, files, work, DEADLINE).items
    assert it.meta["commit"] == a2 and (it.path / "glu_triton.py").read_text() == "# a, second\n"
    assert clone.stat().st_ino == inode  # the same URL: its clone fetched again, not cloned anew
    # A clone whose origin is not its URL (a cache folder from elsewhere) is never fetched from: cloned anew.
    subprocess.run(["git", "config", "remote.origin.url", str(b_path)], cwd=clone, check=True)
    (it,) = discover.discover(lst, files, work, DEADLINE).items
    assert it.meta["commit"] == a2


@needs_git
def test_ids_are_settled_before_any_fetch(tmp_path):
    """An explicit id given to two repositories is one clear error before anything is cloned; a repeated line is one
    student; an explicit id keeps its name and a name taken from a URL gives way."""
    lst = tmp_path / "list.txt"
    lst.write_text("alice /nowhere/one.git\nAlice /nowhere/two.git\n")
    with pytest.raises(discover.DiscoverError, match="give each repository its own id") as e:
        discover.discover(lst, ("glu_triton.py",), tmp_path / "work", DEADLINE)
    assert ":2:" in str(e.value)
    assert not (tmp_path / "work" / "git" / "repos").exists()  # refused before any clone was tried
    lst.write_text("x/glu.git\nx/glu.git\nglu y/other.git\nglu-2 z/k.git\nhttps://h/q/glu\n")
    assert discover.read_repo_list(lst) == [
        ("x-glu", "x/glu.git"),
        ("glu", "y/other.git"),
        ("glu-2", "z/k.git"),
        ("q-glu", "https://h/q/glu"),
    ]
    lst.write_text("https://h/q/glu\ngit@h:q/glu.git\n")  # one repository by two URLs: still two distinct ids
    assert [sid for sid, _ in discover.read_repo_list(lst)] == ["q-glu", "q-glu-2"]


def test_folder_names_that_become_one_id_are_told_apart(tmp_path):
    """'b o b', 'b_o_b' and 'B_O_B' are one folder name after SAFE_ID (and on case-insensitive file systems):
    three ids, each with its own content; a later literal 'b_o_b-2' keeps its name."""
    root = tmp_path / "class"
    for name in ("b o b", "b_o_b", "B_O_B", "b_o_b-2"):
        (root / name).mkdir(parents=True)
        (root / name / "glu_triton.py").write_text(f"# {name}\n")
    found = discover.discover(root, ("glu_triton.py",), tmp_path / "work")
    ids = {it.sid: (it.path / "glu_triton.py").read_text() for it in found.items}
    assert len(ids) == 4 and len({s.casefold() for s in ids}) == 4, ids
    assert ids["b_o_b-2"] == "# b_o_b-2\n"  # the literal name is not taken by a suffixed one
    assert sorted(ids.values()) == sorted(f"# {n}\n" for n in ("b o b", "b_o_b", "B_O_B", "b_o_b-2"))
    assert len({it.content for it in found.items}) == 4
    assert {it.meta["folder"] for it in found.items} == {"b o b", "b_o_b", "B_O_B", "b_o_b-2"}


def _tar(entries: list[tarfile.TarInfo], data: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for m in entries:
            t.addfile(m, io.BytesIO(data[m.name]) if m.isreg() else None)
    return buf.getvalue()


def _member(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, mode: int = 0o644, link: str = ""
) -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type, m.size, m.mode, m.linkname = kind, size, mode, link
    return m


def test_a_commit_is_unpacked_safely_without_tarfile_filters(tmp_path, monkeypatch):
    """extract_tree writes the files itself (Python 3.11.2 has no extractall(filter=)): folders and regular files
    only, set-uid and the archive's owner dropped; links and devices left out and named; an absolute or '..' name
    refuses the whole archive; sizes bounded. tarfile's own extraction is never called."""
    monkeypatch.setattr(tarfile.TarFile, "extractall", None)
    monkeypatch.setattr(tarfile.TarFile, "extract", None)
    good = [
        _member("a/", tarfile.DIRTYPE, mode=0o777),
        _member("a/k.py", size=3, mode=0o4755),
        _member("a/r.txt", size=2, mode=0o666),
        _member("a/out", tarfile.SYMTYPE, link="/etc/passwd"),
        _member("a/in", tarfile.SYMTYPE, link="k.py"),
        _member("a/hard", tarfile.LNKTYPE, link="a/k.py"),
        _member("a/dev", tarfile.CHRTYPE),
        _member("a/fifo", tarfile.FIFOTYPE),
    ]
    (tmp_path / "good.tar").write_bytes(_tar(good, {"a/k.py": b"abc", "a/r.txt": b"hi"}))
    dest = tmp_path / "good"
    left = discover.extract_tree(tmp_path / "good.tar", dest)
    assert sorted(left) == ["a/dev", "a/fifo", "a/hard", "a/in", "a/out"]
    assert sorted(p.name for p in (dest / "a").iterdir()) == ["k.py", "r.txt"]
    assert (dest / "a" / "k.py").read_bytes() == b"abc" and (dest / "a" / "k.py").stat().st_mode & 0o7777 == 0o755
    assert (dest / "a" / "r.txt").stat().st_mode & 0o7777 == 0o644
    for bad in ("/etc/evil", "a/../../evil", "../evil"):
        (tmp_path / "bad.tar").write_bytes(_tar([_member(bad, size=1)], {bad: b"x"}))
        shutil.rmtree(tmp_path / "bad", ignore_errors=True)
        with pytest.raises(discover.DiscoverError, match="unsafe name"):
            discover.extract_tree(tmp_path / "bad.tar", tmp_path / "bad")
        assert not (tmp_path / "evil").exists() and not Path("/etc/evil").exists()
    monkeypatch.setattr(discover, "MAX_REPO_BYTES", 4)
    shutil.rmtree(dest)
    with pytest.raises(discover.DiscoverError, match="GiB unpacked"):
        discover.extract_tree(tmp_path / "good.tar", dest)
