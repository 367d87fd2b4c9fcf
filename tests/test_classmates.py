"""A grade's inputs are private to it, and concurrent grades never share an untrusted uid (issue 28, classes 1 and 7;
docs/SECURITY.md, "A grade's inputs are private to it").

- the uid pool (grader/identity.py): two live grades never hold one uid, even when GRADER_STUDENT_UID names a single
  one, and one grade's cleanup kills only its own processes;
- a grade's scratch: another grade's uid cannot read its submission copy, even knowing the path;
- the batch (grader/batch/): no student's path or id on any command line, OUT and the unpacked inputs the grader's
  only, a class folder every user can read refused;
- a batch with tests/exploits/classmate_search among honest classmates: on the local engine, on Slurm and in the
  container's layout, the searcher finds nothing and scores 0, the others keep their scores.

Everything here needs root (only root can run code as other uids; CI runs as root); it skips otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import cli, identity
from grader.batch import EXIT_OK, EXIT_USAGE
from grader.classfiles import state

ROOT = Path(__file__).resolve().parent.parent
FAKE = Path(__file__).resolve().parent / "batch_fake_grade.py"
SEARCHER = ROOT / "tests" / "exploits" / "classmate_search" / "glu_triton.py"
MARKER = "CLASSMATE-KERNEL-MARKER"
CLASSMATES = ("ada7q", "bob3x")  # ids that appear nowhere else: a command line naming one leaks it
SEARCHER_ID = "srch9k"

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root (other uids)")


@pytest.fixture(autouse=True)
def _official(monkeypatch):
    """Grades as the container's: separate uids (no GRADER_SAME_UID), no configured uid unless a test sets one."""
    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    monkeypatch.delenv("GRADER_STUDENT_UID", raising=False)


