"""The red-team gate: grade every exploit of the corpus (tests/exploits/) as the autograder does, officially, and
fail on any exploit that keeps points it should not, leaks the key, or takes the grader down.

    python scripts/audit.py [--only NAME ...] [--jobs N] [--keep DIR] [--device cpu|cuda]
    nox -s audit [-- ARGS]

Each exploit is graded by the image's own entry command (`python -m grader autograde`, the Dockerfile's ENV) in the
container's layout, rebuilt on this machine without Docker: the files .dockerignore lets into the image (no staff
solutions, no tests) copied to a tree that is then made read-only, a world-writable scratch as /scratch, a fresh key
made by `grader keygen` in a 0700 folder, results in a folder of the grader's, and, as root, a separate untrusted
uid (the grader's pool) with the rest of the filesystem read-only (a private mount namespace, as `docker run
--read-only`). So the grade is official: signed, and `extra_data.official` true. An exploit passes the audit when:

1. the grader survived it: exit 0 and a results.json the grader wrote (official, and its signature verifies with
   the key: a results.json the exploit forged or edited does not);
2. it kept no more points than `tests/exploits/audit.yaml` allows it (0 unless listed: what an honest part of it
   earns, with the reason written beside the number);
3. nothing leaked: neither the key nor its derived signing key appears in any file the grade wrote or in its output;
4. nothing of the grade outlived it (issue 38; none of these checks trusts a pid, a path or a uid the exploit
   reports, which mean nothing outside a box):
   - processes: none of the processes holding the grade's mark, its `EXPLOIT_STOPFILE=<work>/stop` entry in the
     environment (unique per grade, inherited by forks and daemons), is alive after the grade (looked for in several
     passes after a settle), nor any the exploit listed in EXPLOIT_PIDFILE (the older exploits' way). What is found
     is stopped and then killed with its process group;
   - state outside the scratch: no file at the top of /tmp, /var/tmp, /dev/shm or the scratch root, System V shared
     memory, semaphore set or message queue, POSIX message queue (/dev/mqueue, mounted for the run if it is not)
     or kernel key of a uid other than root's appeared during the grade and stayed. Attributed to a grade by the
     uids its marked processes ran as (or, one grade at a time, whatever appeared during it); removed, and a final
     check after every grade reports anything that appeared during the run and is no one's yet ('(whole run)');
   - the network: nothing connected to the grade's own listeners on the host, a TCP port on 127.0.0.1 and an
     abstract unix socket (EXPLOIT_PORT, EXPLOIT_ABSTRACT), open from the grade's start to the run's end.

A pair: an exploit folder with a `first/` subfolder is two grades in one slot, first/ then the folder itself (without
first/), both with GRADER_STUDENT_UID set to one uid of their own (the pool hands it out first): what the first left
is reported for it (its score is not checked) and removed only after the second, which may look for it.

Exit 0 when every exploit passes, 1 otherwise (a table says which and why), 2 when it cannot run (not root: without
a separate uid no grade is official, so the gate would prove nothing). CI runs it in the full tier
(tests/test_audit.py). GPU exploits (gpu_*) are graded with `--device cuda` on a GPU machine.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import re
import secrets
import selectors
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader import keyfile, signing  # noqa: E402

EXPLOITS = ROOT / "tests" / "exploits"
ALLOWANCES = EXPLOITS / "audit.yaml"  # in the corpus folder: what each exploit may keep
NOT_SUBMISSIONS = {"ta_poisoned_class"}  # a class folder for the TA report, audited by tests/test_exploits.py
# The corpus's hang exploits wait out a case limit: shorter limits keep the gate's run in minutes (the spec's own
# limits are what a real grade gets; these change how long a hang costs, not what a cheat can earn).
LIMITS = {"build_s": 120, "case_s": 30, "correctness_s": 150, "timing_s": 120}
GRADE_TIMEOUT_S = 900
EXPLOIT_ENV = (
    "EXPLOIT_OUT",
    "EXPLOIT_PIDFILE",
    "EXPLOIT_STOPFILE",
    "EXPLOIT_SECONDS",
    "EXPLOIT_PORT",
    "EXPLOIT_ABSTRACT",
)
SETTLE_S = 0.5  # after a grade, before its leftovers are looked for
ENVIRON_CAP = 512 * 1024  # bytes read of a process's environment
WATCH_S = 0.3  # how often the uids of a running grade's processes are looked at
PAIR_FIRST = "first"  # an exploit's subfolder graded first, in the same slot and as the same uid (a pair)
PAIR_UID_BASE = 1_777_777  # a pair's configured GRADER_STUDENT_UID (one per pair of the run)
HIT_CAP, HIT_BYTES, HIT_READ_S, HIT_SHOWN = 16, 4096, 2.0, 120  # connections kept per grade, bytes read, shown


@dataclass
class Verdict:
    name: str
    score: float | None = None
    allowed: float = 0.0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def dockerfile_env(mapping: dict[str, str]) -> dict[str, str]:
    """The Dockerfile's ENV lines, in order, with the image's paths replaced by `mapping`'s."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    env: dict[str, str] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for line in text.splitlines():
        if not line.strip().upper().startswith("ENV "):
            continue
        for word in shlex.split(line.split(None, 1)[1]):
            name, _, value = word.partition("=")
            env[name] = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)
    for name, value in env.items():
        parts = value.split(":") if name == "PATH" else [value]
        for i, p in enumerate(parts):
            for src, dst in mapping.items():
                if p == src or p.startswith(src + "/"):
                    parts[i] = dst + p[len(src) :]
        env[name] = ":".join(parts)
    return env


