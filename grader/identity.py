"""Who runs what: the three kinds of process of a grade, and the private scratch of its untrusted ones.

- the trusted parent (this process): reads the spec and the key, computes the truth, decides and writes the grade;
- trusted workers (the baselines' timing worker): the grader's own uid, their own compile caches;
- untrusted workers (the submission's import, calls and timing, the GPU compile check) *and the nvcc build of the
  student's sources*: a separate unprivileged uid, a fresh environment, and a scratch of their own.

Why: docs/SECURITY.md, "Modules: the why", grader/identity.py.
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from grader import box

CHILD_PACKAGE = Path(__file__).resolve().parent / "child"
UID_RANGE = (1_900_000, 1_999_999)  # far from any human or system account; no passwd entry is needed
MAX_CONFIGURED = 100_000  # the most uids a GRADER_STUDENT_UID range may name
LOCK_DIRS = (Path("/run/kernel-grader/uids"),)  # tried first: one per machine; then <GRADER_CACHE>/uids
MAX_SUBMISSION_FILES = 64
MAX_SUBMISSION_BYTES = 16 * 1024 * 1024
# Environment variables a worker may inherit (everything else, the secret included, stays in the parent).
_PASS_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH",
    "OMP_NUM_THREADS",
    "SYSTEMROOT",
)


@dataclass
class Identity:
    """The uid (and gid) untrusted processes run as; the grader's own when `separated` is False. A pooled identity
    holds its uid's lock until `release()` (Scratch.close) or until it is garbage-collected."""

    uid: int
    gid: int
    separated: bool
    why_not: list[str] = field(default_factory=list)
    lock: IO[bytes] | None = field(default=None, repr=False, compare=False)

    def popen_kwargs(self) -> dict[str, object]:
        """subprocess.Popen arguments that start a process as this identity (nothing when not separated)."""
        if not self.separated:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": [], "umask": 0o077}

    def release(self) -> None:
        """Give the uid back to the pool (after every process of it was killed)."""
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def _uids_in_use() -> set[int]:
    used = set()
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if pid.isdigit():
            try:
                used.add(os.stat(f"/proc/{pid}").st_uid)
            except OSError:
                pass
    return used


def configured_uids(raw: str) -> list[int]:
    """GRADER_STUDENT_UID's uids, in the order to try them: `N`, or a range `A-B` (inclusive). ValueError, saying
    what is wrong, for anything else, root included."""
    lo, dash, hi = raw.strip().partition("-")
    try:
        a, b = int(lo), int(hi) if dash else int(lo)
    except ValueError:
        raise ValueError(
            f"GRADER_STUDENT_UID={raw!r} is not a uid or a range of uids (e.g. 10001 or 20000-20999)"
        ) from None
    if a <= 0 or b < a or b - a >= MAX_CONFIGURED:
        raise ValueError(
            f"GRADER_STUDENT_UID={raw!r}: uids above 0 (never root), A-B with A <= B, at most {MAX_CONFIGURED} of them"
        )
    return list(range(a, b + 1))