def _unused_uid(n: int = 1) -> int:
    """The first of `n` consecutive uids that no process holds and the pool never handed out (grader/identity.py:
    each uid serves one grade)."""
    used = identity._uids_in_use()
    locks = identity.lock_dir() or Path("/nonexistent")

    def free(uid: int) -> bool:
        return uid not in used and not any((locks / f"{uid}.{x}").exists() for x in ("lock", "used"))

    for uid in range(1_850_000, 1_900_000, n):
        if all(free(u) for u in range(uid, uid + n)):
            return uid
    raise AssertionError("no unused uid")


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A folder every user can pass through, as a TA's /tmp or home usually is (pytest's tmp_path is under 0700)."""
    d = Path(tempfile.mkdtemp(prefix="classmates-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _as(ident: identity.Identity, *cmd: str) -> subprocess.Popen:
    return subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **ident.popen_kwargs())  # fmt: skip


# --- the uid pool ------------------------------------------------------------------------------------------------


def test_two_live_grades_never_share_a_uid_even_a_configured_one(monkeypatch):
    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    uid = _unused_uid()
    monkeypatch.setenv("GRADER_STUDENT_UID", str(uid))
    a = identity.pick_identity()
    b = identity.pick_identity()
    assert a.separated and b.separated
    assert a.uid == uid and b.uid != uid and b.gid == b.uid and a.gid == a.uid
    # Another process (another grade of the batch) does not get it either, while `a` holds it.
    code = "from grader import identity; i = identity.pick_identity(); print(i.uid, i.separated)"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    other, sep = r.stdout.split()
    assert sep == "True" and int(other) not in (uid, b.uid)
    a.release()
    b.release()
    c = identity.pick_identity()  # given back, yet never handed out again: each grade gets a fresh uid
    assert c.separated and c.uid != uid
    c.release()
    # A range: every live grade a different uid of it.
    uid = _unused_uid(3)
    monkeypatch.setenv("GRADER_STUDENT_UID", f"{uid}-{uid + 2}")
    held = [identity.pick_identity() for _ in range(4)]
    assert len({h.uid for h in held}) == 4 and sum(uid <= h.uid <= uid + 2 for h in held) == 3
    for h in held:
        h.release()


def test_a_grade_killed_outright_frees_its_uid_but_a_uid_with_processes_is_never_taken(monkeypatch):
    uid = _unused_uid()
    monkeypatch.setenv("GRADER_STUDENT_UID", str(uid))
    code = "import sys; from grader import identity; i = identity.pick_identity(); print(i.uid, flush=True); sys.stdin.read()"  # noqa: E501
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert int(holder.stdout.readline()) == uid
    assert identity.pick_identity().uid != uid
    holder.kill()  # SIGKILL: no cleanup ran; the kernel dropped its flock, and its mark keeps the uid from reuse
    holder.wait()
    assert identity.pick_identity().uid != uid
    # A leftover process of a uid (a grade's stray, another grader's worker): the uid is not handed out, even to
    # the first grade that names it.
    uid = _unused_uid()
    free = identity.Identity(uid, uid, True)
    monkeypatch.setenv("GRADER_STUDENT_UID", str(uid))
    stray = _as(free, "sleep", "60")
    free.release()
    try:
        assert identity.pick_identity().uid != uid
    finally:
        os.killpg(stray.pid, signal.SIGKILL)
        stray.wait()


def test_one_grade_s_cleanup_kills_only_its_own_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADER_STUDENT_UID", str(_unused_uid()))  # both grades would get it, without the pool
    a, b = identity.pick_identity(), identity.pick_identity()
    neighbour = _as(a, "sleep", "60")  # a's worker, mid-grade
    mine = _as(b, "sleep", "60")  # b's leftover
    try:
        identity.Scratch(b, tmp_path / "trusted").close()  # b's grade ends: kill_uid(b.uid)
        assert mine.wait(timeout=10) == -signal.SIGKILL
        time.sleep(0.2)
        assert neighbour.poll() is None, "one grade's cleanup killed its neighbour's worker"
    finally:
        for p in (neighbour, mine):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
        a.release()
        b.release()


def test_another_grade_s_uid_cannot_read_a_submission_copy_even_knowing_its_path(monkeypatch, world_dir):
    monkeypatch.delenv("GRADER_STUDENT_UID", raising=False)
    mine, other = identity.pick_identity(), identity.pick_identity()
    sub = world_dir / "sub"
    sub.mkdir()
    (sub / "glu_triton.py").write_text(f"# {MARKER}\n")
    with identity.Scratch(mine, world_dir / "trusted", base=world_dir) as s:
        s.add_submission(sub)
        copy = s.submission / "glu_triton.py"
        child = s.lib / "grader" / "child" / "worker.py"
        for path in (copy, child):
            p = _as(other, "cat", str(path))
            out, err = p.communicate(timeout=30)
            assert p.returncode != 0 and MARKER not in out, f"{path} readable by another grade's uid"
            p = _as(mine, "cat", str(path))
            out, err = p.communicate(timeout=30)
            assert p.returncode == 0, f"the grade's own uid cannot read {path}: {err}"
        assert MARKER in _as(mine, "cat", str(copy)).communicate(timeout=30)[0]
        p = _as(other, "ls", str(s.root))
        assert p.wait(timeout=30) != 0, "another uid can list the grade's scratch"
    other.release()


# --- the batch ---------------------------------------------------------------------------------------------------


def _cmdlines() -> list[str]:
    got = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != me:
            try:
                got.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return got


class CmdlineWatch:
    """Reads every process's command line every 50 ms while a batch runs; `leaks` are those naming a student."""

    def __init__(self, words: tuple[str, ...]):
        self.words, self.leaks, self.seen = words, set(), 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for c in _cmdlines():
                self.seen += 1
                if any(w in c for w in self.words):
                    self.leaks.add(c[:300])
            time.sleep(0.05)

    def __enter__(self) -> CmdlineWatch:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def _assert_private(*roots: Path) -> None:
    """Nothing under `roots` is reachable by a uid that is not the grader's: the roots 0700, and (in depth) no folder
    in them that others may enter."""
    for r in roots:
        assert stat.S_IMODE(os.stat(r).st_mode) & 0o077 == 0, f"{r} is open to other users"
        for dirpath, dirnames, _files in os.walk(r):
            for n in dirnames:
                mode = os.lstat(os.path.join(dirpath, n)).st_mode
                assert not mode & stat.S_IXOTH, f"{os.path.join(dirpath, n)} can be entered by every user"


def _class(root: Path, searcher: bool = True) -> Path:
    """A folder of per-student folders: classmates with the staff Triton kernel and a marker, and the searcher."""
    staff = (ROOT / "reference" / "glu" / "solution_triton.py").read_text()
    for sid in CLASSMATES:
        (root / sid).mkdir(parents=True)
        (root / sid / "glu_triton.py").write_text(staff + f"\n# {MARKER} {sid}\n")
    if searcher:
        (root / SEARCHER_ID).mkdir(parents=True)
        shutil.copy(SEARCHER, root / SEARCHER_ID / "glu_triton.py")
    return root


