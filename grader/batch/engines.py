"""Where the tasks run. Both engines start the same task (grader/batch/task.py) once per submission.

Why: docs/architecture.md, "Modules: the why", grader/batch/engines.py.
"""

from __future__ import annotations

import collections
import getpass
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.batch.progress import Progress
from grader.batch.task import ROOT, TASK_OK, TASK_REFUSED
from grader.classfiles import state
from grader.classfiles.state import Outcome
from grader.performance import baselinerecord, gpulock
from grader.report import write_json_atomic, write_text_atomic

# A local slot is taken out of the batch after infrastructure faults in a row on this many different submissions
# (one submission that always faults, a grader bug, retires nothing: it fails on every slot).
RETIRE_AFTER = 3
# --shared-baselines: a GPU whose record grades refused (a control drifted past the bound) this many times in a batch
# is not drained again: its grades time every baseline, as without the option. A record that aged out (MAX_AGE_S) is
# the scheduled re-check, not a refusal: a long batch re-measures each GPU every ~20 minutes without limit.
MAX_REFUSALS = 3
CALIBRATE_COMMAND_ENV = "GRADER_BATCH_CALIBRATE_COMMAND"  # tests: a JSON argv that stands in for the calibration


class EngineError(Exception):
    """The engine cannot start (no sbatch, a bad --gpus list); one line saying why."""


# --- local -------------------------------------------------------------------------------------------------------


@dataclass
class Slot:
    name: str  # "gpu0", "cpu1": what the task records as its slot
    cuda: str  # the task's CUDA_VISIBLE_DEVICES: a GPU index or UUID, or "" (no GPU)
    lock: str = ""  # the GPU's lock file, shared by its slots (GRADER_GPU_LOCK); "" for a CPU slot
    record: str = ""  # --shared-baselines: the GPU's baseline record (GRADER_BASELINE_RECORD), shared by its slots
    faults_in_row: list[str] = field(default_factory=list)  # the submissions of its faults since its last grade
    retired: bool = False


def host_gpus(with_uuids: bool = False) -> list[str]:
    """The GPUs of this host by nvidia-smi index (and UUID, with_uuids); empty without nvidia-smi or GPUs."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        r = subprocess.run(
            [exe, "--query-gpu=index,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if r.returncode != 0:
        return []
    rows = [[x.strip() for x in ln.split(",")] for ln in r.stdout.splitlines() if ln.strip()]
    rows = [row for row in rows if row and row[0].isdigit()]
    return [x for row in rows for x in (row[:2] if with_uuids else row[:1])]


def make_slots(
    gpus: str | None,
    slots: int | None,
    per_gpu: int = 1,
    locks: Path | None = None,
    records: Path | None = None,
) -> list[Slot]:
    """CPU slots (--slots), or per_gpu slots for each GPU, named gpu<id> (one per GPU) or gpu<id>.<k>; the slots of
    one GPU share the lock file locks/gpu<id>.lock and, with `records` (--shared-baselines), the baseline record
    records/gpu<id>.json."""
    if per_gpu < 1:
        raise EngineError(f"--per-gpu {per_gpu}: at least 1")
    if gpus is not None and slots is not None:
        raise EngineError("--gpus and --slots: choose one (GPU slots, or CPU slots)")
    if slots is not None:
        if slots < 1:
            raise EngineError(f"--slots {slots}: at least 1")
        return [Slot(f"cpu{i}", "") for i in range(slots)]
    ids = [g.strip() for g in gpus.split(",")] if gpus is not None else host_gpus()
    if gpus is not None and (not ids or not all(ids) or len(set(ids)) != len(ids)):
        raise EngineError(f"--gpus {gpus!r}: a comma-separated list of distinct GPU indices or UUIDs (e.g. 0,1,2)")
    known = host_gpus(with_uuids=True)
    unknown = [g for g in ids if known and g not in known]
    if unknown:
        raise EngineError(f"--gpus: no GPU {', '.join(unknown)} on this host (nvidia-smi lists {', '.join(known)})")
    for d in (locks, records):
        if d is not None and ids:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)

    def safe(g: str) -> str:
        return re.sub(r"[^A-Za-z0-9_-]", "_", g)

    return [
        Slot(
            f"gpu{g}" if per_gpu == 1 else f"gpu{g}.{k}",
            g,
            str(locks / f"gpu{safe(g)}.lock") if locks is not None else "",
            str(records / f"gpu{safe(g)}.json") if records is not None else "",
        )
        for g in ids
        for k in range(per_gpu)
    ]


def calibrate_command(problem: str, record: str) -> list[str]:
    """The calibration of one GPU's baseline record (grader/performance/calibrate.py)."""
    raw = os.environ.get(CALIBRATE_COMMAND_ENV)
    base = json.loads(raw) if raw else [sys.executable, "-m", "grader.performance.calibrate"]
    return [*base, "--problem", problem, "--out", record]


