"""The red-team gate (scripts/audit.py, `nox -s audit`): the exploit corpus graded as official autograder grades in
the container's layout. Full tier: CI runs it on every change (as root, so submission code runs as separate uids)."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AUDIT = ROOT / "scripts" / "audit.py"
root_only = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="the audit needs root")


def _audit(*args: str, timeout: int = 3600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "EXPLOIT_"))}
    return subprocess.run([sys.executable, str(AUDIT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def test_the_audit_refuses_to_prove_nothing_when_not_root():
    """As an ordinary user no grade can be official (no separate uid): the gate says so and exits 2, never 0."""
    if hasattr(os, "getuid") and os.getuid() == 0:
        r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable,
                            str(AUDIT), "--only", "nan_wildcard"], cwd="/", capture_output=True, text=True,
                           timeout=120, check=False)  # fmt: skip
    else:
        r = _audit("--only", "nan_wildcard", timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "run as root" in r.stderr


@pytest.mark.slow
@root_only
def test_the_gate_fails_on_an_exploit_that_keeps_points(tmp_path, boxes):
    """A corpus of one 'exploit' that is simply the staff Triton solution, allowed 0 points: the gate must fail it
    (kept 24 points), so a real exploit that starts winning cannot pass unseen."""
    corpus = tmp_path / "corpus"
    (corpus / "honest_kernel").mkdir(parents=True)
    shutil.copy2(ROOT / "reference" / "glu" / "solution_triton.py", corpus / "honest_kernel" / "glu_triton.py")
    os.chmod(tmp_path, 0o755)
    r = _audit("--corpus", str(corpus), "--open-traversal", timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if "honest_kernel" in x)
    assert line.startswith("FAIL") and "kept" in line and "the audit allows 0" in line, line


@pytest.mark.slow
@root_only
def test_every_exploit_of_the_corpus_holds_in_an_official_grade(boxes):
    r = _audit("--open-traversal")
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-3000:]


# -- the gate's checks, without a grade (issue 38): CPU-fast -----------------------------------------------------------

sys.path.insert(0, str(ROOT / "scripts"))
import audit  # noqa: E402

# A process that carries a grade's mark and forks (the parent exiting) as fast as it can, for 10 s at most: a new
# pid every fork, faster than one scan of /proc.
# A hopper that forks and lets its parent exit every 5 ms: found by a scan, yet at a new pid each time. (One that
# hops with no pause at all can be between pids at every scan of a 2-core machine, for longer than the gate's quiet
# window: kill_marked then never saw it, and this test failed one run in two. Inside a box no such hopper survives
# the grade anyway: the PID namespace ends it; the gate's sweep is for a grader without one.)
HOPPER = (
    "import os, time\nt0 = time.monotonic()\n"
    "while time.monotonic() - t0 < 10:\n    time.sleep(0.005)\n    os.fork() and os._exit(0)\n"
)


def _marked(tmp_path) -> tuple[bytes, dict[str, str]]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "EXPLOIT_STOPFILE": str(tmp_path / "stop")}
    return audit.mark_of(tmp_path), env


def test_leftover_processes_are_found_by_their_mark_and_a_forking_one_is_stopped_then_killed(tmp_path):
    """A sleeper and a fork-hopper carrying the grade's mark (EXPLOIT_STOPFILE=<work>/stop in their environment)
    are found alive after their parent is gone, and stopped then killed, the hopper too; a process with another
    grade's mark is neither found nor touched."""
    mark, env = _marked(tmp_path)
    other = dict(env, EXPLOIT_STOPFILE=str(tmp_path / "other" / "stop"))
    bystander = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(30)"], env=other)
    started = [subprocess.Popen([sys.executable, "-S", "-c", c], env=env, start_new_session=True)
               for c in ("import time; time.sleep(30)", HOPPER)]  # fmt: skip
    try:
        time.sleep(0.3)
        found = audit.leftovers([mark])
        assert started[0].pid in found and len(found) >= 2, found  # the sleeper, and the hopper at some pid
        assert bystander.pid not in found
        assert {m for m, _uid in found.values()} == {mark}
        assert audit.kill_marked([mark]) >= 2
        left = audit.leftovers([mark], seconds=0.5)
        assert left == {}, [(p, audit._uid_state(p), open(f"/proc/{p}/cmdline", "rb").read()[:80]) for p in left]
        assert bystander.poll() is None, "a process of another grade was killed"
    finally:
        for p in (*started, bystander):
            p.kill()
            p.wait()