def image_tree(dst: Path) -> None:
    """What .dockerignore lets into the image (its `!` lines), copied to `dst`, with the audit's shorter limits."""
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        if line.startswith("!"):
            pattern = line[1:] + ("/*" if line.endswith("**") else "")
            for p in ROOT.glob(pattern):
                if p.is_file() and "__pycache__" not in p.parts:
                    (dst / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(p, dst / p.relative_to(ROOT))
    spec_path = dst / "reference" / "glu" / "spec.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["limits"] = {**spec.get("limits", {}), **LIMITS}
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    if list(dst.rglob("solution_*")):
        raise SystemExit("audit: the image's tree holds a staff solution (.dockerignore): fix that first")


def read_only(path: Path) -> None:
    for dirpath, _dirs, files in os.walk(path):
        for n in files:
            os.chmod(os.path.join(dirpath, n), 0o444)
        os.chmod(dirpath, 0o555)


def read_only_root_prefix(*writable: Path) -> list[str]:
    """Run a command with `/` read-only but `writable` (a private mount namespace); [] where that cannot be made."""
    if shutil.which("unshare") is None:
        return []
    binds = " && ".join(f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(p))}" for p in writable)
    script = f'{binds} && mount -o remount,ro,bind / && exec "$@"'
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "audit-read-only"]
    r = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    return prefix if r.returncode == 0 else []


def blocked_ancestors(paths: list[Path]) -> list[Path]:
    """Directories on the way to `paths` that other users cannot enter (no o+x): the untrusted uid cannot start a
    Python that lies under one (pyenv under /root, mode 0700, on CI machines)."""
    out: list[Path] = []
    for p in paths:
        for d in reversed(p.resolve().parents):
            try:
                if not os.stat(d).st_mode & 0o001 and d not in out:
                    out.append(d)
            except OSError:
                pass
    return out


def open_traversal(blocked: list[Path], state: Path | None = None) -> Callable[[], None]:
    """Let other users traverse `blocked` (o+x) for this run, and return its undo. Audits on one machine share it
    (CI jobs, several sessions): each holds a shared lock on <state>/run.lock for its run, the first records the
    modes it found in <state>/modes.json, and only the last one out restores them (an audit that restored the modes
    it saw at its start would close a folder that another one, still running, needs). <state>/record.lock is held
    only while the record is read, extended or restored."""
    import fcntl

    if state is None:
        state = Path("/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()) / "kernel-grader-audit"
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(state)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SystemExit(f"audit: {state} is not a folder of the audit's own (0700): remove it")
    record = state / "modes.json"
    with open(state / "record.lock", "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            modes = json.loads(record.read_text()) if record.is_file() else {}
        except (OSError, ValueError):
            modes = {}
        for d in blocked:
            modes.setdefault(str(d), stat.S_IMODE(os.stat(d).st_mode))
            os.chmod(d, os.stat(d).st_mode | 0o001)
        if modes:
            record.write_text(json.dumps(modes))
        running = open(state / "run.lock", "a")  # noqa: SIM115 (held for the run)
        fcntl.flock(running, fcntl.LOCK_SH)

    def undo() -> None:
        with open(state / "record.lock", "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            fcntl.flock(running, fcntl.LOCK_UN)
            try:
                fcntl.flock(running, fcntl.LOCK_EX | fcntl.LOCK_NB)  # only when no other audit is running
            except OSError:
                running.close()
                return
            try:
                for d, mode in (json.loads(record.read_text()) if record.is_file() else {}).items():
                    with contextlib.suppress(OSError):
                        os.chmod(d, mode)
                record.unlink(missing_ok=True)
            except (OSError, ValueError):
                pass
            finally:
                running.close()

    return undo


def exploits(corpus: Path, only: list[str], device: str) -> list[str]:
    names = sorted(p.name for p in corpus.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    names = [n for n in names if n not in NOT_SUBMISSIONS and n != "__pycache__"]
    names = [n for n in names if n.startswith("gpu_") == (device == "cuda")]
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise SystemExit(f"audit: no exploit named {', '.join(unknown)} for --device {device} in {corpus}")
        names = [n for n in names if n in only]
    return names


def allowances(corpus: Path) -> dict[str, dict[str, object]]:
    path = corpus / ALLOWANCES.name
    data = (yaml.safe_load(path.read_text()) if path.is_file() else None) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"audit: {path} must map exploit names to {{points: N, why: ...}}")
    for name, entry in data.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("points"), (int, float)) and entry.get("why")):
            raise SystemExit(f"audit: {path}: {name} needs `points: N` and `why: ...` (why it may keep them)")
        if not (corpus / name).is_dir():
            raise SystemExit(f"audit: {path} names {name}, which is not a folder of {corpus}")
    return data


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read(512).rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def _read(path: str | Path, limit: int) -> bytes | None:
    """At most `limit` bytes of a file (what an exploit can write is read capped), None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


# -- leftovers: processes ---------------------------------------------------------------------------------------------
# A grade's processes are found by a mark in their environment, not by pid or uid: inside a box an exploit's pids
# are its PID namespace's and its files are out of the audit's reach, and a non-dumpable process shows /proc/<pid>
# as root's. Every process of the grade inherits `EXPLOIT_STOPFILE=<work>/stop` (unique per grade) through fork,
# setsid, daemons and exec's that keep the environment.


def mark_of(work: Path) -> bytes:
    """The grade's mark: its EXPLOIT_STOPFILE entry, exactly as it appears in /proc/<pid>/environ."""
    return b"EXPLOIT_STOPFILE=" + os.fsencode(work / "stop")


def _uid_state(pid: int) -> tuple[int, str] | None:
    """A process's real uid and state letter from /proc/<pid>/status (its Name line is escaped by the kernel)."""
    data = _read(f"/proc/{pid}/status", 8192)
    uid, state = None, "?"
    for line in (data or b"").split(b"\n"):
        parts = line.split()
        if len(parts) > 1 and parts[0] == b"Uid:" and parts[1].isdigit():
            uid = int(parts[1])
        elif len(parts) > 1 and parts[0] == b"State:":
            state = parts[1][:1].decode("ascii", "replace")
    return None if uid is None else (uid, state)


def scan_marked(
    marks: Iterable[bytes], seen: set[int] | None = None, only_new: bool = False
) -> tuple[dict[int, tuple[bytes, int, str]], set[int]]:
    """Every process whose environment holds one of `marks` as a whole entry: pid -> (mark, uid, state), and every
    pid listed. Pids not in `seen` (the previous scan's) are read first, and with `only_new` only those: a process
    that forks and exits at once lives for a millisecond or less, less than a whole scan of /proc takes, and its
    pid is always a new one."""
    wanted = set(marks)
    try:
        pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    except OSError:
        return {}, set()
    seen = seen or set()
    order = sorted(pids - seen, reverse=True) + ([] if only_new else sorted(pids & seen, reverse=True))
    hits: dict[int, tuple[bytes, int, str]] = {}
    for pid in order if wanted else []:
        env = _read(f"/proc/{pid}/environ", ENVIRON_CAP) if pid != os.getpid() else None
        mark = next((e for e in (env or b"").split(b"\0") if e in wanted), None)
        who = _uid_state(pid) if mark is not None else None
        if mark is not None and who is not None:
            hits[pid] = (mark, *who)
    return hits, pids


def leftovers(marks: Iterable[bytes], seconds: float = 1.0) -> dict[int, tuple[bytes, int]]:
    """Processes holding a mark, alive (not zombies) in any scan for `seconds`: pid -> (mark, uid). A whole scan
    every tenth; in between, quick ones that read only the pids that are new since the last listing (where a
    process that keeps forking is)."""
    marks = list(marks)
    found: dict[int, tuple[bytes, int]] = {}
    seen: set[int] = set()
    t0, n = time.monotonic(), 0
    while n == 0 or time.monotonic() - t0 < seconds:
        hits, seen = scan_marked(marks, seen, only_new=n % 10 != 0)
        found.update({pid: (m, uid) for pid, (m, uid, state) in hits.items() if state not in ("Z", "X")})
        n += 1
        time.sleep(0.001)
    return found


def kill_marked(marks: Iterable[bytes], quiet_s: float = 0.2, limit_s: float = 60.0) -> int:
    """Stop, then kill, every process holding one of `marks`, each with its process group: SIGSTOP to every one
    found running until no scan finds one running for `quiet_s` (a stopped process cannot fork), then SIGKILL until
    no scan finds one alive for `quiet_s`. A loop of SIGKILLs alone races a process that forks faster than a scan;
    and a signal to a process group reaches a child being forked in it too (the kernel makes fork and group signals
    exclusive). Returns how many were caught."""
    marks = list(marks)
    caught: set[int] = set()
    for sig, spared in ((signal.SIGSTOP, ("T", "t", "Z", "X")), (signal.SIGKILL, ("Z", "X"))):
        seen: set[int] = set()
        t0 = quiet = time.monotonic()
        n = 0
        while time.monotonic() - quiet < quiet_s and time.monotonic() - t0 < limit_s:
            hits, seen = scan_marked(marks, seen, only_new=n % 10 != 0)
            n += 1
            targets = [pid for pid, (_m, _u, state) in hits.items() if state not in spared]
            caught |= set(targets)
            if not targets:
                time.sleep(0.001)
                continue
            quiet = time.monotonic()
            _signal_all(targets, sig, groups=True)
            deadline = time.monotonic() + 2.0
            while sig == signal.SIGKILL and not all(_zombie(p) for p in targets) and time.monotonic() < deadline:
                time.sleep(0.005)  # until each has exited: a dying process is still listed, its environment unreadable
    return len(caught)


def _pgid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read(1024).rsplit(b")", 1)[-1].split()[2])
    except (OSError, ValueError, IndexError):
        return 0