def record_fresh(record: str, now: float | None = None) -> bool:
    """Whether a GPU's record file is there and young enough to outlive a grade that starts now (a record is
    refused after baselinerecord.MAX_AGE_S; a grade's timing starts a few minutes after its task)."""
    try:
        age = (time.time() if now is None else now) - os.stat(record).st_mtime
    except OSError:
        return False
    return age < baselinerecord.MAX_AGE_S - 600


def task_command(out: Path, index: int, engine: str, slot: str | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "grader.batch", "task", str(out), "--index", str(index), "--engine", engine]
    return cmd + (["--slot", slot] if slot else [])


# A running task: its process, its item, how many attempts its submission had recorded when it started, and the
# slots it is to avoid (those it had infrastructure faults on).
_Running = tuple[subprocess.Popen[bytes], dict[str, Any], int, set[str]]


def run_local(
    out: Path, manifest: dict[str, Any], todo: list[dict[str, Any]], slots: list[Slot], prog: Progress
) -> dict[str, Outcome]:
    """Grade `todo` (manifest items) on `slots`; returns each sid's final outcome for this run."""
    run = _LocalRun(out, int(manifest["options"].get("retries", 0)), slots, prog, todo)
    run.problem = str(manifest["options"].get("problem", ""))
    run.logs.mkdir(parents=True, exist_ok=True)
    try:
        while run.queue or run.running or run.calibrating:
            run.start_free_slots()
            run.reap_finished()
            run.reap_calibrations()
            run.give_up_without_slots()
            prog.update()  # once a round, after the free slots were given work: the counts as they stand
            time.sleep(0.1)
    except KeyboardInterrupt:
        run.stop_running()
        raise
    return run.final