def test_the_listeners_attribute_each_connection_to_its_grade():
    """Each grade has its own TCP port on 127.0.0.1 and its own abstract socket: a connection to one grade's is that
    grade's problem, with what it sent (capped), and never another grade's."""
    net = audit.Listeners()
    try:
        (port_a, name_a), (port_b, _name_b) = net.open("alpha"), net.open("beta")
        assert port_a != port_b
        with socket.create_connection(("127.0.0.1", port_a), timeout=5) as s:
            s.sendall(b"uid=1234 " + b"x" * 10_000)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as u:
            u.connect("\0" + name_a)
            u.sendall(b"from the abstract socket")
        deadline = time.monotonic() + 5
        while net.count("alpha") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        problem = net.problem("alpha")
        assert problem.startswith("the submission reached the host's network (127.0.0.1): 2 connection(s)"), problem
        assert "uid=1234" in problem and "from the abstract socket" in problem and len(problem) < 600, problem
        assert net.problem("beta") == ""
        assert net.problem("alpha", skip=2) == "", "connections already reported are not reported again"
    finally:
        net.close()


def test_a_pair_is_its_first_folder_then_its_own_as_one_configured_uid(tmp_path):
    """An exploit with a first/ subfolder is two grades in one slot: first/ (its score not checked), then the
    folder itself without first/, both with the pair's own GRADER_STUDENT_UID; a folder without one is one grade."""
    corpus = tmp_path / "corpus"
    for d in ("pair_a/first", "pair_a", "pair_b/first", "pair_b", "single"):
        (corpus / d).mkdir(parents=True, exist_ok=True)
        (corpus / d / "glu_triton.py").write_text(f"# {d}\n")
    uids = audit.pair_uids(corpus, ["pair_a", "pair_b", "single"])
    assert set(uids) == {"pair_a", "pair_b"} and len(set(uids.values())) == 2
    steps = audit.plan(corpus, "pair_a", uids["pair_a"])
    assert [(s.tag, s.src, s.uid, s.scored) for s in steps] == [
        ("pair_a/first", corpus / "pair_a" / "first", uids["pair_a"], False),
        ("pair_a", corpus / "pair_a", uids["pair_a"], True),
    ]
    assert [(s.tag, s.uid, s.scored) for s in audit.plan(corpus, "single", None)] == [("single", None, True)]
    audit.copy_submission(corpus / "pair_a", tmp_path / "graded")
    assert sorted(p.name for p in (tmp_path / "graded").iterdir()) == ["glu_triton.py"]  # first/ is not in it
    shutil.rmtree(tmp_path / "graded", onerror=lambda f, p, e: (os.chmod(os.path.dirname(p), 0o755), f(p)))


def test_system_v_objects_and_keys_are_parsed_from_the_kernels_tables(tmp_path):
    """/proc/sysvipc/{shm,sem,msg} by their header's column names (plain split), and a uid's /proc/keys without
    its two standard keyrings, a description (anyone's text) shown capped."""
    proc = tmp_path / "sysvipc"
    proc.mkdir()
    (proc / "shm").write_text(
        "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime"
        "      dtime      ctime                   rss                  swap\n"
        "  12345678          7   600             268435456   100   100      0  1900123  1900123  1900123  1900123"
        "          0          0 1700000000             268435456                     0\n"
        "garbage line\n"
    )
    (proc / "sem").write_text(
        "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n"
        "         0          3   600          4  1777  1777  1777  1777          0 1700000000\n"
    )
    (proc / "msg").write_text("")
    items = {(i.kind, i.ident, i.uid) for i in audit._sysv_items(proc)}
    assert items == {("shm", "7", 1900123), ("sem", "3", 1777)}
    (shm,) = [i for i in audit._sysv_items(proc) if i.kind == "shm"]
    assert "256.0 MiB" in str(shm) and "0xbc614e" in str(shm)
    keys = (
        "1a2b3c4d I--Q---     1 perm 1f3f0000  1777 65534 keyring   _uid.1777: 1\n"
        "1a2b3c4e I--Q---     1 perm 1f3f0000  1777 65534 keyring   _uid_ses.1777: 1\n"
        "1a2b3c4f I--Q---     1 perm 3f010000  1777  1777 user      stolen kernel " + "y" * 5000 + ": 1234\n"
        "1a2b3c50 I--Q---     1 perm 3f010000     0     0 user      root's: 10\n"
    ).encode()
    (left,) = audit.parse_keys(keys, 1777)
    assert left.startswith("user 'stolen kernel") and len(left) < 80, left


