"""SUBMISSIONS -> the list of submissions to grade, one `Item` each, whatever the source: a folder of
per-student folders, a Gradescope "export submissions" folder or zip, or a text file listing git repositories.

Every submission has one identity: one id (its folder under OUT) and one graded content. Nothing here runs
submission code: files are copied, hashed and, for git, read with `git archive`.

Why: docs/SECURITY.md, "Modules: the why", grader/classfiles/discover.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from grader import filetree

GRADESCOPE_METADATA = "submission_metadata.yml"  # the same name grader/report/tareport.py reads
MAX_ZIP_BYTES = 4 * 2**30  # a class's export, unpacked; a zip that claims more is refused
MAX_ZIP_MEMBERS = 200_000
NESTED_DEPTH = 3  # how far down a student's files may sit
SAFE_ID = re.compile(r"[^A-Za-z0-9._@+-]")
GIT_TIMEOUT_S = 300
MAX_REPO_BYTES = 2 * 2**30  # a repository's graded commit, unpacked; a student's files are at most 16 MiB of it
MAX_REPO_MEMBERS = 200_000
MAX_TREE_DEPTH = 64  # content_hash does not go further down a submission's folders


class DiscoverError(Exception):
    """SUBMISSIONS cannot be read; one line saying what is wrong and how to fix it."""


@dataclass
class Item:
    sid: str  # the student (or Gradescope submission) id: also the name of its folder under OUT
    path: Path  # the folder that is graded
    meta: dict[str, Any] = field(default_factory=dict)  # where it came from: source, commit, repository
    content: str = ""  # content_hash(path)

    def to_json(self) -> dict[str, Any]:
        return {"sid": self.sid, "path": str(self.path), "meta": self.meta, "content": self.content}


@dataclass
class Skipped:
    """A submission that could not be fetched (a repository that does not clone, no commit before the deadline)."""

    sid: str
    why: str


@dataclass
class Found:
    items: list[Item]
    skipped: list[Skipped]
    kind: str  # "folders" | "gradescope" | "git"
    metadata: Path | None = None  # Gradescope's submission_metadata.yml, copied into OUT


def safe_id(name: str) -> str:
    """A folder name for OUT: the id with anything but letters, digits and ._@+- replaced (never empty, never
    hidden, never '..')."""
    s = SAFE_ID.sub("_", name.strip())[:200].lstrip(".")
    return s or "_"


def content_hash(root: Path) -> str:
    """sha256 over every file under root (relative path, executable bit, bytes; a link by its target), in sorted
    order: the same files give the same hash wherever they are, and any change of a byte or a name changes it.
    A folder nested deeper than MAX_TREE_DEPTH counts by its name only (filetree: no recursion); more than
    MAX_REPO_MEMBERS entries raise TreeError (the caller skips that submission, not the class)."""
    h = hashlib.sha256()
    tree = filetree.walk(root, max_depth=MAX_TREE_DEPTH, max_entries=MAX_REPO_MEMBERS, skip=frozenset({".git"}))
    for rel, st, p in tree.entries:
        if stat.S_ISLNK(st.st_mode):
            h.update(b"L" + rel.encode() + b"\0" + os.readlink(p).encode() + b"\0")
        elif stat.S_ISREG(st.st_mode):
            h.update(b"F" + rel.encode() + b"\0" + (b"x" if st.st_mode & 0o111 else b"-"))
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            h.update(b"\0")
    for rel in tree.too_deep:
        h.update(b"D" + rel.encode() + b"\0")
    return h.hexdigest()


def submission_root(folder: Path, files: tuple[str, ...]) -> Path:
    """The shallowest folder under `folder` (itself included, at most NESTED_DEPTH down) holding one of `files`;
    `folder` itself when none does (the grade then says which files are missing)."""
    level = [folder]
    for _ in range(NESTED_DEPTH + 1):
        hits = [d for d in level if any((d / f).is_file() for f in files)]
        if hits:
            return sorted(hits)[0]
        level = sorted(c for d in level for c in d.iterdir() if c.is_dir() and not c.is_symlink() and c.name[0] != ".")
    return folder


def assign_ids(items: list[Item]) -> list[Item]:
    """Make every id its own folder under OUT, in order: the first item keeps its id, a later one whose id names
    the same folder (equal, or equal but for case: macOS and Windows file systems merge those) gets `-2`, `-3`, ...,
    never an id that another item has or gets."""
    taken = {it.sid.casefold() for it in items}
    seen: set[str] = set()
    for it in items:
        key = it.sid.casefold()
        if key in seen:
            n = 2
            while f"{it.sid}-{n}".casefold() in taken:
                n += 1
            it.meta.setdefault("listed_as", it.sid)
            it.sid = f"{it.sid}-{n}"
            key = it.sid.casefold()
            taken.add(key)
        seen.add(key)
    return items


def _folders(root: Path, files: tuple[str, ...]) -> list[Item]:
    subs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and not d.is_symlink())
    return [Item(safe_id(d.name), submission_root(d, files), {"source": "folder", "folder": d.name}) for d in subs]


def _gradescope(root: Path, files: tuple[str, ...]) -> tuple[list[Item], Path] | None:
    """Gradescope's export: submission_metadata.yml in the class root (root, or the one folder it wraps: the export's
    own top folder). Never one inside a submission folder: a student may upload any file, and such a file made the
    class one submission (theirs) with the others silently left out. An entry that is not one folder of the export
    ('..', a path) is refused."""
    from grader.report import gsexport, tareport  # its reader: the same names and submitters as the TA report

    meta = gsexport.class_root(root) / GRADESCOPE_METADATA
    if not meta.is_file():
        return None
    try:
        folders = tareport.read_gradescope_metadata(meta)
    except tareport.BadResults as e:
        raise DiscoverError(f"{meta}: {e}") from None
    items = []
    for name, people in sorted(folders.items()):
        if not gsexport.is_row_folder(name):
            raise DiscoverError(f"{meta}: names {name[:60]!r}, not a folder of the export (is this Gradescope's file?)")
        d = meta.parent / name
        if d.is_dir() and not d.is_symlink():
            sids = [p.get("sid") or p.get("email") or p.get("name") or "" for p in people]
            items.append(Item(safe_id(name), submission_root(d, files), {"source": "gradescope", "submitters": sids}))
    return items, meta


def _unzip(zpath: Path, dest: Path) -> Path:
    """Gradescope's export zip, unpacked into dest once (again when the zip changes). Refuses absolute names,
    '..', links and more than MAX_ZIP_BYTES unpacked."""
    stamp = dest / ".unpacked-from"
    sig = f"{zpath.resolve()} {zpath.stat().st_size} {zpath.stat().st_mtime_ns}"
    if stamp.is_file() and stamp.read_text() == sig:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    try:
        with zipfile.ZipFile(zpath) as z:
            infos = z.infolist()
            if len(infos) > MAX_ZIP_MEMBERS or sum(i.file_size for i in infos) > MAX_ZIP_BYTES:
                raise DiscoverError(f"{zpath}: over {MAX_ZIP_MEMBERS} files or {MAX_ZIP_BYTES >> 30} GiB unpacked")
            for i in infos:
                name = Path(i.filename)
                if name.is_absolute() or ".." in name.parts or stat.S_ISLNK(i.external_attr >> 16):
                    raise DiscoverError(f"{zpath}: unsafe member {i.filename!r} (absolute, '..' or a link)")
                z.extract(i, dest)
    except zipfile.BadZipFile as e:
        raise DiscoverError(f"{zpath}: not a zip file ({e})") from None
    stamp.write_text(sig)
    return dest


def parse_deadline(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise DiscoverError(f"--deadline {text!r}: not an ISO 8601 time (e.g. 2026-12-01T23:59:59-08:00)") from None
    if when.tzinfo is None:
        raise DiscoverError(f"--deadline {text!r}: give a time zone (e.g. -08:00 or Z), or git reads it as local")
    return when


def _repo_name(url: str) -> tuple[str, str]:
    """(owner, name) of a repository URL or path: `https://host/org/glu.git`, `git@host:org/glu`, `/srv/org/glu`."""
    parts = [p for p in re.split(r"[/:\\]", url.rstrip("/")) if p]
    name = re.sub(r"\.git$", "", parts[-1]) if parts else url
    return (parts[-2] if len(parts) > 1 else ""), name


def read_repo_list(path: Path) -> list[tuple[str, str]]:
    """(id, url) per repository of the list, every id its own: lines are `URL` (the id is the repository's name)
    or `ID URL` / `ID,URL`. Settled here, before any fetch: a line repeating an earlier one (same id, same URL) is
    read once; an explicit id given to two different URLs is an error; repositories whose names collide
    (a/glu.git, b/glu.git) are named `owner-name` (a-glu, b-glu), then -2, -3 if that still collides."""
    entries: list[tuple[str, str, int, bool]] = []  # id, url, line, explicit
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if not line:
            continue
        parts = [p for p in re.split(r"[\s,]+", line) if p]
        if len(parts) == 1:
            entries.append((safe_id(_repo_name(parts[0])[1]), parts[0], n, False))
        elif len(parts) == 2:
            entries.append((safe_id(parts[0]), parts[1], n, True))
        else:
            raise DiscoverError(f"{path}:{n}: expected `URL` or `ID URL`, got {len(parts)} fields")
    if not entries:
        raise DiscoverError(f"{path}: lists no repositories (one `URL` or `ID URL` a line)")
    unique: list[tuple[str, str, int, bool]] = []
    first: dict[tuple[str, str], int] = {}
    explicit: dict[str, tuple[str, int]] = {}
    for sid, url, n, given in entries:
        if (sid.casefold(), url) in first:
            continue  # the same line twice: one repository, one grade
        first[(sid.casefold(), url)] = n
        if given:
            other = explicit.get(sid.casefold())
            if other is not None:
                raise DiscoverError(
                    f"{path}:{n}: id {sid!r} is also line {other[1]}'s, for another repository ({other[0]}): "
                    "give each repository its own id"
                )
            explicit[sid.casefold()] = (url, n)
        unique.append((sid, url, n, given))
    counts: dict[str, int] = {}
    for sid, *_ in unique:
        counts[sid.casefold()] = counts.get(sid.casefold(), 0) + 1
    items: list[tuple[bool, Item]] = []
    for sid, url, _n, given in unique:
        if not given and counts[sid.casefold()] > 1:  # a/glu.git and b/glu.git: the owner tells them apart
            owner, name = _repo_name(url)
            sid = safe_id(f"{owner}-{name}" if owner else name)
        items.append((given, Item(sid, Path(), {"repository": url})))
    # The explicit ids first, so that only a name taken from a URL is ever suffixed, never an id the TA wrote.
    assign_ids([it for given, it in items if given] + [it for given, it in items if not given])
    return [(it.sid, it.meta["repository"]) for _given, it in items]


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # a private repository without credentials fails, not waits
    r = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, env=env, check=False
    )
    if r.returncode != 0:
        raise DiscoverError(" ".join((r.stderr or r.stdout).split())[-300:] or f"git {args[0]} failed")
    return r.stdout.strip()


def cache_key(url: str) -> str:
    """The clone cache's folder for url: its repository name (for people reading the folder) and a hash of the
    whole URL, so two repositories of one name never share a clone."""
    name = safe_id(_repo_name(url)[1])[:60]
    return f"{name}-{hashlib.sha256(url.encode()).hexdigest()[:24]}.git"


def _clone_for(url: str, cache: Path) -> Path:
    """A bare clone of url, up to date: the cached one when it was cloned from this very URL, else a new one."""
    repo = cache / "repos" / cache_key(url)
    if (repo / "HEAD").is_file():
        try:
            same = _git("config", "--get", "remote.origin.url", cwd=repo) == url
        except DiscoverError:
            same = False
        if same:  # fetched from the URL itself, not from whatever `origin` says
            _git("fetch", "--quiet", "--force", url, "+HEAD:refs/grader/head", cwd=repo)
            return repo
    shutil.rmtree(repo, ignore_errors=True)
    repo.parent.mkdir(parents=True, exist_ok=True)
    _git("clone", "--quiet", "--bare", url, str(repo))
    _git("update-ref", "refs/grader/head", "HEAD", cwd=repo)
    return repo


def extract_tree(tarball: Path, dest: Path) -> list[str]:
    """Unpack `git archive`'s tar into the new folder dest, writing every file itself, the same on every Python
    the project supports (tarfile's extraction filters, `filter="data"`, came in 3.11.4; Debian 12's Python is
    3.11.2). A name that is absolute or has a '..' refuses the archive; only folders and regular files are written
    (mode 0644, or 0755 when executable: no set-uid, no owner from the archive), never through a link, at most
    MAX_REPO_MEMBERS entries and MAX_REPO_BYTES. Links, devices and fifos are left out (a grade copies regular
    files only): returns their names."""
    left_out: list[str] = []
    total = 0
    dest.mkdir(parents=True)
    with tarfile.open(tarball, mode="r:") as t:
        for count, m in enumerate(t, 1):
            if count > MAX_REPO_MEMBERS:
                raise DiscoverError(f"over {MAX_REPO_MEMBERS} files in the commit")
            parts = [p for p in PurePosixPath(m.name).parts if p != "."]
            if m.name.startswith("/") or ".." in parts or "\0" in m.name:
                raise DiscoverError(f"unsafe name in the archive: {m.name[:200]!r} (absolute or with '..')")
            if not parts:
                continue
            path = dest.joinpath(*parts)
            if m.isdir():
                path.mkdir(parents=True, exist_ok=True)
            elif m.isreg():
                total += m.size
                if total > MAX_REPO_BYTES:
                    raise DiscoverError(f"the commit is over {MAX_REPO_BYTES >> 30} GiB unpacked")
                path.parent.mkdir(parents=True, exist_ok=True)
                mode = 0o755 if m.mode & 0o100 else 0o644
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
                src = t.extractfile(m)
                assert src is not None  # a regular member always has a file
                with os.fdopen(fd, "wb") as f, src:
                    shutil.copyfileobj(src, f, 1 << 20)
                os.chmod(path, mode)  # whatever the umask
            elif len(left_out) < 100:
                left_out.append(m.name[:200])
    return left_out


def fetch_repo(sid: str, url: str, deadline: datetime, cache: Path) -> Item | Skipped:
    """Clone (or fetch again) url into its own cache entry (`cache_key`) and export its last commit before the
    deadline (committer date, on the default branch's first-parent history) into cache/trees/<sid>."""
    tree = cache / "trees" / sid
    try:
        repo = _clone_for(url, cache)
        sha = _git(
            "rev-list", "-n", "1", "--first-parent", f"--before={deadline.isoformat()}", "refs/grader/head", cwd=repo
        )
        if not sha:
            return Skipped(sid, f"no commit before the deadline {deadline.isoformat()} in {url}")
        shutil.rmtree(tree, ignore_errors=True)
        tree.parent.mkdir(parents=True, exist_ok=True)
        tarball = cache / "archives" / f"{sid}.tar"  # not beside the trees: an id may end in .tar
        tarball.parent.mkdir(parents=True, exist_ok=True)
        _git("archive", "--format=tar", "-o", str(tarball), sha, cwd=repo)
        try:
            left_out = extract_tree(tarball, tree)
        finally:
            tarball.unlink(missing_ok=True)
        when = _git("show", "-s", "--format=%cI", sha, cwd=repo)
    except (DiscoverError, subprocess.TimeoutExpired, OSError, tarfile.TarError) as e:
        return Skipped(sid, f"could not fetch {url}: {e}")
    meta: dict[str, Any] = {"source": "git", "repository": url, "commit": sha, "committed": when}
    if left_out:
        meta["left_out"] = left_out  # links and special files: not part of any grade
    return Item(sid, tree, meta)


def discover(src: Path, files: tuple[str, ...], work: Path, deadline: str | None = None) -> Found:
    """Every submission under src. work: where what must be unpacked or cloned goes (state.inputs_dir)."""
    if not src.exists():
        raise DiscoverError(f"{src}: no such file or folder (pass a folder of submissions, an export zip or a list)")
    if src.is_file() and zipfile.is_zipfile(src):
        found = _gradescope(_unzip(src, work / "unzipped"), files)
        if found is None:
            raise DiscoverError(f"{src}: a zip without {GRADESCOPE_METADATA} (not a Gradescope export)")
        return _content(Found(assign_ids(found[0]), [], "gradescope", found[1]))
    if src.is_file():
        if deadline is None:
            raise DiscoverError(
                f"{src}: a list of repositories needs --deadline (grade each at its last commit before)"
            )
        when = parse_deadline(deadline)
        repos = read_repo_list(src)  # every id settled before the first fetch
        (work / "git").mkdir(parents=True, exist_ok=True)
        items, skipped = [], []
        for sid, url in repos:
            r = fetch_repo(sid, url, when, work / "git")
            if isinstance(r, Item):
                r.path = submission_root(r.path, files)
                items.append(r)
            else:
                skipped.append(r)
        return _content(Found(items, skipped, "git"))
    gs = _gradescope(src, files)
    if gs is not None:
        return _content(Found(assign_ids(gs[0]), [], "gradescope", gs[1]))
    items = _folders(src, files)
    if not items:
        raise DiscoverError(f"{src}: holds no submission folders (one folder per student, each with its files)")
    return _content(Found(assign_ids(items), [], "folders"))


def _content(found: Found) -> Found:
    """Each item's content hash; an item whose folder cannot be hashed is skipped (said in the batch's list),
    never the class."""
    items = []
    for it in found.items:
        it.path = it.path.resolve()
        try:
            it.content = content_hash(it.path)
        except (filetree.TreeError, OSError) as e:
            found.skipped.append(Skipped(it.sid, f"its folder cannot be read whole: {e}"))
            continue
        items.append(it)
    found.items = items
    return found