def _signal_all(pids: Iterable[int], sig: int, groups: bool = False) -> None:
    """Signal each process, and with `groups` its process group: never the audit's own group, nor a group whose
    leader is alive and is none of `pids` (a group is only signalled for the marked processes in it)."""
    pids = list(pids)
    if groups:
        for pgid in {_pgid(pid) for pid in pids} - {0, 1, os.getpgrp()}:
            if pgid in pids or _zombie(pgid):
                with contextlib.suppress(OSError):
                    os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


class Watch:
    """Who each grade's processes run as: every WATCH_S, the uids (root's and the audit's own aside) of the
    processes holding a grade's mark while it runs. What a grade leaves behind is attributed to it by these uids
    when grades run side by side."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: set[bytes] = set()
        self._uids: dict[bytes, set[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="audit-watch", daemon=True)
        self._thread.start()

    def add(self, mark: bytes) -> None:
        with self._lock:
            self._active.add(mark)
            self._uids.setdefault(mark, set())

    def done(self, mark: bytes) -> set[int]:
        """Stop watching `mark` (after one last look) and return the uids its processes had."""
        self._look([mark])
        with self._lock:
            self._active.discard(mark)
            return set(self._uids.get(mark, ()))

    def _look(self, marks: list[bytes]) -> None:
        hits, _ = scan_marked(marks)
        with self._lock:
            for _pid, (mark, uid, _state) in hits.items():
                if uid not in (0, os.getuid()):
                    self._uids.setdefault(mark, set()).add(uid)

    def _loop(self) -> None:
        while not self._stop.wait(WATCH_S):
            with self._lock:
                marks = list(self._active)
            if marks:
                self._look(marks)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# -- leftovers: state outside the scratch -----------------------------------------------------------------------------
# What a grade's uid can leave that outlives its processes: files at the top of the world-writable folders, System V
# shared memory, semaphores and message queues, POSIX message queues, kernel keys. Only what belongs to a uid other
# than root's (and the audit's) counts; the top of each folder is enough (whatever lies under a left folder goes with
# it). /proc/sysvipc and /proc/key-users are the kernel's own text, read capped all the same.

STATE_DIRS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
MQUEUE = Path("/dev/mqueue")
SYSV = {"shm": "shmid", "sem": "semid", "msg": "msqid"}
SYSV_NAMES = {"shm": "System V shared memory", "sem": "System V semaphores", "msg": "System V message queue"}
DIR_CAP = 10_000  # entries read per folder
TABLE_CAP = 8 << 20  # bytes read of one /proc table
KEYS_CAP = 1 << 20  # bytes read of a uid's /proc/keys


@dataclass(frozen=True)
class Item:
    """One object a uid left: a file (top of a folder), a POSIX message queue, a System V object, a uid's keys.
    `version` tells a new object from an old one of the same name (an inode, an IPC key, a key count)."""

    kind: str  # "file", "mqueue", "shm", "sem", "msg", "keys"
    ident: str  # a path, an IPC id, a uid
    uid: int
    version: str = ""
    detail: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.kind in ("file", "mqueue"):  # a name is anyone's text: escaped and capped
            name = ascii(self.ident)[1:-1]
            name = name if len(name) <= 160 else name[:157] + "..."
            return f"{'POSIX message queue ' if self.kind == 'mqueue' else ''}{name} (uid {self.uid})"
        if self.kind == "keys":
            return f"kernel keys of uid {self.uid} ({self.detail})"
        return f"{SYSV_NAMES[self.kind]} {self.ident} (key {self.version}, {self.detail}, uid {self.uid})"


def _dir_items(folder: Path, kind: str) -> set[Item]:
    out: set[Item] = set()
    try:
        with os.scandir(folder) as it:
            for n, entry in enumerate(it):
                if n >= DIR_CAP:
                    break
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.add(Item(kind, entry.path, st.st_uid, str(st.st_ino)))
    except OSError:
        pass
    return out


def _sysv_items(proc: Path = Path("/proc/sysvipc")) -> set[Item]:
    """Every System V object, from /proc/sysvipc/{shm,sem,msg}: a header line of column names, a line per object."""
    out: set[Item] = set()
    for kind, id_column in SYSV.items():
        lines = (_read(proc / kind, TABLE_CAP) or b"").decode("ascii", "replace").splitlines()
        head = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(head, line.split(), strict=False))
            try:
                ident, uid, key = int(row[id_column]), int(row["uid"]), int(row["key"])
            except (KeyError, ValueError):
                continue
            if kind == "shm":
                detail = f"{int(row.get('size', '0') or 0) / 2**20:.1f} MiB"
            elif kind == "sem":
                detail = f"{row.get('nsems', '?')} semaphores"
            else:
                detail = f"{row.get('qnum', '?')} messages, {row.get('cbytes', '?')} bytes"
            out.add(Item(kind, str(ident), uid, f"{key & 0xFFFFFFFF:#x}", detail))
    return out


def _key_items(path: Path = Path("/proc/key-users")) -> set[Item]:
    """Each uid's kernel keys that it left, from /proc/key-users ('uid: usage nkeys/nikeys qnkeys/maxkeys
    qnbytes/maxbytes'): a key stays after every process of its uid is gone (the user keyring is kept per user
    namespace). Which keys a uid holds is asked of that uid (`keys_left`), once per count."""
    out: set[Item] = set()
    for line in (_read(path, TABLE_CAP) or b"").decode("ascii", "replace").splitlines():
        uid_text, _, rest = line.partition(":")
        fields = rest.split()
        if not uid_text.strip().isdigit() or len(fields) < 4 or int(uid_text) in (0, os.getuid()):
            continue
        uid, version = int(uid_text), f"{fields[1].partition('/')[0]}/{fields[3].partition('/')[0]}"
        left = keys_left(uid, version)
        if left:
            out.add(Item("keys", str(uid), uid, version, f"{len(left)} keys: {', '.join(left[:3])}"))
    return out


_KEYS_SEEN: dict[tuple[int, str], list[str]] = {}


def keys_left(uid: int, version: str = "") -> list[str]:
    """The keys `uid` holds beyond the two keyrings the kernel makes for any uid on demand (its empty user keyring
    _uid.UID and user-session keyring _uid_ses.UID, which links the first): read from /proc/keys as that uid (root
    does not see another uid's keys there). Each is 'type description', its description shown capped."""
    if (uid, version) in _KEYS_SEEN and version:
        return _KEYS_SEEN[(uid, version)]
    try:
        with subprocess.Popen(["cat", "/proc/keys"], user=uid, group=uid, extra_groups=[], cwd="/", env={},
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as p:  # fmt: skip
            assert p.stdout is not None
            text = p.stdout.read(KEYS_CAP)
            p.kill()
    except (OSError, subprocess.SubprocessError):
        return []
    return _KEYS_SEEN.setdefault((uid, version), parse_keys(text, uid))


def parse_keys(text: bytes, uid: int) -> list[str]:
    """/proc/keys' lines of `uid`'s keys ('id flags usage timeout perm uid gid type description: summary'; a
    description is anyone's text), but for the two standard keyrings."""
    standard = (f"_uid.{uid}: ", f"_uid_ses.{uid}: ")  # what they link is listed on its own line
    left = []
    for line in text.decode("utf-8", "replace").splitlines():
        parts = line.split(None, 8)
        if len(parts) < 9 or parts[5] != str(uid):
            continue
        if parts[7] == "keyring" and parts[8].startswith(standard):
            continue
        left.append(f"{parts[7]} {parts[8][:40]!r}")
    return left


def state_items(dirs: Iterable[Path], mqueue: Path | None) -> set[Item]:
    """What every uid but root's and the audit's holds now, in `dirs`, POSIX message queues (`mqueue`, mounted),
    System V IPC and kernel keys."""
    items = _sysv_items() | _key_items()
    for d in dirs:
        items |= _dir_items(d, "file")
    if mqueue is not None:
        items |= _dir_items(mqueue, "mqueue")
    return {i for i in items if i.uid not in (0, os.getuid())}


KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 271, "s390x": 280}  # __NR_keyctl


def clear_keys(uid: int) -> str:
    """Clear `uid`'s user and user-session keyrings and invalidate them, as that uid (keyctl 7: KEYCTL_CLEAR, 21:
    KEYCTL_INVALIDATE; -4 @u, -5 @us): in a child that only makes system calls (no interpreter of that uid's
    is needed). The kernel makes an empty pair again on the next look-up. '' when done, else why not."""
    nr = KEYCTL.get(platform.machine())
    if nr is None:
        return f"no keyctl number known for {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 1
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for op, ring in ((7, -4), (7, -5), (21, -5), (21, -4)):
                libc.syscall(nr, op, ring)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return "" if os.waitstatus_to_exitcode(status) == 0 else "could not become the uid"


def remove_item(item: Item) -> str:
    """Remove one left object ('' when done, else why not): unlink a file or queue (a folder with `rm -rf`, which
    neither follows links nor recurses on the stack), IPC_RMID a System V object, clear a uid's keyrings as it."""
    try:
        if item.kind in ("file", "mqueue"):
            st = os.lstat(item.ident)
            if stat.S_ISDIR(st.st_mode):
                r = subprocess.run(["rm", "-rf", "--one-file-system", "--", item.ident], capture_output=True,
                                   timeout=120, check=False)  # fmt: skip
                return r.stderr.decode(errors="replace").strip()[:200]
            os.unlink(item.ident)
        elif item.kind in SYSV:
            libc = ctypes.CDLL(None, use_errno=True)
            ident = ctypes.c_int(int(item.ident))
            rc = {"shm": lambda: libc.shmctl(ident, 0, None), "sem": lambda: libc.semctl(ident, 0, 0),
                  "msg": lambda: libc.msgctl(ident, 0, None)}[item.kind]()  # fmt: skip
            if rc != 0:
                return os.strerror(ctypes.get_errno())
        elif item.kind == "keys":
            return clear_keys(item.uid)
    except FileNotFoundError:
        return ""
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return ""


class Ledger:
    """The run's record of left state: what was there before the run (never reported), and what was reported since.
    A grade reports what appeared during it and belongs to it (by uid; every new object when grades run one at a
    time); the run's final check reports whatever else appeared."""

    def __init__(self, dirs: Iterable[Path], mqueue: Path | None):
        self.dirs, self.mqueue = list(dirs), mqueue
        self._lock = threading.Lock()
        self.known = self.now()

    def now(self) -> set[Item]:
        return state_items(self.dirs, self.mqueue)

    def new(self, before: set[Item]) -> set[Item]:
        now = self.now()
        with self._lock:
            return now - before - self.known

    def settle(self, items: Iterable[Item], uids: set[int]) -> list[str]:
        """Remove `items` whose uid is one of `uids` (a grade's: seen running its processes, or a pair's), never a
        stranger's (another job on the machine: reported, left alone). Every item is known from now on (reported
        once); so is what the kernel makes again of a uid's cleared keys."""
        items = list(items)
        failed = []
        for item in items:
            if item.uid in uids:
                why = remove_item(item)
                if why:
                    failed.append(f"{item}: {why}")
            else:
                failed.append(f"{item}: not removed (uid {item.uid} is no grade's)")
        again = {i for i in _key_items() if i.uid in {i.uid for i in items if i.kind == "keys"}}
        with self._lock:
            self.known |= set(items) | again
        return failed


def describe(items: Iterable[Item], most: int = 8) -> str:
    ordered = sorted(items, key=lambda i: (i.kind, i.ident))
    more = f", and {len(ordered) - most} more" if len(ordered) > most else ""
    return ", ".join(str(i) for i in ordered[:most]) + more


def ensure_mqueue() -> tuple[Path | None, Callable[[], None]]:
    """/dev/mqueue, where POSIX message queues show (mounted by the audit when it is not, and unmounted after):
    (the folder or None, its undo)."""

    def mounted() -> bool:
        for line in (_read("/proc/self/mounts", TABLE_CAP) or b"").decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[1] == str(MQUEUE) and parts[2] == "mqueue":
                return True
        return False

    if mounted():
        return MQUEUE, lambda: None
    made = not MQUEUE.exists()
    try:
        MQUEUE.mkdir(exist_ok=True)
    except OSError:
        return None, lambda: None
    r = subprocess.run(["mount", "-t", "mqueue", "mqueue", str(MQUEUE)], capture_output=True, check=False)

    def undo() -> None:
        if r.returncode == 0:
            subprocess.run(["umount", str(MQUEUE)], capture_output=True, check=False)
        if made:
            with contextlib.suppress(OSError):
                MQUEUE.rmdir()

    return (MQUEUE if r.returncode == 0 and mounted() else None), undo


# -- the host's network -----------------------------------------------------------------------------------------------


@dataclass
class Hit:
    """One connection to a grade's listener: which one, and the first bytes it sent (read capped)."""

    kind: str  # "tcp" or "unix"
    data: bytearray = field(default_factory=bytearray)

    def __str__(self) -> str:
        return f"{self.kind} {bytes(self.data[:HIT_SHOWN])!r}{'...' if len(self.data) > HIT_SHOWN else ''}"


class Listeners:
    """Per grade, a TCP listener on 127.0.0.1 (an ephemeral port) and an abstract unix socket, open from the grade's
    start to the end of the run (a daemon's late call is still that grade's), all served by one thread. Whatever
    connects to a grade's came from that grade: its submission reached the host's network. The address is passed
    to the exploits (EXPLOIT_PORT, EXPLOIT_ABSTRACT: the name without its leading NUL)."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self.hits: dict[str, list[Hit]] = {}
        self.dropped: dict[str, int] = {}
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="audit-net", daemon=True)
        self._thread.start()

    def open(self, tag: str) -> tuple[int, str]:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        name = f"kernel-grader-audit-{secrets.token_hex(8)}"
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind("\0" + name)
        with self._lock:
            self.hits.setdefault(tag, [])
            for s, kind in ((tcp, "tcp"), (unix, "unix")):
                s.listen(16)
                s.setblocking(False)
                self._socks.append(s)
                self._sel.register(s, selectors.EVENT_READ, ("listen", tag, kind))
        return tcp.getsockname()[1], name

    def _loop(self) -> None:
        open_conns: dict[socket.socket, float] = {}
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.1):
                with self._lock:
                    self._event(key, open_conns)
            with self._lock:
                for conn in [c for c, t in open_conns.items() if time.monotonic() > t]:
                    self._drop(conn, open_conns)

    def _event(self, key: selectors.SelectorKey, open_conns: dict[socket.socket, float]) -> None:
        sock = key.fileobj
        assert isinstance(sock, socket.socket)
        if key.data[0] == "listen":
            _, tag, kind = key.data
            try:
                conn, _addr = sock.accept()
            except OSError:
                return
            hits = self.hits.setdefault(tag, [])
            if len(hits) >= HIT_CAP:
                self.dropped[tag] = self.dropped.get(tag, 0) + 1
                conn.close()
                return
            hits.append(Hit(kind))
            conn.setblocking(False)
            open_conns[conn] = time.monotonic() + HIT_READ_S
            self._sel.register(conn, selectors.EVENT_READ, ("conn", hits[-1]))
            return
        hit: Hit = key.data[1]
        try:
            chunk = sock.recv(HIT_BYTES - len(hit.data))
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        hit.data += chunk
        if not chunk or len(hit.data) >= HIT_BYTES:
            self._drop(sock, open_conns)

    def _drop(self, conn: socket.socket, open_conns: dict[socket.socket, float]) -> None:
        open_conns.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn)
        conn.close()

    def problem(self, tag: str, skip: int = 0) -> str:
        """The problem of a grade whose listeners were reached ('' if none), from its `skip`-th connection on."""
        time.sleep(0.05)  # a connection accepted just now has its first bytes read
        with self._lock:
            hits = self.hits.get(tag, [])[skip:]
            dropped = self.dropped.get(tag, 0) if not skip else 0
            if not hits:
                return ""
            shown = "; ".join(str(h) for h in hits[:3])
        n = len(hits) + dropped
        return f"the submission reached the host's network (127.0.0.1): {n} connection(s) to its listener: {shown}"

    def count(self, tag: str) -> int:
        with self._lock:
            return len(self.hits.get(tag, []))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for key in list(self._sel.get_map().values()):
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self._sel.close()


# -- grading ----------------------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One grade of an exploit's slot: its `first/` submission (a pair: graded first, its score not checked), then
    the folder's own. Both of a pair run as one configured uid (GRADER_STUDENT_UID): the pool hands it out first,
    so at HEAD the second grade is the first's uid."""

    tag: str  # the name in messages: NAME, or NAME/first
    src: Path
    uid: int | None = None
    scored: bool = True


def plan(corpus: Path, name: str, uid: int | None) -> list[Step]:
    first = corpus / name / PAIR_FIRST
    if not first.is_dir():
        return [Step(name, corpus / name)]
    return [Step(f"{name}/{PAIR_FIRST}", first, uid, scored=False), Step(name, corpus / name, uid)]


def pair_uids(corpus: Path, names: list[str]) -> dict[str, int]:
    """A fixed uid for each pair of the run (a uid of their own: two pairs graded at once share nothing)."""
    pairs = [n for n in names if (corpus / n / PAIR_FIRST).is_dir()]
    return {n: PAIR_UID_BASE + i for i, n in enumerate(pairs)}


def copy_submission(src: Path, dst: Path) -> None:
    """The submission's files, without Python's caches and without a pair's `first/` (graded on its own)."""

    def skip(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == src
        return [n for n in names if n == "__pycache__" or n.endswith(".pyc") or (top and n == PAIR_FIRST)]

    shutil.copytree(src, dst, ignore=skip)
    read_only(dst)


@dataclass
class Run:
    """What every grade of the run shares."""

    layout: dict[str, Any]
    prefix: list[str]
    key_hex: str
    device: str
    solo: bool  # one grade at a time: whatever appears during a grade is its own
    watch: Watch
    net: Listeners
    ledger: Ledger
    pairs: dict[str, int] = field(default_factory=dict)
    marks: dict[bytes, str] = field(default_factory=dict)  # every grade's mark -> its verdict's name
    owners: dict[int, str] = field(default_factory=dict)  # uid -> the verdict of the grade that ran as it
    net_seen: dict[str, int] = field(default_factory=dict)  # tag -> connections already reported
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Graded:
    """One grade's outcome, before its checks."""

    step: Step
    work: Path
    mark: bytes
    rc: int
    texts: list[str]
    uids: set[int] = field(default_factory=set)
    before: set[Item] = field(default_factory=set)


def _env(run: Run, step: Step, work: Path, out: Path) -> dict[str, str]:
    layout = run.layout
    env = dockerfile_env({"/scratch": str(layout["scratch"]), "/grader": str(layout["tree"])})
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env.pop("GRADER_STUDENT_UID", None)  # the grader's own pool: a uid no other live grade holds
    if step.uid is not None:
        env["GRADER_STUDENT_UID"] = str(step.uid)  # a pair: the one uid the pool hands out first
    port, abstract = run.net.open(step.tag)
    env.update(
        {
            "GRADER_PASS_ENV": ",".join(EXPLOIT_ENV),
            "EXPLOIT_OUT": str(out),
            "EXPLOIT_PIDFILE": str(work / "pids"),
            "EXPLOIT_STOPFILE": str(work / "stop"),
            "EXPLOIT_SECONDS": "30",
            "EXPLOIT_PORT": str(port),
            "EXPLOIT_ABSTRACT": abstract,
            "PYTHONPATH": str(layout["tree"]),
        }
    )
    if run.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def grade_step(run: Run, step: Step) -> tuple[Graded, float, list[str]]:
    """Grade one submission officially (the image's entry command in the container's layout)."""
    layout = run.layout
    work = Path(tempfile.mkdtemp(prefix=f"audit-{step.tag.replace('/', '-')}-", dir=layout["base"]))
    out, sub = work / "results", work / "submission"
    out.mkdir(mode=0o700)
    copy_submission(step.src, sub)
    # The old exploits write the pids they leave behind here (EXPLOIT_PIDFILE), as the untrusted uid: a file it may
    # append to, in a folder it may not write.
    (work / "pids").touch()
    os.chmod(work / "pids", 0o666)
    os.chmod(work, 0o755)  # the submission copy is read by the grader (root) and copied into the grade's scratch
    env = _env(run, step, work, out)
    mark = mark_of(work)
    with run.lock:
        run.marks[mark] = step.tag.split("/")[0]
    cmd = [*run.prefix, sys.executable, "-m", "grader", "autograde", "--submission", str(sub), "--out", str(out),
           "--secret-file", str(layout["key"]), "--device", run.device,
           "--student-id", f"audit-{step.tag.replace('/', '-')}"]  # fmt: skip
    problems: list[str] = []
    before = run.ledger.now()
    run.watch.add(mark)
    t0 = time.monotonic()
    with open(work / "stdout", "w") as so, open(work / "stderr", "w") as se:
        proc = subprocess.Popen(cmd, cwd=layout["tree"], env=env, stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        try:
            rc = proc.wait(timeout=GRADE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            problems.append(f"the grade did not end within {GRADE_TIMEOUT_S} s")
    seconds = time.monotonic() - t0
    uids = run.watch.done(mark)
    with run.lock:
        run.owners.update({u: step.tag.split("/")[0] for u in uids})
    g = Graded(step, work, mark, rc, [], uids, before)
    return g, seconds, problems


def check_processes(g: Graded) -> list[str]:
    """3. leftovers: the pids the exploit says it left (EXPLOIT_PIDFILE, the old exploits'), and every process
    holding the grade's mark, after a settle: all must be gone."""
    problems = []
    time.sleep(SETTLE_S)
    try:
        listed = [int(p) for p in (g.work / "pids").read_text().split()[:1000] if p.isdigit()]
    except OSError:
        listed = []
    alive = [p for p in listed if os.path.isdir(f"/proc/{p}") and not _zombie(p)]
    if alive:
        problems.append(f"processes the submission started outlived the grade: {alive[:5]}")
    left = leftovers([g.mark])
    g.uids |= {uid for _m, uid in left.values() if uid not in (0, os.getuid())}
    if left:
        uids = sorted({uid for _m, uid in left.values()})
        problems.append(f"processes the submission started outlived the grade: {len(left)} with its mark in their "
                        f"environment (pids {sorted(left)[:5]}, uids {uids})")  # fmt: skip
    return problems


def check_results(run: Run, g: Graded, v: Verdict) -> list[str]:
    """1. the grader survived and wrote an official, signed results.json; 2. points kept (a scored step);
    3. the key anywhere in what the grade wrote or printed."""
    problems = []
    out = g.work / "results"
    texts = [_text(g.work / "stdout"), _text(g.work / "stderr")]
    data = None
    try:
        data = json.loads((out / "results.json").read_text())
    except (OSError, ValueError) as e:
        problems.append(f"no results.json the grader wrote ({type(e).__name__}); exit {g.rc}")
    if g.rc != 0:
        tail = " | ".join(texts[1].strip().splitlines()[-2:])[:300]
        problems.append(f"the grader exited {g.rc}: {tail}")
    if isinstance(data, dict):
        extra = data.get("extra_data") if isinstance(data.get("extra_data"), dict) else {}
        if extra.get("official") is not True:
            problems.append(f"not an official grade: {extra.get('not_official_because')}")
        elif signing.verify(data, keyfile.derive(run.key_hex.encode()).signing) != signing.VALID:
            problems.append("results.json does not verify with the key: not the grader's file")
        score = data.get("score")
        if g.step.scored:
            v.score = float(score) if isinstance(score, (int, float)) else None
    if g.step.scored and v.score is not None and v.score > v.allowed + 1e-6:
        problems.append(f"kept {v.score:g} points; the audit allows {v.allowed:g}")
    secrets_ = (run.key_hex, keyfile.derive(run.key_hex.encode()).signing.hex())
    for dirpath, _dirs, files in os.walk(out):
        for f in files:
            texts.append(_text(Path(dirpath) / f))
    if any(s in t for s in secrets_ for t in texts):
        problems.append("the key (or its signing key) appears in the grade's files or output")
    return problems


def _text(path: Path) -> str:
    return (_read(path, 64 * 2**20) or b"").decode(errors="replace")


def check_state(run: Run, g: Graded) -> tuple[list[str], set[Item]]:
    """3. leftovers: state outside the scratch that appeared during the grade and is the grade's (its uids; any
    uid's when grades run one at a time)."""
    new = run.ledger.new(g.before)
    mine = {i for i in new if run.solo or i.uid in g.uids or i.uid == g.step.uid}
    if not mine:
        return [], mine
    return [f"state the submission left outlived the grade: {describe(mine)}"], mine


def grade_one(name: str, run: Run) -> Verdict:
    """Grade an exploit's slot (one grade, or a pair's two in order) and check every grade of it; a pair's first
    grade is checked for all but its score, and what it left is cleaned up only after the second."""
    v = Verdict(name, allowed=float(run.layout["allow"].get(name, {}).get("points", 0)))
    steps = plan(run.layout["corpus"], name, run.pairs.get(name))
    graded: list[Graded] = []
    left: set[Item] = set()
    for step in steps:
        g, seconds, problems = grade_step(run, step)
        graded.append(g)
        v.seconds += seconds
        problems += check_processes(g)
        if step is steps[-1]:
            for h in graded:
                (h.work / "stop").touch()
            kill_marked([h.mark for h in graded])
        problems += check_results(run, g, v)
        state, mine = check_state(run, g)
        problems += state
        left |= mine
        net = run.net.problem(step.tag)
        with run.lock:
            run.net_seen[step.tag] = run.net.count(step.tag)
        problems += [net] if net else []
        prefix = f"{PAIR_FIRST}/: " if not step.scored else ""
        v.problems += [prefix + p for p in problems]
    uids = set().union(*(h.uids for h in graded)) | {s.uid for s in steps if s.uid is not None}
    failed = run.ledger.settle(left, uids)
    if failed:
        v.problems.append(f"left state not cleaned up: {'; '.join(failed[:3])}")
    if v.ok:
        for h in graded:
            shutil.rmtree(h.work, ignore_errors=True)
    else:
        v.problems.append(f"(files kept in {', '.join(str(h.work) for h in graded)})")
    return v


def final_check(run: Run, verdicts: list[Verdict]) -> None:
    """After every grade: a process of any grade still alive, a late connection, state that appeared in the run and
    was not reported, each added to its grade's verdict (by mark, listener or uid), else to a '(whole run)' one."""
    by_name = {v.name: v for v in verdicts}
    whole = Verdict("(whole run)")

    def owner(name: str | None) -> Verdict:
        return by_name.get(name or "", whole)

    left = leftovers(run.marks, seconds=0.5)
    for mark in {m for m, _uid in left.values()}:
        pids = sorted(p for p, (m, _u) in left.items() if m == mark)
        owner(run.marks.get(mark)).problems.append(
            f"processes the submission started outlived the grade: {len(pids)} still alive at the run's end "
            f"(pids {pids[:5]})"
        )
    kill_marked(run.marks)
    for tag, seen in run.net_seen.items():
        late = run.net.problem(tag, skip=seen)
        if late:
            owner(tag.split("/")[0]).problems.append(late + " (after the grade)")
    items = run.ledger.new(set())
    ours = set(run.owners) | set(run.pairs.values())
    for uid in sorted({i.uid for i in items}):
        mine = {i for i in items if i.uid == uid}
        if uid in ours:
            owner(run.owners.get(uid)).problems.append(
                f"state the submission left outlived the grade: {describe(mine)}"
            )
        else:  # no grade was seen running as it: the run's (an exploit that hid its processes), or another job's
            whole.problems.append(f"state of uid {uid}, which no grade was seen running as, appeared during the run "
                                  f"(left alone): {describe(mine)}")  # fmt: skip
    failed = [f for f in run.ledger.settle(items, ours) if "is no grade's" not in f]
    if failed:
        whole.problems.append(f"left state not cleaned up: {'; '.join(failed[:3])}")
    if whole.problems:
        verdicts.append(whole)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="audit this exploit (repeatable)")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, (os.cpu_count() or 2))), help="grades at once")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument(
        "--open-traversal",
        action="store_true",
        help="let other users traverse (o+x, no listing) the directories on the way to this Python for the run, and "
        "restore them after (the container installs Python where every user can read it; a pyenv under /root does not)",
    )
    ap.add_argument("--corpus", type=Path, default=EXPLOITS, help="folder of exploits (default: tests/exploits)")
    ap.add_argument("--keep", type=Path, help="grade under this folder and keep it (default: a temporary one)")
    a = ap.parse_args(argv)
    if not hasattr(os, "getuid") or os.getuid() != 0:
        print(
            "audit: run as root (the container's grader is root): only then does submission code run as a separate "
            "uid and the grade is official; as another user the gate proves nothing",
            file=sys.stderr,
        )
        return 2
    from grader import box

    why = box.support()
    if why:
        # The gate grades as a boxed root grade does (grader/box.py): without a box its grades would record
        # "container" (the image's declaration) while sharing this host, and classes 1-5 of issue 38 would win.
        print(f"audit: no kernel containment here: {why}", file=sys.stderr)
        return 2
    import sysconfig

    # A box shows the interpreter through folders of its own (0755), so a Python under a 0700 home (pyenv under
    # /root) starts there as the grade's uid: --open-traversal is needed no more, and kept for older habits.
    blocked = blocked_ancestors([Path(sys.executable), Path(sysconfig.get_paths()["purelib"]), ROOT])
    undo = open_traversal(blocked if a.open_traversal else [])
    try:
        return _run(a)
    finally:
        undo()