def test_a_left_files_name_is_shown_escaped_and_capped():
    """A file's name is the exploit's text: in the audit's table it is one escaped line of bounded length."""
    shown = str(audit.Item("file", "/dev/shm/a\nFAIL forged\x1b[2J" + "x" * 10_000, 1900123))
    assert "\n" not in shown and "\x1b" not in shown and len(shown) < 200, shown
    assert shown.startswith("/dev/shm/a\\nFAIL forged\\x1b[2J") and shown.endswith("... (uid 1900123)"), shown


@root_only
def test_state_a_uid_leaves_is_found_attributed_and_removed(tmp_path):
    """A process of a fresh uid leaves a System V segment, semaphore set and message queue, a file in /dev/shm and
    a key in its user keyring, and exits: the ledger finds each (all of that uid's, nothing else), and settling
    removes them, so that the next grade starts clean."""
    uid = 1_777_700 + os.getpid() % 50
    ledger = audit.Ledger(audit.STATE_DIRS, None)
    before = ledger.now()
    name = f"/dev/shm/audit-test-{os.getpid()}"
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # the uid's process: leave everything, exit
        code = 1
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            ok = [libc.shmget(0, 1 << 20, 0o1600) >= 0, libc.semget(0, 2, 0o1600) >= 0, libc.msgget(0, 0o1600) >= 0]
            with open(name, "w") as f:
                f.write("left")
            nr = {"x86_64": 248, "aarch64": 217, "ppc64le": 269, "s390x": 278}[platform.machine()]  # add_key
            ok.append(libc.syscall(nr, b"user", b"audit-test", b"payload", 7, -4) > 0)
            code = 0 if all(ok) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the uid could not leave its state"
    new = ledger.new(before)
    try:
        assert {i.kind for i in new} == {"shm", "sem", "msg", "file", "keys"}, audit.describe(new)
        assert {i.uid for i in new} == {uid}
        assert any(i.ident == name for i in new)
        (keys,) = [i for i in new if i.kind == "keys"]
        assert "audit-test" in str(keys), keys
        assert ledger.settle(new, {uid}) == []
        assert not os.path.exists(name)
        now = audit.state_items(audit.STATE_DIRS, None)
        assert not {i for i in now if i.uid == uid and i.kind != "keys"}, audit.describe(now)
        assert audit.keys_left(uid) == []
        assert ledger.new(set()) & new == set()
    finally:
        ledger.settle(ledger.new(before), {uid})


@root_only
def test_the_watch_learns_a_grades_uid_from_its_marked_processes(tmp_path):
    """While a grade runs, the uids of the processes carrying its mark are its uids (root's and the audit's are not):
    what a grade leaves is attributed to it by them when grades run side by side."""
    mark, env = _marked(tmp_path)
    watch = audit.Watch()
    watch.add(mark)
    p = subprocess.Popen(["sleep", "5"], env=env, user=1_777_760, group=1_777_760, extra_groups=[])
    q = subprocess.Popen(["sleep", "5"], env=env)  # root's: not a grade's uid
    try:
        time.sleep(2 * audit.WATCH_S + 0.2)
        assert watch.done(mark) == {1_777_760}
    finally:
        watch.close()
        for x in (p, q):
            x.kill()
            x.wait()


def test_concurrent_audits_restore_traversal_only_when_the_last_one_ends(tmp_path):
    """Two audits open a folder for traversal at once: the first to end leaves it open (the other still needs it),
    the last one restores the mode it had before either began, even though the second saw it open already."""
    folder, state = tmp_path / "pyenv", tmp_path / "state"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o700)
    undo_a = audit.open_traversal([folder], state)
    assert folder.stat().st_mode & 0o777 == 0o701
    undo_b = audit.open_traversal([], state)  # it finds the folder open already: nothing of its own to open
    undo_a()
    assert folder.stat().st_mode & 0o777 == 0o701, "closed while another audit was running"
    undo_b()
    assert folder.stat().st_mode & 0o777 == 0o700
    assert not (state / "modes.json").exists()