def _export_zip(class_dir: Path, z: Path) -> Path:
    """The class as a Gradescope export zip (so that the batch unpacks it into its inputs folder)."""
    meta = []
    with zipfile.ZipFile(z, "w") as zf:
        for n, d in enumerate(sorted(class_dir.iterdir())):
            zf.write(d / "glu_triton.py", f"export/submission_{n}/glu_triton.py")
            meta.append(f"submission_{n}:\n  :submitters:\n  - :name: {d.name}\n    :sid: '{d.name}'\n")
        zf.writestr("export/submission_metadata.yml", "".join(meta))
    return z


def test_a_class_folder_every_user_can_read_is_refused(world_dir, monkeypatch, capsys):
    monkeypatch.delenv("GRADER_SAME_UID", raising=False)
    subs = _class(world_dir / "class", searcher=False)
    os.chmod(subs, 0o755)
    assert cli.main(["batch", str(subs), "--out", str(world_dir / "out"), "--slots", "1", "--no-perf"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "can be read by every user" in err and "chmod 700" in err
    assert not (world_dir / "out").exists()
    os.chmod(subs, 0o700)  # made private: accepted (the fake grade: quick)
    monkeypatch.setenv("GRADER_BATCH_GRADE_COMMAND", json.dumps([sys.executable, str(FAKE)]))
    monkeypatch.setenv("FAKE_GRADE_LOG", str(world_dir / "fakelog"))
    assert cli.main(["batch", str(subs), "--out", str(world_dir / "out"), "--slots", "1", "--no-perf"]) == EXIT_OK


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_no_student_s_path_or_id_is_on_a_command_line_and_outputs_are_private(world_dir, tmp_path, monkeypatch):
    """The fake grade (quick): while the batch runs, no process's command line names a student; afterwards OUT and
    the unpacked export are the grader's only."""
    monkeypatch.setenv("GRADER_BATCH_GRADE_COMMAND", json.dumps([sys.executable, str(FAKE)]))
    monkeypatch.setenv("FAKE_GRADE_LOG", str(tmp_path / "fakelog"))
    monkeypatch.setenv("FAKE_GRADE_SLEEP", "1.0")
    subs = _class(tmp_path / "class")  # private (under pytest's 0700 folder)
    out = world_dir / "out"  # in a folder every user can list: its own modes must protect it
    with CmdlineWatch((*CLASSMATES, SEARCHER_ID)) as w:
        assert cli.main(["batch", str(subs), "--out", str(out), "--slots", "3", "--no-perf"]) == EXIT_OK
    assert w.seen and not w.leaks, w.leaks
    assert json.loads((tmp_path / "fakelog" / "calls.jsonl").read_text().splitlines()[0])["submission"]
    _assert_private(out)
    # A Gradescope export: unpacked into .OUT.inputs beside OUT, which must be the grader's too.
    z = _export_zip(subs, tmp_path / "export.zip")
    out2 = world_dir / "out2"
    with CmdlineWatch((*CLASSMATES, SEARCHER_ID, "submission_")) as w:
        assert cli.main(["batch", str(z), "--out", str(out2), "--slots", "3", "--no-perf"]) == EXIT_OK
    assert not w.leaks, w.leaks
    assert any(state.inputs_dir(out2).rglob("glu_triton.py"))
    _assert_private(out2, state.inputs_dir(out2))


def _check_class(out: Path, folder: dict[str, str] | None = None) -> None:
    """The searcher found nothing and scored 0; each classmate scored, and nothing in the searcher's grade names a
    classmate. folder: each student's folder under OUT (default: the id itself)."""
    folder = folder or {}
    searcher = (out / folder.get(SEARCHER_ID, SEARCHER_ID) / "results.json").read_text()
    assert "classmate_search: found nothing" in searcher, searcher[-3000:]
    assert MARKER not in searcher and not any(sid in searcher for sid in CLASSMATES), searcher[-3000:]
    assert json.loads(searcher)["score"] == 0
    scores = [json.loads((out / folder.get(s, s) / "results.json").read_text())["score"] for s in CLASSMATES]
    assert scores[0] > 0 and scores[0] == scores[1], scores


@pytest.mark.slow
def test_a_searcher_in_a_local_batch_finds_no_classmate(separated, world_dir, tmp_path, monkeypatch):
    """Real CPU grades (Triton part, no timing) of a Gradescope export: two classmates with a marked staff kernel, the
    searcher beside them, three at once. OUT and the unpacked export lie in a folder every user can list."""
    z = _export_zip(_class(tmp_path / "class"), tmp_path / "export.zip")
    out = world_dir / "out"
    args = ["batch", str(z), "--out", str(out), "--slots", "3", "--no-perf", "--only", "triton", "--device", "cpu"]
    with CmdlineWatch((*CLASSMATES, SEARCHER_ID, "submission_")) as w:
        assert cli.main(args) == EXIT_OK
    assert not w.leaks, w.leaks
    # The export's folders are submission_<n>, the n-th student in name order (_export_zip).
    _check_class(out, {sid: f"submission_{n}" for n, sid in enumerate(sorted((*CLASSMATES, SEARCHER_ID)))})
    _assert_private(out, state.inputs_dir(out))


# --- the container's layout --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_searcher_in_a_batch_in_the_container_layout_finds_no_classmate(separated, world_dir, tmp_path):
    """The image's environment (its ENV lines: one GRADER_STUDENT_UID for every grade, TMPDIR, HOME and the caches in
    /scratch), the whole filesystem read-only but /scratch (as `docker run --read-only --tmpfs /scratch`), and a batch
    of three at once inside it: every grade gets a uid of its own (the configured one is taken by the first), and
    the searcher finds nothing."""
    import test_container as tc  # tests/ is on sys.path (pytest's rootdir-less import mode)

    scratch = world_dir / "scratch"
    scratch.mkdir()
    os.chmod(scratch, 0o1777)  # --tmpfs /scratch:mode=1777
    subs = _class(tmp_path / "class")  # mounted read-only, private to the grader
    env = tc.image_env({"/opt/venv": sys.prefix, "/scratch": str(scratch), "/grader": str(ROOT)})
    env["GRADER_STUDENT_UID"] = str(_unused_uid())
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env["CUDA_VISIBLE_DEVICES"] = ""
    out = scratch / "out"
    cmd = [sys.executable, "-m", "grader", "batch", str(subs), "--out", str(out), "--slots", "3", "--no-perf",
           "--only", "triton", "--device", "cpu"]  # fmt: skip
    read_only = tc._read_only_root(scratch)
    with CmdlineWatch((*CLASSMATES, SEARCHER_ID)) as w:
        r = subprocess.run([*read_only, *cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
                           check=False)  # fmt: skip
    assert r.returncode == 0, f"read-only root: {bool(read_only)}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    assert not w.leaks, w.leaks
    _check_class(out)
    _assert_private(out)


# --- the Slurm engine ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A real single-node Slurm (tests/slurm_cluster.py), ended with this module."""
    import slurm_cluster  # tests/ is on sys.path

    if not sys.platform.startswith("linux"):
        pytest.skip("Slurm runs on Linux only")
    try:
        c = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.Unavailable as e:
        pytest.skip(f"no Slurm here: {e}")
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.slow
def test_a_searcher_in_a_slurm_batch_finds_no_classmate(separated, slurm, world_dir, tmp_path, monkeypatch):
    """The same class on the Slurm engine (array tasks as root, real CPU grades of the Triton part): the searcher
    finds nothing, the classmates keep their scores, no command line (sbatch scripts, array tasks) names a student."""
    for k, v in slurm.env.items():
        monkeypatch.setenv(k, v)
    z = _export_zip(_class(tmp_path / "class"), tmp_path / "export.zip")  # unpacked beside OUT, by the batch
    out = world_dir / "out"
    args = ["batch", str(z), "--out", str(out), "--engine", "slurm", "--device", "cpu", "--no-perf", "--only",
            "triton", "--cpus-per-task", "1", "--mem", "1G", "--max-parallel", "3"]  # fmt: skip
    with CmdlineWatch((*CLASSMATES, SEARCHER_ID, "submission_")) as w:
        assert cli.main(args) == EXIT_OK
        slurm.wait_idle(timeout=600)
    assert not w.leaks, w.leaks
    _check_class(out, {sid: f"submission_{n}" for n, sid in enumerate(sorted((*CLASSMATES, SEARCHER_ID)))})
    _assert_private(out, state.inputs_dir(out))
