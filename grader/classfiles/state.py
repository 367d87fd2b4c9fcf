"""What a batch knows between runs, all of it under OUT, so that any run (or `batch status`) picks up where the last
one stopped.

Why: docs/architecture.md, "Modules: the why", grader/classfiles/state.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from grader.report import write_json_atomic

BATCH_DIR = ".batch"
STAGING = ".staging"
RECORD = "batch.json"
RESULTS = "results.json"
PARTIAL = "results.json.partial"
MANIFEST_VERSION = 1
GRADER_DIR = Path(__file__).resolve().parent.parent


class Outcome(StrEnum):
    """What one attempt at a submission came to."""

    GRADED = "graded"  # results.json written: the grade, whatever the score (student crashes and hangs included)
    REFUSED = "refused"  # the grader would not grade it (exit 2: e.g. an empty folder); never retried
    INFRA = "infrastructure"  # a grader or machine fault (exit 3, no GPU, out of disk, grader crash): retried
    KILLED = "killed"  # the task was stopped (scancel, time limit, Ctrl-C): nothing graded


class Status(StrEnum):
    """Where a submission stands now (batch status)."""

    DONE = "done"
    REFUSED = "not gradable"
    INFRA = "not graded: infrastructure"
    RUNNING = "running"
    MISSING = "missing"


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def grader_version() -> str:
    """The package version and a hash of the grader's own code (every .py and .json under grader/): any edit of
    the grader regrades the class."""
    h = hashlib.sha256()
    for p in sorted(GRADER_DIR.rglob("*")):
        if p.suffix in (".py", ".json") and p.is_file() and "__pycache__" not in p.parts:
            h.update(p.relative_to(GRADER_DIR).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return f"0.1.0+{h.hexdigest()[:16]}"


def spec_hash(spec: Path, reference: Path) -> str:
    """The problem as data: its spec.yaml, its reference (truth and baselines) and its hints."""
    h = hashlib.sha256()
    for p in (spec, reference, spec.parent / "hints.yaml"):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def image_digest(image: str | None, given: str | None = None) -> str | None:
    """The container's identity: --image-digest when given; a reference pinned by digest (`name@sha256:...`); the
    sha256 of a local image file (.sif, .sqsh); else the reference itself (a tag can move: pin by digest)."""
    if given:
        return given
    if not image:
        return None
    if "@sha256:" in image:
        return image.split("@", 1)[1]
    p = Path(image)
    if p.is_file():
        return "sha256:" + sha256_file(p)
    return image


def result_key(content: str, parts: dict[str, Any]) -> str:
    """The key a result is stored under: its submission's content hash and the batch's key parts."""
    return hashlib.sha256(json.dumps({"content": content, **parts}, sort_keys=True).encode()).hexdigest()


def batch_dir(out: Path) -> Path:
    return out / BATCH_DIR


def inputs_dir(out: Path) -> Path:
    """Where an export zip is unpacked and repositories are cloned: beside OUT, not in it, since the TA report reads
    every results.json under OUT (and a Gradescope export, or a student, may bring one of their own)."""
    return out.parent / f".{out.name}.inputs"


def write_manifest(out: Path, manifest: dict[str, Any]) -> Path:
    p = batch_dir(out) / "manifest.json"
    write_json_atomic(p, {"version": MANIFEST_VERSION, **manifest})
    return p


def read_manifest(out: Path) -> dict[str, Any]:
    p = batch_dir(out) / "manifest.json"
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{out}: no batch here ({p} missing): run `python -m grader batch ...` first") from None
    if not isinstance(m, dict):  # the grader writes an object; anything else is not its manifest
        raise ValueError(f"{p}: not a batch manifest (a JSON object), got {type(m).__name__}")
    if m.get("version") != MANIFEST_VERSION:
        raise ValueError(f"{p}: manifest version {m.get('version')!r}, this grader reads {MANIFEST_VERSION}")
    return m


# --- attempts ----------------------------------------------------------------------------------------------------


def _attempts_path(out: Path, sid: str) -> Path:
    return batch_dir(out) / "attempts" / f"{sid}.jsonl"


def append_attempt(out: Path, sid: str, entry: dict[str, Any]) -> None:
    """One JSON line, appended in a single write (one task per submission at a time writes this file)."""
    p = _attempts_path(out, sid)
    p.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps({"at": time.time(), **entry}, default=str) + "\n").encode()
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def attempts(out: Path, sid: str) -> list[dict[str, Any]]:
    try:
        lines = _attempts_path(out, sid).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    got = []
    for ln in lines:
        try:
            d = json.loads(ln)
        except json.JSONDecodeError:  # a line cut by a crash: the rest still counts
            continue
        if isinstance(d, dict):
            got.append(d)
    return got


def new_run(out: Path, sid: str, run: str) -> None:
    """A fresh `batch` run starts this submission's retry budget again."""
    append_attempt(out, sid, {"event": "run", "run": run})


def infra_faults(history: list[dict[str, Any]], key: str, *, killed: bool = False) -> int:
    """Attempts at this key that ended in an infrastructure fault since the last run began (killed ones too,
    with killed=True)."""
    n = 0
    for a in history:
        if a.get("event") == "run":
            n = 0
        elif a.get("key") == key and (
            a.get("outcome") == Outcome.INFRA or (killed and a.get("outcome") == Outcome.KILLED)
        ):
            n += 1
    return n