def default_cache_dir() -> Path:
    """The grader's cache root: $GRADER_CACHE, else $XDG_CACHE_HOME/kernel-grader, else ~/.cache/kernel-grader."""
    if os.environ.get("GRADER_CACHE"):
        return Path(os.environ["GRADER_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "kernel-grader"
    return Path.home() / ".cache" / "kernel-grader"


def lock_dir() -> Path | None:
    """The pool's lock folder: the grader's own, 0700, not a link; None when none can be made."""
    for d in (*LOCK_DIRS, default_cache_dir() / "uids"):
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.lstat(d)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            os.chmod(d, 0o700)
            return d
        except OSError:
            continue
    return None


def _take(uid: int, locks: Path) -> IO[bytes] | None:
    """The uid's lock, held (an open file with an exclusive flock), or None when another grade holds it."""
    try:
        f = open(locks / f"{uid}.lock", "ab")  # noqa: SIM115 (held for the grade's life)
    except OSError:
        return None
    import fcntl  # POSIX only: pick_identity calls this only where there are uids (never on Windows)

    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    return f


def pick_identity(env_uid: str | None = None) -> Identity:
    """The untrusted identity for one grade, when we are root: a uid no other live grade holds (see the module
    docstring), GRADER_STUDENT_UID's first, else a random one."""
    if not hasattr(os, "setuid"):  # Windows: no uids at all
        return Identity(0, 0, False, ["this system has no user ids to run submission code under (not POSIX)"])
    me = os.getuid()
    if me != 0:
        why = "the grader is not root, so submission code runs as the grader's own user"
        return Identity(me, os.getgid(), False, [why])
    if os.environ.get("GRADER_SAME_UID") == "1":  # a local or test grade that wants the grader's own user
        return Identity(me, os.getgid(), False, ["GRADER_SAME_UID=1: submission code runs as the grader's own user"])
    raw = env_uid if env_uid is not None else os.environ.get("GRADER_STUDENT_UID")
    first: list[int] = []
    if raw:
        try:
            first = configured_uids(raw)
        except ValueError as e:
            return Identity(me, os.getgid(), False, [str(e)])
    locks = lock_dir()
    if locks is None:
        why = "no folder for the uid pool's locks (/run, GRADER_CACHE): set GRADER_CACHE to a writable folder"
        return Identity(me, os.getgid(), False, [why])
    rng = random.SystemRandom()
    rng.shuffle(first)  # concurrent grades of a range do not all queue on its first uid
    candidates = [*first[:1000], *(rng.randint(*UID_RANGE) for _ in range(200))]
    used = _uids_in_use()
    for uid in candidates:
        if uid in used or uid == me or (locks / f"{uid}.used").exists():
            continue
        lock = _take(uid, locks)
        if lock is None:
            continue
        if uid in _uids_in_use() or (locks / f"{uid}.used").exists():  # taken meanwhile (another grader's)
            lock.close()
            continue
        # Fresh per grade: a uid is handed out once while the lock folder lasts (/run: until reboot), the
        # configured one included, so no two grades of a batch share a uid, nor anything keyed by it (keyrings,
        # files it owns) that a box did not end.
        try:
            (locks / f"{uid}.used").touch(mode=0o600, exist_ok=False)
        except OSError:
            lock.close()
            continue
        # gid = uid: a group only this grade has (a passwd entry's group may be shared by every pooled uid).
        return Identity(uid, uid, True, lock=lock)
    return Identity(me, os.getgid(), False, ["no free uid for this grade's submission code"])  # pragma: no cover


def worker_env(home: Path | None, pythonpath: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A fresh environment for a worker: a short allow-list from ours, caches and temp files under `home`."""
    # GRADER_PASS_ENV: more names a course (or the grader's tests) passes to workers, comma-separated.
    extra_names = [n.strip() for n in os.environ.get("GRADER_PASS_ENV", "").split(",") if n.strip()]
    env = {k: os.environ[k] for k in (*_PASS_ENV, *extra_names) if k in os.environ and not k.startswith("GRADER_")}
    # USER/LOGNAME: getpass.getuser() (Inductor, Triton) reads them before it asks the passwd database, which has
    # no entry for a uid picked per grade (KeyError: 'getpwuid(): uid not found', H200).
    env.update({"USER": "grader-worker", "LOGNAME": "grader-worker"})
    env.update(
        {
            "PYTHONPATH": str(pythonpath),
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONSAFEPATH": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if home is not None:
        env.update(
            {
                "HOME": str(home),
                "TMPDIR": str(home / "tmp"),
                "XDG_CACHE_HOME": str(home / "cache"),
                "TRITON_CACHE_DIR": str(home / "triton"),
                "TORCHINDUCTOR_CACHE_DIR": str(home / "inductor"),
                "TORCH_EXTENSIONS_DIR": str(home / "torch_extensions"),
                "CUDA_CACHE_PATH": str(home / "nv"),
            }
        )
    env.update(extra or {})
    return env


class Scratch:
    """One grade's private directories (see the module docstring) and the box its untrusted processes start in
    (grader/box.py): `untrusted(cmd, cwd)` is how every one of them is started. Use as a context manager.

    `containment` is what holds the grade's untrusted processes, recorded in results.json: "box" (each one in a
    bubblewrap box: namespaces, an allow-list view, a cgroup), "container" (no box could be made, and the deployment
    declares one grade per container), "none"; `box_why` says why there is no box."""

    def __init__(
        self, identity: Identity, trusted_cache: Path, base: Path | None = None, hidden: tuple[Path, ...] = ()
    ):
        self.identity = identity
        self.root = Path(tempfile.mkdtemp(prefix="grade-", dir=str(base) if base else None))
        # Only the grader and the grade's own gid may pass (0710); read-only folders 0750, files 0640. Without a
        # separate uid the untrusted processes are the grader's own: owner only.
        self.dir_mode, self.file_mode = (0o750, 0o640) if identity.separated else (0o700, 0o600)
        self._own(self.root, 0o710 if identity.separated else 0o700)
        self.ro = self.root / "ro"
        self.lib = self.ro / "lib"
        self.submission = self.ro / "submission"
        self.libs = self.ro / "libs"
        self.home = self.root / "home"
        for d in (self.ro, self.lib, self.submission, self.libs):
            d.mkdir(mode=0o700)
            self._own(d, self.dir_mode)
        self.home.mkdir(mode=0o700)
        for sub in ("tmp", "cache", "triton", "inductor", "build"):
            (self.home / sub).mkdir(mode=0o700)
        if identity.separated:
            for d in [self.home, *self.home.iterdir()]:
                os.chown(d, identity.uid, identity.gid)
        # Only grader/child is importable from here: not the trusted modules, not reference/ (staff solutions).
        pkg = self.lib / "grader"
        pkg.mkdir(mode=0o700)
        (pkg / "__init__.py").write_text('"""Only grader.child is here: the code that runs beside student code."""\n')
        shutil.copytree(CHILD_PACKAGE, pkg / "child", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for dirpath, _dirnames, filenames in os.walk(self.ro):
            self._own(Path(dirpath), self.dir_mode)
            for f in filenames:
                self._own(Path(dirpath) / f, self.file_mode)
        # The trusted workers' caches: written only by the grader's uid, never by the untrusted one.
        self.trusted_cache = trusted_cache
        for sub in ("triton", "inductor"):
            (trusted_cache / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(trusted_cache, 0o700)
        self.box: box.Box | None = None
        self.box_why = box.support() if identity.separated else "submission code runs as the grader's own user"
        self.containment = box.declared()
        if identity.separated and not self.box_why:
            self.box = self._make_box(trusted_cache, hidden)
            self.containment = box.BOX

    def _make_box(self, trusted_cache: Path, hidden: tuple[Path, ...]) -> box.Box:
        bwrap, setpriv = box.bwrap_path(), box.setpriv_path()
        assert bwrap is not None and setpriv is not None  # box.support() found both
        cgroup = box.Cgroup.make(f"{self.identity.uid}-{os.getpid()}-{self.root.name}", box.memory_max())
        hide = [*box.default_hidden(), default_cache_dir(), trusted_cache, *hidden]
        view = box.View([*box.interpreter_paths(), *box.toolkit_paths()], [p for p in hide if p.exists()])
        return box.Box(
            bwrap,
            setpriv,
            self.identity.uid,
            self.identity.gid,
            self.root,
            view,
            cgroup=cgroup if isinstance(cgroup, box.Cgroup) else None,
            cgroup_why=cgroup if isinstance(cgroup, str) else "",
        )

    def untrusted(self, cmd: Sequence[str], cwd: Path | str | None = None) -> tuple[list[str], dict[str, Any]]:
        """How to start an untrusted command (a worker, nvcc, a probe): its argv and Popen's identity arguments. In
        the grade's box when it has one (the uid is dropped inside); else as the grade's uid (`popen_kwargs`)."""
        if self.box is not None:
            return self.box.argv(cmd, cwd if cwd is not None else self.home), {}
        return list(cmd), self.identity.popen_kwargs()

    def _own(self, p: Path, mode: int) -> None:
        """The grader's, with the grade's group when separated, and `mode`."""
        if self.identity.separated:
            os.chown(p, -1, self.identity.gid)
        os.chmod(p, mode)

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def env(self, trusted: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
        if trusted:
            env = worker_env(None, self.lib, extra)
            env.update(
                {
                    "HOME": str(self.trusted_cache),
                    "TMPDIR": str(self.trusted_cache),
                    "TRITON_CACHE_DIR": str(self.trusted_cache / "triton"),
                    "TORCHINDUCTOR_CACHE_DIR": str(self.trusted_cache / "inductor"),
                }
            )
            return env
        return worker_env(self.home, self.lib, extra)

    def add_submission(self, src_dir: Path) -> list[str]:
        """Copy the submission's regular files (not links, not folders) into ro/submission. Returns what was skipped."""
        skipped = []
        total = copied = 0
        for p in sorted(src_dir.iterdir())[: MAX_SUBMISSION_FILES * 4]:
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped.append(p.name)
                continue
            total += st.st_size
            if total > MAX_SUBMISSION_BYTES or copied >= MAX_SUBMISSION_FILES:
                skipped.append(p.name)
                continue
            copied += 1
            dst = self.submission / p.name
            with open(p, "rb") as f:
                dst.write_bytes(f.read(MAX_SUBMISSION_BYTES))
            self._own(dst, self.file_mode)
        return skipped

    def add_file(self, src: Path, name: str) -> Path:
        """Copy one trusted file (a staff solution for --staff, a verified library) into ro/, readable by the grade."""
        dst = (self.libs if name.endswith(".so") else self.submission) / name
        shutil.copyfile(src, dst)
        self._own(dst, self.file_mode)
        return dst

    def close(self) -> None:
        if self.box is not None:
            self.box.close()  # the cgroup: anything left in it is killed (the boxes' PID namespaces left nothing)
        if self.identity.separated:
            kill_uid(self.identity.uid)  # outside a box, the only sweep; inside one, a check that finds nothing
        shutil.rmtree(self.root, ignore_errors=True)
        self.identity.release()  # only now, with every process of the uid gone, may another grade take it


def kill_uid(uid: int, rounds: int = 20) -> int:
    """SIGKILL every process of `uid` (a grade's own uid: whatever the submission left running), until none is left.
    The pool gives each live grade a uid of its own, so these are this grade's processes only. Never root's or
    the grader's own."""
    if uid in (0, os.getuid()):
        return 0
    killed = 0
    for _ in range(rounds):
        pids: list[int] = []
        for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        pids.append(int(name))
                except OSError:
                    pass
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.01)
    return killed


def probe(identity: Identity, scratch: Scratch, timeout_s: float = 120.0) -> str:
    """'' when the untrusted identity can start a worker's interpreter (Python, torch, grader.child) from the
    scratch; else why not (e.g. the Python install lies under a directory other users cannot enter).

    It finds and opens torch's and the worker's files rather than importing them: importing torch took 5.0 s of
    a 46 s grade on the H200 (docs/performance.md#grade-cost), and what it can fail on here is permissions, which
    opening the same files from the same uid, cwd and environment finds as well."""
    code = (
        "import importlib.util as u, os\n"
        "for m in ('torch', 'grader.child.worker'):\n"
        "    s = u.find_spec(m)\n"
        "    assert s is not None and s.origin, f'{m} is not importable'\n"
        "    open(s.origin, 'rb').close()\n"
        "    os.listdir(os.path.dirname(s.origin))\n"
    )
    cwd = scratch.home if identity.separated else scratch.root
    argv, who = scratch.untrusted([sys.executable, "-s", "-c", code], cwd)
    try:
        r = subprocess.run(
            argv,
            cwd=cwd,
            env=scratch.env(trusted=False),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            **who,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["exit status " + str(r.returncode)])[-1]
        return str(last)[:300]
    return ""


def writable_by(path: Path, identity: Identity) -> bool:
    """Whether `identity` could write `path` (by its mode bits and owner; ACLs aside)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if st.st_uid == identity.uid:
        return bool(st.st_mode & stat.S_IWUSR)
    if st.st_gid == identity.gid:
        return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
    return bool(st.st_mode & stat.S_IWOTH)


def readable_by(path: Path, identity: Identity) -> bool:
    """Whether `identity` could read `path`, directories on the way included (mode bits and owners)."""
    p = Path(os.path.abspath(path))
    chain = [*reversed(p.parents), p]
    for i, d in enumerate(chain):
        try:
            st = os.stat(d)
        except OSError:
            return False
        need = (
            (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
            if i < len(chain) - 1
            else (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
        )
        if st.st_uid == identity.uid:
            ok = st.st_mode & need[0]
        elif st.st_gid == identity.gid:
            ok = st.st_mode & need[1]
        else:
            ok = st.st_mode & need[2]
        if not ok:
            return False
    return True


def closed_folders(paths: Iterable[Path]) -> list[Path]:
    """The folders on the way to `paths` that a uid other than their owner, in none of their groups, cannot pass
    (no o+x): a Python under a private home (pyenv or conda in /root or a 0700 /home/x) that the grade's uid cannot
    start outside a box. Each once, outermost first. (In a box it can: the box binds the interpreter's own folders
    at their paths, under fresh 0755 parents; grader/box.py.)"""
    out: list[Path] = []
    for path in paths:
        p = Path(os.path.abspath(path))
        for d in reversed(p.parents):
            try:
                closed = not os.stat(d).st_mode & stat.S_IXOTH
            except OSError:
                break
            if closed and d not in out:
                out.append(d)
    return out


def unreachable_python(why: str) -> str:
    """What open_scratch records when the grade's uid could not start this Python (`why`, the probe's own line):
    the folders in the way and the one command that opens them for passing through (o+x: enter, not list; files
    keep their own modes), or a box. Said at the first refusal (grader/preflight.py prints it before any grade)."""
    closed = closed_folders([Path(sys.executable), *box.interpreter_paths()])
    fix = (
        f"run `chmod o+x {' '.join(shlex.quote(str(d)) for d in closed)}` (others may then pass through "
        f"{'that folder' if len(closed) == 1 else 'those folders'}, not list them), or "
        if closed
        else ""
    )
    return (
        f"the unprivileged uid could not start this Python ({why}); {fix}install bubblewrap (apt-get install "
        "bubblewrap) so that each grade runs in a box, which shows this Python to the uid wherever it lives; or "
        "install the grader where other users can read it (the container does)"
    )


def open_to_everyone(path: Path) -> bool:
    """Whether a uid that is neither owner nor group member of anything on the way can read `path`: every folder
    above it passable by others (o+x), and the path itself readable by them (a file: o+r) or passable (a folder:
    o+x is enough to open files whose names are known or guessed, such as a classmate's id/glu_triton.py)."""
    p = Path(os.path.abspath(path))
    for d in [*reversed(p.parents), p]:
        try:
            st = os.stat(d)
        except OSError:
            return False
        need = stat.S_IROTH if d == p and not stat.S_ISDIR(st.st_mode) else stat.S_IXOTH
        if not st.st_mode & need:
            return False
    return True


_ACTIVE: list[Scratch] = []


def active() -> Scratch | None:
    """The scratch of the grade in progress (grader/pipeline.py activates it), or None (tests, scripts)."""
    return _ACTIVE[-1] if _ACTIVE else None


class activate:
    """`with activate(scratch):` every worker started inside runs from it (grader/sandbox.py reads `active()`)."""

    def __init__(self, scratch: Scratch):
        self.scratch = scratch

    def __enter__(self) -> Scratch:
        _ACTIVE.append(self.scratch)
        return self.scratch

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.remove(self.scratch)