class _LocalRun:
    """run_local's state between its rounds: the queue, the running tasks, each submission's infrastructure faults
    and final outcome."""

    def __init__(self, out: Path, retries: int, slots: list[Slot], prog: Progress, todo: list[dict[str, Any]]) -> None:
        self.out, self.retries, self.slots, self.prog = out, retries, slots, prog
        self.queue: collections.deque[tuple[dict[str, Any], set[str]]] = collections.deque((it, set()) for it in todo)
        self.running: dict[str, _Running] = {}
        self.faults: collections.Counter[str] = collections.Counter()
        self.final: dict[str, Outcome] = {}
        self.logs = state.batch_dir(out) / "logs"
        self.problem = ""  # the spec file, for the calibration (manifest options)
        # --shared-baselines, per GPU (a slot's `cuda`): its calibration running (process, start), how many it had,
        # how many of its records grades refused, and the GPUs whose grades time every baseline (a calibration
        # failed, or MAX_REFUSALS records were refused)
        self.calibrating: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
        self.calibrations: collections.Counter[str] = collections.Counter()
        self.refusals: collections.Counter[str] = collections.Counter()
        self.no_record: set[str] = set()

    def pick(self, slot: Slot) -> int | None:
        usable = {s.name for s in self.slots if not s.retired}
        for i, (_, avoid) in enumerate(self.queue):
            if slot.name not in avoid or usable <= avoid:  # another slot first; this one when no other is left
                return i
        return None

    def start_free_slots(self) -> None:
        for slot in self.slots:
            if slot.retired or slot.name in self.running or not self.queue:
                continue
            if not self.record_ready(slot):
                continue
            i = self.pick(slot)
            if i is None:
                continue
            it, avoid = self.queue[i]
            del self.queue[i]
            self.start(slot, it, avoid)

    def record_ready(self, slot: Slot) -> bool:
        """--shared-baselines: whether a task may start on SLOT as far as its GPU's baseline record goes. A GPU
        without a fresh record is drained (no new task on any of its slots) and then calibrated, so that no grade
        uses it while its baselines are measured (grader/performance/baselinerecord.py). Tasks start again once the
        calibration holds the GPU's lock alone: their start-up, builds and static checks overlap it, and their GPU
        work waits for the lock (grader/performance/gpulock.py), which the calibration gives up with its record
        written."""
        gpu = slot.cuda
        if not slot.record or gpu in self.no_record:
            return True
        if gpu in self.calibrating:
            return bool(slot.lock) and gpulock.held_alone(slot.lock)
        if record_fresh(slot.record):
            return True
        if any(s.cuda == gpu and s.name in self.running for s in self.slots):
            return False  # drain first
        if self.calibrations[gpu] and not os.path.exists(slot.record):
            self.refusals[gpu] += 1  # a grade removed it (stage._refuse_record); an old one is still there
        if self.refusals[gpu] >= MAX_REFUSALS:
            self.no_record.add(gpu)
            self.prog.event(
                f"GPU {gpu}: its baseline record was refused {MAX_REFUSALS} times (the GPU drifts): its "
                "grades time every baseline from now on"
            )
            return True
        self.calibrations[gpu] += 1
        env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": gpu}
        env.pop(baselinerecord.ENV, None)
        env.pop(gpulock.ENV, None)
        if slot.lock:
            env[gpulock.ENV] = slot.lock
        with open(self.logs / f"calibrate-gpu{re.sub(r'[^A-Za-z0-9_-]', '_', gpu)}.log", "ab") as lf:
            p = subprocess.Popen(
                calibrate_command(self.problem, slot.record),
                stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT,
                start_new_session=True,
            )  # fmt: skip
        self.calibrating[gpu] = (p, time.monotonic())
        return False

    def reap_calibrations(self) -> None:
        for gpu, (p, t0) in list(self.calibrating.items()):
            rc = p.poll()
            if rc is None:
                continue
            del self.calibrating[gpu]
            record = next(s.record for s in self.slots if s.cuda == gpu)
            if rc == 0 and record_fresh(record):
                self.prog.event(f"GPU {gpu}: baselines measured for the batch ({time.monotonic() - t0:.0f} s)")
            else:
                self.no_record.add(gpu)
                self.prog.event(
                    f"GPU {gpu}: its baselines could not be measured (exit {rc}; see "
                    f"{self.logs}/calibrate-gpu{gpu}.log): its grades time every baseline"
                )

    def start(self, slot: Slot, it: dict[str, Any], avoid: set[str]) -> None:
        n_before = len(state.attempts(self.out, it["sid"]))
        # PCI order: CUDA's index then names the GPU nvidia-smi lists under the same index (CUDA's default
        # order, fastest first, may differ on a host of mixed GPUs).
        env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": slot.cuda,
               "GRADER_BATCH_SLOT": slot.name}  # fmt: skip
        env.pop(gpulock.ENV, None)
        if slot.lock:
            env[gpulock.ENV] = slot.lock
        env.pop(baselinerecord.ENV, None)
        if slot.record and slot.cuda not in self.no_record:
            env[baselinerecord.ENV] = slot.record
        with open(self.logs / f"{it['sid']}.log", "ab") as lf:
            p = subprocess.Popen(
                task_command(self.out, int(it["index"]), "local", slot.name),
                stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT,
                start_new_session=True,
            )  # fmt: skip
        self.running[slot.name] = (p, it, n_before, avoid)
        self.prog.c.running += 1

    def reap_finished(self) -> None:
        for name, (p, it, n_before, avoid) in list(self.running.items()):
            rc = p.poll()
            if rc is None:
                continue
            del self.running[name]
            self.prog.c.running -= 1
            slot = next(s for s in self.slots if s.name == name)
            sid = it["sid"]
            if rc == TASK_OK:
                slot.faults_in_row.clear()
                self.final[sid] = Outcome.GRADED
                self.prog.c.done += 1
            elif rc == TASK_REFUSED:
                slot.faults_in_row.clear()
                self.final[sid] = Outcome.REFUSED
                self.prog.c.failed += 1
                self.prog.event(f"{sid}: not gradable (the grader refused it; see {self.out / sid / 'grade.log'})")
            else:  # anything else is the machine's or the grader's fault, never the submission's grade
                self.infra_fault(slot, it, rc, n_before, avoid)

    def infra_fault(self, slot: Slot, it: dict[str, Any], rc: int, n_before: int, avoid: set[str]) -> None:
        """A task ended in an infrastructure fault: recorded, its slot retired after RETIRE_AFTER in a row, and the
        submission queued again for another slot while it has retries left."""
        out, sid, name = self.out, it["sid"], slot.name
        if len(state.attempts(out, sid)) == n_before:  # the task died before it could record it
            why = f"task killed by signal {-rc}" if rc < 0 else f"task exited {rc}"
            state.append_attempt(
                out, sid, {"key": it["key"], "engine": "local", "slot": name, "outcome": str(Outcome.INFRA),
                           "why": why},
            )  # fmt: skip
        last = state.last_attempt(state.attempts(out, sid), it["key"]) or {}
        self.faults[sid] += 1
        slot.faults_in_row.append(sid)
        if len(set(slot.faults_in_row)) >= RETIRE_AFTER and not slot.retired:
            slot.retired = True
            self.prog.event(
                f"slot {name} retired: infrastructure faults in a row on {RETIRE_AFTER} different submissions"
            )
        if self.faults[sid] <= self.retries and any(not s.retired for s in self.slots):
            self.queue.append((it, avoid | {name}))
            self.prog.event(f"{sid}: infrastructure fault on {name} ({last.get('why', '')}); retry {self.faults[sid]}")
        else:
            self.final[sid] = Outcome.INFRA
            self.prog.c.failed += 1
            self.prog.event(f"{sid}: not graded: infrastructure ({last.get('why', '')})")

    def give_up_without_slots(self) -> None:
        """Every slot retired and nothing running: what is queued is not graded (an infrastructure fault each)."""
        if self.queue and all(s.retired for s in self.slots) and not self.running:
            for it, _ in self.queue:
                state.append_attempt(
                    self.out, it["sid"], {"key": it["key"], "engine": "local", "outcome": str(Outcome.INFRA),
                                          "why": "no working slot left"},
                )  # fmt: skip
                self.final[it["sid"]] = Outcome.INFRA
                self.prog.c.failed += 1
            self.queue.clear()

    def stop_running(self) -> None:
        """Ctrl-C: each running task is sent SIGTERM (it records "killed" and stops its grade), then SIGKILL after
        15 s."""
        for p, _ in self.calibrating.values():
            try:
                os.killpg(p.pid, signal.SIGKILL)  # nothing of a calibration is kept but a whole record
            except OSError:
                pass
        for p, *_ in self.running.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)  # the task records "killed" and stops its grade
            except OSError:
                pass
        for p, *_ in self.running.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