def last_attempt(history: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    return next((a for a in reversed(history) if a.get("event") is None and a.get("key") == key), None)


# --- results -----------------------------------------------------------------------------------------------------


def read_record(out: Path, sid: str) -> dict[str, Any] | None:
    try:
        d = json.loads((out / sid / RECORD).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return d if isinstance(d, dict) else None


def is_done(out: Path, sid: str, key: str) -> bool:
    """The current key's grade is in place, whole: batch.json says so and results.json is the file it recorded."""
    rec = read_record(out, sid)
    if rec is None or rec.get("key") != key or rec.get("outcome") != Outcome.GRADED:
        return False
    try:
        return sha256_file(out / sid / RESULTS) == rec.get("results_sha256")
    except OSError:
        return False


def is_refused(out: Path, sid: str, key: str) -> bool:
    rec = read_record(out, sid)
    return rec is not None and rec.get("key") == key and rec.get("outcome") == Outcome.REFUSED


def install(out: Path, sid: str, files: dict[str, Path | bytes], record: dict[str, Any]) -> None:
    """OUT/<sid>/ replaced whole: files (name -> a path to copy, or bytes) and batch.json staged in a hidden folder,
    renamed into place, and results.json renamed in last of all. A crash anywhere leaves the old folder, or none."""
    staging = out / STAGING
    staging.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{sid}.", dir=staging))
    try:
        for name, src in files.items():
            dest = tmp / (PARTIAL if name == RESULTS else name)
            if isinstance(src, bytes):
                dest.write_bytes(src)
            else:
                shutil.copyfile(src, dest)
            os.chmod(dest, 0o640)
        write_json_atomic(tmp / RECORD, record)
        # The grader's (and its group's), never every user's: a classmate's code must not read this grade.
        os.chmod(tmp, 0o750)
        final = out / sid
        old = None
        if final.exists() or final.is_symlink():
            old = staging / f"{sid}.old.{uuid.uuid4().hex[:8]}"
            if (final / RESULTS).is_file() and not final.is_symlink():
                os.replace(final / RESULTS, final / PARTIAL)  # so that no results.json is ever read from staging
            os.rename(final, old)
        os.rename(tmp, final)
        if (final / PARTIAL).exists():
            os.replace(final / PARTIAL, final / RESULTS)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def clean_staging(out: Path, older_than_s: float = 600) -> int:
    """Remove what killed tasks left in OUT/.staging: entries older than older_than_s (an install takes seconds, so
    a task installing now is left alone). Returns how many."""
    d = out / STAGING
    if not d.is_dir():
        return 0
    n = 0
    for p in d.iterdir():
        try:
            if time.time() - p.lstat().st_mtime < older_than_s:
                continue
        except OSError:
            continue
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        n += 1
    return n


# --- running markers -----------------------------------------------------------------------------------------------


def mark_running(out: Path, sid: str, info: dict[str, Any]) -> Path:
    p = batch_dir(out) / "running" / f"{sid}.json"
    write_json_atomic(p, {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time(), **info})
    return p


def running_marker(out: Path, sid: str) -> dict[str, Any] | None:
    try:
        d = json.loads((batch_dir(out) / "running" / f"{sid}.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return d if isinstance(d, dict) else None


def clear_running(out: Path, sid: str) -> None:
    (batch_dir(out) / "running" / f"{sid}.json").unlink(missing_ok=True)


def _alive_here(marker: dict[str, Any]) -> bool:
    if marker.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(marker.get("pid", -1)), 0)
    except (OSError, ValueError):
        return False
    return True


@dataclass
class Entry:
    index: int
    sid: str
    key: str
    status: Status
    why: str = ""  # for people: the last attempt's reason
    attempts: int = 0


def status_of(out: Path, manifest: dict[str, Any], live: set[int] | None = None) -> list[Entry]:
    """Each submission's status. live: the indices the scheduler still has queued or running (Slurm: squeue);
    without it (the local engine) a running marker counts when its process is alive on this host."""
    retries = int(manifest.get("options", {}).get("retries", 0))
    got = []
    for it in manifest["items"]:
        sid, key, index = it["sid"], it["key"], int(it["index"])
        hist = attempts(out, sid)
        last = last_attempt(hist, key)
        n = sum(1 for a in hist if a.get("event") is None and a.get("key") == key)
        why = str(last.get("why", "")) if last else ""
        if is_done(out, sid, key):
            st = Status.DONE
        elif is_refused(out, sid, key):
            st = Status.REFUSED
        elif (index in live) if live is not None else _alive_here(running_marker(out, sid) or {}):
            st = Status.RUNNING
        elif last is not None and last.get("outcome") == Outcome.INFRA and infra_faults(hist, key) > retries:
            st = Status.INFRA
        else:
            st = Status.MISSING
            if last is None:
                why = "changed since its last grade" if (out / sid / RECORD).exists() else "never graded"
            elif last.get("outcome") == Outcome.GRADED:
                why = "its results.json is missing or corrupt"
        got.append(Entry(index, sid, key, st, why, n))
    return got
