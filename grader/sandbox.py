"""The trusted parent's handle on one untrusted child process (grader/child/worker.py).

The child is spawned (fresh interpreter, fresh CUDA context), puts itself in its own process group, and is
killed as a group when it hangs, crashes or is done. Every failure becomes a `WorkerFailure` with one line a
student can act on: "timed out after 60 s", "crashed with SIGSEGV (segmentation fault)", "exited with code 3".
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from grader import identity, wire
from grader.child.wire import ERROR_CATEGORIES, MalformedMessage

_SIGNAL_HELP = {
    signal.SIGSEGV: "segmentation fault: an invalid memory access on the host side",
    signal.SIGABRT: "aborted: often a failed assertion or a CUDA error that killed the process",
    signal.SIGKILL: "killed: out of memory or an external kill",
    signal.SIGBUS: "bus error: a misaligned or invalid memory access",
    signal.SIGFPE: "floating-point exception: an integer division by zero?",
}


def _start_child(fd: int, device: str, flags: list[str], trusted: bool) -> subprocess.Popen[bytes]:
    """`python -m grader.child FD DEVICE ...` in its own session, with a fresh environment: as the grade's
    untrusted identity from its private scratch, or (trusted) as this process with the trusted caches. Without an
    active grade (tests, scripts) it runs as this process, from this environment."""
    scratch = identity.active()
    cmd = [sys.executable, "-s", "-m", "grader.child", str(fd), device, *flags]
    if scratch is None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        env.pop("GRADER_SECRET_SEED", None)
        return subprocess.Popen(cmd, pass_fds=(fd,), env=env, start_new_session=True, stdin=subprocess.DEVNULL)
    env = scratch.env(trusted=trusted)
    cwd = scratch.trusted_cache if trusted else scratch.home
    # untrusted: in the grade's box (grader/box.py), or as its uid where there is none
    argv, who = (cmd, {}) if trusted else scratch.untrusted(cmd, cwd)
    popen: subprocess.Popen[bytes] = subprocess.Popen(
        argv,
        pass_fds=(fd,),
        env=env,
        cwd=cwd,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        **who,
    )
    return popen


class _Proc:
    """The few things the Sandbox asks of its child process, over subprocess.Popen (multiprocessing.Process's names)."""

    def __init__(self, popen: subprocess.Popen[bytes]):
        self.popen = popen
        self.pid: int | None = popen.pid

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


class GraderFault(Exception):
    """The grader itself failed (a worker died before any submission code ran, the trusted side broke): no grade
    that blames the student is written; the CLI exits with EXIT_GRADER_FAULT and the real traceback."""

    def __init__(self, line: str, detail: str = ""):
        super().__init__(line)
        self.line = line
        self.detail = detail


class WorkerFailure(Exception):
    """The child could not answer: timed out, crashed, or reported an error. str() is one line.

    `reason` says which, for callers (never match the line's text): "timeout" (killed at the deadline),
    "crash" (the process died or closed its pipe), "protocol" (its reply broke the wire format or its bounds:
    grader/wire.py), "error" (the worker answered with an error: the process is fine)."""

    def __init__(
        self,
        line: str,
        detail: str = "",
        fatal: bool = False,
        reason: str = "error",
        category: str = "call",
        own: str = "",
    ):
        super().__init__(line)
        self.line = line
        self.detail = detail  # for a worker's error: the whole traceback
        self.own = own  # the same with only the submission's own frames ('' when none, or the worker sent none)
        self.fatal = fatal  # True: the process is gone (or killed); a new one must be started
        self.reason = reason
        self.category = category  # for reason "error": one of child/wire.py ERROR_CATEGORIES, the worker's word


def describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        sig = signal.Signals(-code)
        return f"crashed with {sig.name} ({_SIGNAL_HELP.get(sig, 'killed by a signal')})"
    return f"exited with code {code} (a submission must not call sys.exit or os._exit)"


class Sandbox:
    """One spawned worker. Use as a context manager; `request` sends a command and waits for its reply."""

    def __init__(
        self,
        device: str,
        start_timeout_s: float = 180.0,
        wait: bool = True,
        timing: bool = False,
        compile_only: bool = False,
        trusted: bool = False,
        max_reply: int = wire.DEFAULT_MAX_REPLY,
    ):
        """timing=True: the worker builds a Timer (only timing workers need one; it costs a GPU calibration).
        compile_only=True: a CPU worker without Triton's interpreter, for grader/correctness/gpucompile.py.
        trusted=True: the staff's baselines (the grader's own uid and caches); else the submission's identity and
        scratch from the active grade (grader/identity.py).
        max_reply: the most bytes one reply may have (a correctness worker's replies carry output tensors: its creator
        sizes this from the largest case); a longer one is refused before it is read (grader/wire.py)."""
        self.max_reply = max_reply
        self.device = device
        self.trusted = trusted
        # Replies are read as data only (grader/wire.py): a worker's forged pickle cannot run code here. Requests are
        # `dumps` for every worker but a timing worker, whose are in multiprocessing's format, unbounded
        # (docs/performance.md#the-wall-clock-check).
        self._wire = wire.timing_parent if timing else wire
        self.conn, child_conn = mp.Pipe()
        flags = (["--timing"] if timing else []) + (["--compile-only"] if compile_only else [])
        self.proc = _Proc(_start_child(child_conn.fileno(), device, flags, trusted))
        child_conn.close()
        self.ready = False
        self.pending: list[str] = []  # what each command queued with `send` is, until `drain` collects its reply
        self._queued: list[str] = []  # and its command (its reply is checked against wire.COMMANDS)
        self.drained: list[Any] = []  # every reply `drain` collected so far (one caller may drain for another)
        if wait:
            self.wait_ready(start_timeout_s)

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the child's greeting (imports and CUDA initialisation done). Once; later calls return at once."""
        if not self.ready:
            try:
                self.request(None, None, timeout_s=timeout_s, what="start")
            except WorkerFailure as e:
                # No submission code has run in this process yet: this is the grader's fault, not the student's.
                raise GraderFault(
                    f"a {'trusted' if self.trusted else 'submission'} worker failed to start, before "
                    f"any submission code ran: {e.line}",
                    e.detail,
                ) from None
            self.ready = True

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self.proc.is_alive()

    def send(self, cmd: str, payload: Any, *, what: str) -> None:
        """Queue a command without waiting: its reply is collected, in order, by `drain`. The worker runs it once
        it is ready and before any later request (a child handles one command at a time, in order)."""
        try:
            self._wire.send(self.conn, wire.request(cmd, payload))
        except OSError as e:
            raise WorkerFailure(
                f"{what}: could not reach the worker ({type(e).__name__})", fatal=True, reason="crash"
            ) from None
        self.pending.append(what)
        self._queued.append(cmd)

    def drain(self, timeout_s: float) -> list[Any]:
        """The replies of every command queued with `send`, in order (raises on the first failed one)."""
        self.wait_ready(timeout_s)  # the greeting comes first
        out = []
        while self.pending:
            cmd = self._queued.pop(0) if self._queued else None
            out.append(self.request(None, None, timeout_s=timeout_s, what=self.pending.pop(0), expect=cmd))
            self.drained.append(out[-1])
        return out

    def request(self, cmd: str | None, payload: Any, *, timeout_s: float, what: str, expect: str | None = None) -> Any:
        """Send `wire.request(cmd, payload)` (or, when cmd is None, just wait for the next reply: the greeting, or the
        queued command `expect`'s) and return the reply value, checked against the command's declared reply type
        (`wire.check_reply`: a reply of another type is a protocol violation)."""
        if cmd is not None and self.pending:
            raise RuntimeError(f"{what}: {len(self.pending)} queued replies not collected yet (call drain first)")
        # Every read and write below ends by this deadline (grader/wire.py): a child that sends a frame header and
        # then nothing, or stops reading its request, is killed at it like one that hangs in a call.
        deadline = time.monotonic() + timeout_s
        try:
            if cmd is not None:
                self._wire.send(self.conn, wire.request(cmd, payload), deadline=deadline)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise wire.WireTimeout(what)
                if self.conn.poll(min(left, 0.5)):
                    break
                if not self.proc.is_alive():
                    # Drain a reply that raced with the exit, else report how it died.
                    if self.conn.poll(0.1):
                        break
                    raise EOFError
            reply = self._wire.recv(self.conn, deadline=deadline, limit=self.max_reply)
        except wire.WireTimeout:
            self.kill()
            raise WorkerFailure(
                f"{what} timed out after {timeout_s:.0f} s (killed)", fatal=True, reason="timeout"
            ) from None
        except MalformedMessage as e:
            # Not a reply the worker wrote: something in the child forged bytes on the pipe (the parent decodes
            # data only, within bounds, so nothing in them ran here). The child can no longer be trusted to stay
            # in step.
            self._protocol_violation(what, str(e))
        except (EOFError, OSError):  # ConnectionError and BrokenPipeError are OSErrors
            self.proc.join(timeout=5)
            code = self.proc.exitcode
            self.kill()
            raise WorkerFailure(f"{what}: the process {describe_exit(code)}", fatal=True, reason="crash") from None
        if not isinstance(reply, tuple) or len(reply) < 2 or reply[0] not in ("ok", "error"):
            self._protocol_violation(what, "a reply that is not ('ok', value) or ('error', line, detail)")
        if reply[0] == "error":
            if not all(type(x) is str for x in reply[1:3]):
                self._protocol_violation(what, "an error reply whose line or detail is not text")
            category = reply[3] if len(reply) > 3 and reply[3] in ERROR_CATEGORIES else "call"
            own = reply[4] if len(reply) > 4 and type(reply[4]) is str else ""
            raise WorkerFailure(
                reply[1], reply[2] if len(reply) > 2 else "", reason="error", category=category, own=own
            )
        wrong = wire.check_reply(cmd or expect or "", reply[1])
        if wrong:
            self._protocol_violation(what, wrong)
        return reply[1]

    def _protocol_violation(self, what: str, why: str) -> NoReturn:
        self.kill()
        raise WorkerFailure(
            f"{what}: protocol violation: {why}; the worker sent a malformed reply (was the result pipe "
            "tampered with?)",
            fatal=True,
            reason="protocol",
        ) from None

    def kill(self) -> None:
        """Kill the child's whole process group (and the child itself, if it never got its own group)."""
        self._signal_kill()
        self.proc.join(timeout=5)

    def _signal_kill(self) -> None:
        pid = self.proc.pid
        if pid is None:
            return
        # A group with id == pid exists only if the child made it (setsid), so this never hits our own group.
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _ask_exit(self, deadline: float) -> None:
        if self.proc.is_alive():
            try:
                self._wire.send(self.conn, wire.request(wire.EXIT, None), deadline=deadline)
            except (OSError, MalformedMessage):
                pass

    def close(self, grace_s: float = 2.0) -> None:
        """Ask the worker to exit, wait up to grace_s for it, then kill its process group. grace_s=0: kill at once
        (a worker whose exit writes nothing the grader reads: Python's own teardown costs 0.3-0.5 s, and a
        submission's exit handlers never run). Several workers: `close_all`."""
        close_all([self], grace_s)


def close_all(boxes: Iterable[Sandbox | None], grace_s: float = 2.0) -> None:
    """Close every worker at once: all are asked to exit, all share one grace period, then every one left is
    killed before any is waited for. Closing them one by one cost each one's teardown in turn (a CUDA worker's
    exit takes up to a second or two): six timing workers added ~6 s to every GPU grade (docs/performance.md,
    "Grade cost"). A box listed twice is closed once; None is skipped."""
    unique: list[Sandbox] = []
    for b in {id(b): b for b in boxes if b is not None}.values():
        if isinstance(b, Sandbox):
            unique.append(b)
        else:
            b.close()  # a stand-in with only close() (the tests' fake workers)
    deadline = time.monotonic() + grace_s
    if grace_s > 0:
        for b in unique:
            b._ask_exit(deadline)
        for b in unique:
            b.proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for b in unique:
        b._signal_kill()
    for b in unique:
        b.proc.join(timeout=5)
        try:
            b.conn.close()
        except OSError:
            pass


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: another process of the same user can no longer read this one's /proc/<pid>/environ or
    memory, nor ptrace it. So even when student code runs as the grader's own user (local grading), it cannot
    read the secret seed out of the grader's initial environment. Children regain it with their exec."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(4, 0, 0, 0, 0) == 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError, TypeError):  # TypeError: Windows' CDLL(None); AttributeError: no prctl (macOS)
        return False


def become_subreaper() -> bool:
    """Make orphaned descendants (a submission's daemons that escaped its process group with setsid) re-parent
    to this process instead of init, so that `reap_strays` can find and kill them. Linux only; False elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError, TypeError):  # TypeError: Windows' CDLL(None)
        return False


def reap_strays(quiet_scans: int = 5, max_scans: int = 500) -> int:
    """Kill every remaining child of the grader (all sandboxes are closed by now), scanning until `quiet_scans`
    scans in a row find none: as a subreaper we inherit each new generation of a re-forking daemon, so it
    is caught by a later scan. Returns how many were killed."""
    killed, quiet = 0, 0
    for _ in range(max_scans):
        n, ended = _reap_once()
        killed += n
        # an orphan that had already ended is not counted as left running, but it is activity: a re-forking
        # daemon leaves one behind each hop, and its live child may be between scans
        quiet = 0 if n or ended else quiet + 1
        if quiet >= quiet_scans:
            break
        time.sleep(0.002)
    return killed


def _reap_once() -> tuple[int, int]:
    """One scan: (children killed, children that had already ended and were only reaped)."""
    me, killed, ended = os.getpid(), 0, 0
    keep = set()
    try:  # multiprocessing's own resource tracker is our child too, and is not the submission's
        from multiprocessing import resource_tracker

        keep.add(getattr(resource_tracker._resource_tracker, "_pid", None))
    except ImportError:
        pass
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0, 0
    for pid in pids:
        try:
            # bytes: a process names itself (comm), in any bytes; read as text, a non-UTF-8 name raised
            # UnicodeDecodeError, a ValueError, and the process was skipped (an exploit hid its daemons so)
            with open(f"/proc/{pid}/stat", "rb") as f:
                state_b, ppid_b = f.read(4096).rsplit(b")", 1)[1].split()[:2]
            state, ppid = state_b.decode("ascii", "replace"), int(ppid_b)
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and state == "Z":
            # an orphan that already ended (a box's init outlived by its bwrap by a moment): reaped, not "running"
            with contextlib.suppress(OSError):
                os.waitpid(pid, os.WNOHANG)
                ended += 1
            continue
        if ppid == me and pid not in keep:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                killed += 1
            except OSError:
                pass
    return killed, ended