# --- slurm -------------------------------------------------------------------------------------------------------


def array_spec(indices: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    out: list[str] = []
    xs = sorted(set(indices))
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def slurm_dir(out: Path) -> Path:
    return state.batch_dir(out) / "slurm"


def _minutes(seconds: float) -> int:
    return max(1, math.ceil(seconds / 60))


def _launcher(s: dict[str, Any], out: Path, gpu: bool) -> list[str]:
    """The command prefix that starts the grader: the course image (pyxis or Apptainer), or this host's Python."""
    image = s.get("image")
    if not image:
        return [sys.executable]
    mounts = sorted({str(out), *s.get("mounts", [])})
    if s.get("runtime") == "apptainer":
        return ["apptainer", "exec", *(["--nv"] if gpu else []), "--bind", ",".join(mounts),
                "--pwd", s["workdir"], image, "python"]  # fmt: skip
    binds = ",".join(f"{m}:{m}" for m in mounts)
    return ["srun", "--ntasks=1", f"--container-image={image}", f"--container-mounts={binds}",
            f"--container-workdir={s['workdir']}", "python"]  # fmt: skip


def write_scripts(out: Path, manifest: dict[str, Any]) -> tuple[Path, Path]:
    """task.sbatch (one array task = one submission, --index $SLURM_ARRAY_TASK_ID) and collect.sbatch."""
    s = manifest["slurm"]
    d = slurm_dir(out)
    (d / "logs").mkdir(parents=True, exist_ok=True)
    gpu = s.get("gres") not in (None, "", "none")
    common = [f"#SBATCH --{k}={s[k]}" for k in ("partition", "account", "qos") if s.get(k)]
    common += [f"#SBATCH {a}" for a in s.get("sbatch_args", [])]
    cd = [] if s.get("image") else [f"cd {shlex.quote(str(ROOT))}"]
    task_lines = [
        "#!/bin/bash",
        "# One submission of the batch per array task (grader/batch/engines.py); written by `python -m grader batch`.",
        f"#SBATCH --job-name={s['job_name']}",
        f"#SBATCH --output={d / 'logs' / 'task-%A_%a.out'}",
        *([f"#SBATCH --gres={s['gres']}"] if gpu else []),
        f"#SBATCH --cpus-per-task={s['cpus']}",
        f"#SBATCH --mem={s['mem']}",
        f"#SBATCH --time={s['time_min']}",
        "#SBATCH --requeue",
        *common,
        *cd,
        "exec "
        + shlex.join(_launcher(s, out, gpu) + ["-m", "grader.batch", "task", str(out)])
        + ' --index "$SLURM_ARRAY_TASK_ID" --engine slurm',
    ]
    collect_lines = [
        "#!/bin/bash",
        "# After the array (afterany): the TA report, and the retries of infrastructure faults.",
        f"#SBATCH --job-name={s['job_name']}-collect",
        f"#SBATCH --output={d / 'logs' / 'collect-%j.out'}",
        "#SBATCH --cpus-per-task=1",
        "#SBATCH --mem=4G",
        "#SBATCH --time=30",
        *common,
        *cd,
        "exec " + shlex.join(_launcher(s, out, False) + ["-m", "grader.batch", "collect", str(out)]),
    ]
    task, coll = d / "task.sbatch", d / "collect.sbatch"
    write_text_atomic(task, "\n".join(task_lines) + "\n")
    write_text_atomic(coll, "\n".join(collect_lines) + "\n")
    return task, coll


def _sbatch(args: list[str]) -> str:
    exe = shutil.which("sbatch")
    if exe is None:
        raise EngineError("sbatch not found: --engine slurm runs on a Slurm login node (or use --engine local)")
    r = subprocess.run([exe, "--parsable", *args], capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0:
        raise EngineError(f"sbatch {' '.join(args)}: {' '.join((r.stderr or r.stdout).split())[:300]}")
    return r.stdout.strip().split(";")[0]


def sbatch_lines(
    out: Path, manifest: dict[str, Any], indices: list[int], exclude: Sequence[str] = ()
) -> list[list[str]]:
    """The two sbatch calls of a submission (array, then collect; JOBID stands for the array's id)."""
    task, coll = slurm_dir(out) / "task.sbatch", slurm_dir(out) / "collect.sbatch"
    k = int(manifest["slurm"].get("max_parallel") or 0)
    arr = f"--array={array_spec(indices)}" + (f"%{k}" if k else "")
    ex = [f"--exclude={','.join(exclude)}"] if exclude else []
    return [[arr, *ex, str(task)], ["--dependency=afterany:JOBID", "--kill-on-invalid-dep=no", str(coll)]]


def submit(
    out: Path, manifest: dict[str, Any], indices: list[int], exclude: Sequence[str] = (), why: str = ""
) -> tuple[str, str]:
    """Submit the array for `indices` and its collect job; recorded in OUT/.batch/slurm/jobs.json."""
    first, second = sbatch_lines(out, manifest, indices, exclude)
    array = _sbatch(first)
    coll = _sbatch([a.replace("JOBID", array) for a in second])
    jobs = read_jobs(out)
    jobs.append({"array": array, "collect": coll, "indices": sorted(indices), "at": time.time(), "why": why})
    write_json_atomic(slurm_dir(out) / "jobs.json", {"jobs": jobs})
    return array, coll


def read_jobs(out: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads((slurm_dir(out) / "jobs.json").read_text())["jobs"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


TASK_RE = re.compile(r"^(\d+)_(\d+)$")


def live_indices(out: Path) -> set[int] | None:
    """The indices whose array task Slurm still has (pending, running, completing); None when squeue cannot be
    asked (then running markers are believed)."""
    exe = shutil.which("squeue")
    jobs = read_jobs(out)
    if exe is None:
        return None
    ours = {j["array"] for j in jobs}
    try:
        r = subprocess.run(
            [exe, "-h", "-r", "-u", getpass.getuser(), "-o", "%i %T"], capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    live: set[int] = set()
    for ln in r.stdout.splitlines():
        parts = ln.split()
        m = TASK_RE.match(parts[0]) if parts else None
        if m and m.group(1) in ours:
            live.add(int(m.group(2)))
    return live


def other_nodes(exclude: set[str]) -> bool:
    """Whether the cluster has nodes besides `exclude` (so a retry can avoid the node that failed)."""
    exe = shutil.which("sinfo")
    if exe is None:
        return False
    try:
        r = subprocess.run([exe, "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    nodes = {ln.strip() for ln in r.stdout.splitlines() if ln.strip()}
    return bool(nodes - exclude)


def resubmit_command(out: Path, indices: list[int]) -> str:
    """The exact command that resubmits only these tasks (and a collect job after them)."""
    cmd = [sys.executable, "-m", "grader", "batch", "resubmit", str(out), "--indices", array_spec(indices)]
    return f"cd {shlex.quote(str(ROOT))} && {shlex.join(cmd)}"
