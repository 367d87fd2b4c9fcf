"""Kernel containment (grader/box.py, issue 38): what a box holds ends with it, it sees only its view, and it reaches
no network, keyring or cgroup of the host. Each class of the issue has a test here that fails without its defence:
the same command run the way an unboxed grade ran it (as the grade's uid, `Identity.popen_kwargs`) shows the leak.

Needs root and bubblewrap (the `boxes` fixture installs Debian's where it can, and skips with the reason where it
cannot). CPU only.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import box, identity

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def scratch(separated, monkeypatch) -> Iterator[identity.Scratch]:
    """A grade's scratch with a fresh uid, in the system's temporary folder (pytest's tmp_path is under 0700), with
    its box. (`separated` also lets other uids reach this Python unboxed, as the unboxed variants need.)"""
    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    monkeypatch.delenv("GRADER_STUDENT_UID", raising=False)
    ident = identity.pick_identity()
    assert ident.separated, ident.why_not
    trusted = Path(tempfile.mkdtemp(prefix="box-trusted-"))
    s = identity.Scratch(ident, trusted)
    assert s.box is not None and s.containment == box.BOX, s.box_why
    try:
        yield s
    finally:
        s.close()
        shutil.rmtree(trusted, ignore_errors=True)


def _run(s: identity.Scratch, code: str, boxed: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -c code` as the grade's uid: in its box, or (boxed=False) as an unboxed grade ran it."""
    cmd = [sys.executable, "-s", "-c", textwrap.dedent(code)]
    argv, who = s.untrusted(cmd, s.home) if boxed else (cmd, s.identity.popen_kwargs())
    return subprocess.run(
        argv, cwd=s.home, env=s.env(trusted=False), capture_output=True, text=True, timeout=timeout, **who
    )


def _procs_of(uid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat(f"/proc/{p}").st_uid == uid:
                    out.append(int(p))
            except OSError:
                pass
    return out


# -- class 1: processes outlive the grade ---------------------------------------------------------------------------

DAEMONS = """
    import os, time
    for _ in range(3):  # double-forked, in sessions of their own: out of every process group the grader knows
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)  # the caller's pipes close: it returns while they live on
                time.sleep(120)
            os._exit(0)
    time.sleep(0.3)
    print("started")
"""


@pytest.mark.parametrize("boxed", [True, False])
def test_daemons_end_with_their_box_with_no_loop_to_race(scratch, boxed):
    """A box's init dies with the process it started, and the kernel kills every process of its PID namespace: no
    scan of /proc is involved (nothing here calls kill_uid). Unboxed, the same daemons outlive the command."""
    r = _run(scratch, DAEMONS, boxed=boxed)
    assert r.returncode == 0 and "started" in r.stdout, r.stderr
    time.sleep(0.3)  # the namespace's teardown is the kernel's, right after its init exits
    left = _procs_of(scratch.identity.uid)
    if boxed:
        assert left == [], left
    else:
        assert len(left) >= 3, left  # the three sleepers (and their exited parents, if nobody reaped them yet)
        identity.kill_uid(scratch.identity.uid)


def test_a_grade_s_cgroup_holds_every_box_and_goes_with_the_grade(boxes, monkeypatch):
    """Where the host offers cgroups, each box joins the grade's before it runs anything (the launcher writes its
    own pid), with pids.max set; the folder is gone after the grade."""
    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    trusted = Path(tempfile.mkdtemp(prefix="box-trusted-"))
    s = identity.Scratch(identity.pick_identity(), trusted)
    try:
        assert s.box is not None
        if s.box.cgroup is None:
            pytest.skip(f"no cgroup here: {s.box.cgroup_why}")
        argv, _ = s.untrusted([sys.executable, "-s", "-c", "import time; print('in', flush=True); time.sleep(30)"])
        p = subprocess.Popen(argv, cwd=s.home, env=s.env(trusted=False), stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None and p.stdout.readline().strip() == "in"
        members = set().union(*(box._read_pids(Path(f)) for f in s.box.cgroup.procs))
        assert p.pid in members and len(members) >= 3  # the launcher (now bwrap), its init, the command
        for d in s.box.cgroup.dirs:
            limit = (d / "pids.max") if (d / "pids.max").exists() else None
            if limit is not None:
                assert limit.read_text().strip() == str(box.PIDS_MAX)
        dirs = list(s.box.cgroup.dirs)
    finally:
        s.close()
        shutil.rmtree(trusted, ignore_errors=True)
    p.wait(timeout=30)  # killed with the grade's cgroup
    assert not any(d.exists() for d in dirs)


# -- classes 2 and 3: state outside the scratch, and kernel objects keyed by uid ---------------------------------------

LEAVE_STATE = """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmget.restype = ctypes.c_int
    shm = libc.shmget(0x5EED, 64 << 20, 0o1600)  # IPC_CREAT | 0600, never removed
    sem = libc.semget(0x5EED, 1, 0o1600)
    msg = libc.msgget(0x5EED, 0o1600)
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            with open(os.path.join(d, "left-by-the-grade"), "w") as f:
                f.write("x")
        except OSError as e:
            print("no", d, e)
    print("ipc", shm, sem, msg)
"""


def _sysv_of(uid: int) -> list[str]:
    out = []
    for kind in ("shm", "sem", "msg"):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            # shm: key shmid perms size cpid lpid nattch uid ...; sem: key semid perms nsems uid; msg: ... uid at 7
            col = {"shm": 7, "sem": 4, "msg": 7}[kind]
            if len(f) > col and f[col] == str(uid):
                out.append(f"{kind} {f[0]} {f[1]}")
    return out


@pytest.mark.parametrize("boxed", [True, False])
def test_ipc_objects_and_temp_files_end_with_the_box(scratch, boxed):
    """System V segments, semaphores and queues live in the box's IPC namespace, /tmp, /var/tmp and /dev/shm are
    its own tmpfs: all gone when it ends. Unboxed, they stay (64 MiB of shm pinned) for whoever comes next."""
    uid = scratch.identity.uid
    r = _run(scratch, LEAVE_STATE, boxed=boxed)
    assert r.returncode == 0 and "ipc" in r.stdout, r.stderr
    left_ipc = _sysv_of(uid)
    left_files = [d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.exists(os.path.join(d, "left-by-the-grade"))]
    try:
        if boxed:
            assert left_ipc == [] and left_files == [], (left_ipc, left_files)
        else:
            assert len(left_ipc) == 3 and left_files, (left_ipc, left_files)
    finally:
        for entry in left_ipc:
            kind, _key, ident = entry.split()
            flag = {"shm": "-m", "sem": "-s", "msg": "-q"}[kind]
            subprocess.run(["ipcrm", flag, ident], check=False, capture_output=True)
        for d in left_files:
            os.unlink(os.path.join(d, "left-by-the-grade"))


KEYRING = """
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nr = {"x86_64": 248, "aarch64": 217}[__import__("platform").machine()]  # add_key
    k = libc.syscall(nr, b"user", b"glu-kernel", b"source", 6, ctypes.c_int(-4))  # KEY_SPEC_USER_KEYRING
    print("add_key", k, ctypes.get_errno())
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="the filter knows these architectures")
@pytest.mark.parametrize("boxed", [True, False])
def test_keyrings_are_refused_in_a_box(scratch, boxed):
    """A keyring is keyed by uid, not by namespace: a grade's key would be there for the next grade of that uid.
    In a box, add_key (and keyctl, request_key) fail with EPERM; unboxed, the key is stored."""
    r = _run(scratch, KEYRING, boxed=boxed)
    assert r.returncode == 0, r.stderr
    k, err = (int(x) for x in r.stdout.split()[1:3])
    if boxed:
        assert (k, err) == (-1, 1), r.stdout  # EPERM
    else:
        assert k > 0, r.stdout
        # the key outlives its uid's processes: unlink it from the uid's keyring, as that uid (KEYCTL_UNLINK = 9)
        nr = {"x86_64": 250, "aarch64": 219}[platform.machine()]
        code = f"import ctypes; ctypes.CDLL(None).syscall({nr}, 9, {k}, ctypes.c_int(-4))"
        assert _run(scratch, code, boxed=False).returncode == 0


def test_the_seccomp_program_is_what_bwrap_reads():
    """struct sock_filter[] little-endian: arch check, x32 check (x86_64), the three keyring calls, allow, deny."""
    prog = box.seccomp_program("x86_64")
    insns = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    assert len(insns) == 10
    assert insns[1] == (0x15, 1, 0, 0xC000003E) and insns[2][3] == 0x00050001
    assert [i[3] for i in insns[5:8]] == [250, 248, 249]
    assert insns[-2][3] == 0x7FFF0000 and insns[-1][3] == 0x00050001
    for n, (code, jt, _jf, _k) in enumerate(insns):  # every jump lands on the final deny
        if code in (0x15, 0x35) and n > 1:
            assert n + 1 + jt == len(insns) - 1
    assert box.seccomp_program("riscv64") == b""


# -- class 4: the network ---------------------------------------------------------------------------------------------

REACH = """
    import socket, sys
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).sendall(b"uid and key path")
        print("reached")
    except OSError as e:
        print("refused", e)
    print([n for _, n in socket.if_nameindex()])
"""


@pytest.mark.parametrize("boxed", [True, False])
def test_a_box_has_a_loopback_of_its_own(scratch, boxed):
    """The box's network namespace holds only its own `lo`: the host's 127.0.0.1 listener is not there."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        cmd = [sys.executable, "-s", "-c", textwrap.dedent(REACH), str(port)]
        argv, who = scratch.untrusted(cmd, scratch.home) if boxed else (cmd, scratch.identity.popen_kwargs())
        r = subprocess.run(argv, cwd=scratch.home, env=scratch.env(trusted=False), capture_output=True, text=True,
                           timeout=60, **who)  # fmt: skip
    assert ("reached" in r.stdout) == (not boxed), r.stdout + r.stderr
    if boxed:
        assert "['lo']" in r.stdout


# -- class 5: the view ---------------------------------------------------------------------------------------------

LOOK = """
    import json, os, sys
    paths = json.loads(sys.argv[1])
    print(json.dumps({p: os.path.exists(p) for p in paths}))
    try:
        open("/usr/grader-was-here", "w")
        print("wrote /usr")
    except OSError:
        print("read-only /usr")
"""


def test_the_box_shows_the_scratch_and_the_interpreter_and_none_of_the_checkout(scratch):
    import json

    staff = sorted(str(p) for p in (ROOT / "reference").glob("*/solution_*"))
    kernels = sorted(str(p) for p in (ROOT / "tests" / "data" / "problems").glob("*/correct/*/*"))
    assert staff and kernels
    want_hidden = [
        *staff,
        *kernels[:5],
        str(ROOT / "tests"),
        str(ROOT / "grader" / "pipeline.py"),
        str(ROOT / "reference"),
    ]
    want_shown = [str(scratch.home), str(scratch.lib / "grader" / "child" / "worker.py"), sys.executable]
    cmd = [sys.executable, "-s", "-c", textwrap.dedent(LOOK), json.dumps(want_hidden + want_shown)]
    argv, _ = scratch.untrusted(cmd, scratch.home)
    r = subprocess.run(argv, cwd=scratch.home, env=scratch.env(trusted=False), capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout.splitlines()[0])
    assert not any(seen[p] for p in want_hidden), [p for p in want_hidden if seen[p]]
    assert all(seen[p] for p in want_shown), [p for p in want_shown if not seen[p]]
    assert "read-only /usr" in r.stdout


def test_a_hidden_folder_that_holds_the_interpreter_shows_only_the_interpreter(tmp_path):
    """A venv inside the checkout (.nox/env): the checkout is covered by an empty tmpfs and the venv shown again on
    it; a hidden folder outside every shown tree costs nothing."""
    checkout = tmp_path / "checkout"
    venv = checkout / ".nox" / "env"
    venv.mkdir(parents=True)
    (checkout / "tests").mkdir()
    args = box.View([venv, Path("/usr/lib")], [checkout, tmp_path / "elsewhere"]).args()
    joined = " ".join(args)
    assert f"--ro-bind {venv} {venv}" in joined
    assert f"--tmpfs {checkout}" not in joined  # the venv is shown alone: the checkout is not under a bind
    args = box.View([checkout, venv], [checkout]).args()  # a .pth naming the checkout itself
    i = args.index("--tmpfs")
    assert args[i + 1] == str(checkout)
    assert args[i + 2 :].count(str(venv)) == 2  # shown again on top of the cover, after the cover


def test_containment_is_recorded_and_none_is_not_official(separated, monkeypatch, tmp_path):
    """No box (no bwrap): with the deployment's word (GRADER_CONTAINMENT=container) the grade says 'container';
    without it 'none', and an official grade is refused with the reason and the fix."""
    from grader import pipeline
    from grader.problem.spec import find_problem, load_problem

    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    monkeypatch.setenv(box.BWRAP_ENV, "/nonexistent/bwrap")
    box.support.cache_clear()
    problem = load_problem(find_problem(None, ROOT))
    try:
        for declared, want in ((box.CONTAINER, box.CONTAINER), ("", box.NONE)):
            monkeypatch.setenv(box.DECLARE_ENV, declared)
            with pipeline.open_scratch(Path(tempfile.gettempdir())) as s:
                assert s.box is None and s.containment == want and "bwrap" in s.box_why
                if not s.identity.separated:
                    pytest.skip(f"no separate uid here: {s.identity.why_not}")
                why = pipeline.official_reasons(problem, s)
            assert any("no kernel containment" in w for w in why) == (want == box.NONE), why
    finally:
        box.support.cache_clear()


def test_a_stray_named_in_bytes_that_are_not_utf8_is_still_reaped():
    """reap_strays read /proc/<pid>/stat as text: a process that named itself (PR_SET_NAME) in bytes that are not
    UTF-8 raised UnicodeDecodeError there and was skipped (tests/exploits/proc_outlive_revivers hid so). It reads
    bytes now. (Runs as any user: the stray is this process's own child.)"""
    from grader import sandbox

    code = (
        "import ctypes, time; ctypes.CDLL(None).prctl(15, b'\\xff\\xfe-stray', 0, 0, 0); "
        "print('named', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "named"
        with open(f"/proc/{p.pid}/stat", "rb") as f:
            assert b"\xff\xfe-stray" in f.read()
        assert sandbox.reap_strays(quiet_scans=2) >= 1
        assert not os.path.exists(f"/proc/{p.pid}")  # killed and reaped by reap_strays itself
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_compiler_wrapper_outside_usr_builds_in_the_box(separated, monkeypatch):
    """A toolchain whose driver is a wrapper outside /usr that reads its own lib/ (the device host's CXX is
    /opt/gcc/bin/g++, passing -B and -isystem into /opt/gcc/lib): PATH names only its bin/, and the CPU layer's
    build in the box failed on every CUDA grade there ("stddef.h: No such file"). The box now shows what the
    compiler says it reads; without that, this build fails on the wrapper's own header."""
    from grader.cuda import cudacpu

    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    monkeypatch.delenv("GRADER_STUDENT_UID", raising=False)
    tool = Path(tempfile.mkdtemp(prefix="box-toolchain-"))
    trusted = Path(tempfile.mkdtemp(prefix="box-trusted-"))
    s = None
    try:
        tool.chmod(0o755)
        (tool / "bin").mkdir()
        (tool / "lib" / "include").mkdir(parents=True)
        (tool / "lib" / "include" / "wrapper_marker.h").write_text("#define WRAPPER_MARKER 1\n")
        cxx = tool / "bin" / "g++"
        inc = tool / "lib" / "include"
        cxx.write_text(f'#!/bin/sh\nexec {shutil.which("g++")} -isystem {inc} -include wrapper_marker.h "$@"\n')
        cxx.chmod(0o755)
        monkeypatch.setenv("CXX", str(cxx))
        monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep + str(cxx.parent))
        box._ask_compiler.cache_clear()
        assert inc in box.toolkit_paths()
        s = identity.Scratch(identity.pick_identity(), trusted)
        assert s.box is not None, s.box_why
        src = ROOT / "tests" / "data" / "problems" / "glu" / "cuda_cpu" / "scalar" / "glu_cuda.cu"
        b = cudacpu.build_cpu(src, entry="glu_cuda_forward", scratch=s)
        assert b.harness is not None, b.text
    finally:
        if s is not None:
            s.close()
        box._ask_compiler.cache_clear()
        shutil.rmtree(tool, ignore_errors=True)
        shutil.rmtree(trusted, ignore_errors=True)