def _run(a: argparse.Namespace) -> int:
    names = exploits(a.corpus, a.only, a.device)
    allow = allowances(a.corpus)
    jobs = 1 if a.device == "cuda" else max(1, a.jobs)  # GPU grades one at a time: timing must not share it
    base = Path(tempfile.mkdtemp(prefix="audit-", dir=a.keep))
    os.chmod(base, 0o755)
    try:
        tree, scratch, secret = base / "grader", base / "scratch", base / "secret"
        tree.mkdir()
        image_tree(tree)
        read_only(tree)
        scratch.mkdir()
        os.chmod(scratch, 0o1777)
        secret.mkdir(mode=0o700)
        key = secret / "grader_key"
        r = subprocess.run([sys.executable, "-m", "grader", "keygen", "--out", str(key)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        if r.returncode != 0:
            print(f"audit: keygen failed: {r.stderr.strip()}", file=sys.stderr)
            return 2
        key_hex = key.read_text().strip()
        prefix = read_only_root_prefix(scratch, base)
        layout = {"base": base, "tree": tree, "scratch": scratch, "key": key, "allow": allow, "corpus": a.corpus}
        mqueue, undo_mqueue = ensure_mqueue()
        watch, net = Watch(), Listeners()
        ledger = Ledger([*STATE_DIRS, scratch], mqueue)
        run = Run(layout, prefix, key_hex, a.device, jobs == 1, watch, net, ledger, pair_uids(a.corpus, names))
        print(f"audit: {len(names)} exploits, {jobs} at a time, device {a.device}, "
              f"read-only root: {'yes' if prefix else 'no (unshare unavailable)'}, "
              f"POSIX queues: {mqueue or 'not visible'}", flush=True)  # fmt: skip
        try:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                verdicts = list(pool.map(lambda n: grade_one(n, run), names))
            final_check(run, verdicts)
        finally:
            watch.close()
            net.close()
            undo_mqueue()
    finally:
        # A failed exploit's folder is kept for a person to read (its path is in the table); else nothing is left.
        if a.keep is None and not any(p.is_dir() for p in base.glob("audit-*")):
            shutil.rmtree(base, ignore_errors=True)
    width = max(len(v.name) for v in verdicts) if verdicts else 10
    for v in verdicts:
        score = "-" if v.score is None else f"{v.score:g}"
        print(f"{'ok  ' if v.ok else 'FAIL'} {v.name:<{width}} score {score:>6} (allowed {v.allowed:g}) "
              f"{v.seconds:6.1f} s  {'; '.join(v.problems)}")  # fmt: skip
    bad = [v for v in verdicts if not v.ok]
    print(
        f"audit: {len([v for v in verdicts if v.ok])} of {len(names)} exploits held"
        + (f"; FAILED: {', '.join(v.name for v in bad)}" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
