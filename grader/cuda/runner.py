"""The one runner of the processes a CUDA build starts: nvcc (and the cicc, ptxas and host compiler it runs), ptxas -v
and c++filt for the compiler report, g++/clang++ for the CUDA-on-CPU layer, and that layer's probe of its own macros.

Why: docs/SECURITY.md, "Modules: the why", grader/cuda/runner.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from grader import textscan

if TYPE_CHECKING:
    from grader.identity import Scratch

MAX_LOG_BYTES = 256 * 1024  # of a compiler's output: what is past it is read and thrown away, never held
MAX_WRITE_BYTES = 1 << 30  # the largest file a compiler may write (a preprocessed unit, an object, a library)


@dataclass(frozen=True)
class Ran:
    """What one run left: its exit status (None when it ran past its timeout and its whole group was killed) and its
    output (at most the run's `limit` bytes, then a line saying it was cut, and one saying a file passed the write
    cap)."""

    returncode: int | None
    output: str
    truncated: bool  # it wrote more than `limit` bytes: the rest was read and thrown away
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def write_capped(cmd: Sequence[str]) -> list[str]:
    """`cmd` under a file-size limit (POSIX sh's `ulimit -f`, in 512-byte blocks): a macro bomb that makes the
    preprocessor write gigabytes is stopped at MAX_WRITE_BYTES (SIGXFSZ) instead of filling the disk until the
    build's timeout. Where there is no POSIX shell (Windows), `cmd` as it is."""
    sh = shutil.which("sh") if os.name == "posix" else None
    if sh is None:
        return list(cmd)
    return [sh, "-c", f'ulimit -f {MAX_WRITE_BYTES // 512} && exec "$@"', cmd[0], *cmd]


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process's whole group (it was started in a new session), not only the process: nvcc's children too."""
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is None:
            raise ProcessLookupError
        killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _drain(stream: IO[bytes], limit: int, into: list[bytes], total: list[int]) -> None:
    """Read a pipe to its end, keeping its first `limit` bytes and counting all of them (the writer never blocks on
    a full pipe, and the parent never holds more than `limit`)."""
    kept = 0
    read1 = getattr(stream, "read1", stream.read)
    while True:
        chunk = read1(1 << 16)
        if not chunk:
            return
        total[0] += len(chunk)
        if kept < limit:
            part = chunk[: limit - kept]
            into.append(part)
            kept += len(part)


def _feed(stream: IO[bytes], data: bytes) -> None:
    """Write a child's stdin and close it; a child that exits without reading it all is not an error."""
    try:
        stream.write(data)
    except OSError:  # BrokenPipeError included
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _identity(cmd: list[str], cwd: Path | str | None, scratch: Scratch | None) -> tuple[list[str], dict[str, Any]]:
    """The argv and Popen's arguments for who runs it: in the grade's box (grader/box.py) or as its untrusted uid,
    with its environment; or (no scratch) as this process."""
    if scratch is None:
        return cmd, {}
    argv, who = scratch.untrusted(cmd, cwd)
    return argv, {"env": scratch.env(trusted=False), **who}


def _notes(cmd: Sequence[str], returncode: int | None, truncated: bool, limit: int) -> str:
    """The lines a run's output ends with when it was cut at its cap, or a file it wrote passed MAX_WRITE_BYTES."""
    out = f"\n{textscan.cut_note(limit)}" if truncated else ""
    xfsz = getattr(signal, "SIGXFSZ", None)
    if xfsz is not None and returncode in (-xfsz, 128 + xfsz):
        out += f"\n{Path(cmd[0]).name} stopped: a file it wrote passed {MAX_WRITE_BYTES >> 20} MiB (a macro bomb?)"
    return out


def run(
    cmd: Sequence[str],
    *,
    cwd: Path | str | None,
    timeout_s: float,
    scratch: Scratch | None = None,
    limit: int = MAX_LOG_BYTES,
    input: bytes | None = None,
) -> Ran:
    """Run `cmd` in `cwd` with every defence of this module: as the grade's identity (`scratch`), in its own process
    group killed whole at `timeout_s`, under the write cap, its merged output kept to `limit` bytes (with a line
    saying so when it was cut). Raises OSError only when the command cannot be started."""
    t0 = time.monotonic()
    argv, who = _identity(write_capped(cmd), cwd, scratch)
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
        **who,
    )
    assert proc.stdout is not None
    chunks: list[bytes] = []
    total = [0]
    reader = threading.Thread(target=_drain, args=(proc.stdout, limit, chunks, total), daemon=True)
    reader.start()
    if input is not None:
        assert proc.stdin is not None
        threading.Thread(target=_feed, args=(proc.stdin, input), daemon=True).start()
    rc: int | None
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.wait()
        rc = None
    # The pipe closes when the last process holding it exits; a grandchild that kept it open has been killed with
    # the group, else wait a little and leave the daemon reader behind.
    reader.join(timeout=5.0)
    if not reader.is_alive():
        proc.stdout.close()
    truncated = total[0] > limit
    text = b"".join(chunks).decode("utf-8", errors="replace")
    return Ran(rc, text + _notes(cmd, rc, truncated, limit), truncated, time.monotonic() - t0)
