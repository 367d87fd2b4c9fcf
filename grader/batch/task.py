"""One batch task: grade submission number INDEX of a batch, by the same code path as a single grade.

    python -m grader batch task OUT --index I [--engine local|slurm] [--slot S]

Why: docs/architecture.md, "Modules: the why", grader/batch/task.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from grader import box, keyfile, signing
from grader.batch import where
from grader.classfiles import state
from grader.classfiles.state import Outcome

TASK_OK, TASK_USAGE, TASK_INFRA, TASK_REFUSED, TASK_KILLED = 0, 2, 3, 4, 143
GRADE_COMMAND_ENV = "GRADER_BATCH_GRADE_COMMAND"  # tests: a JSON argv that stands in for `python -m grader grade`
MIN_FREE_BYTES = 2 * 2**30  # scratch: a CUDA build and Triton's caches; less is an infrastructure fault
MIN_FREE_ENV = "GRADER_BATCH_MIN_FREE_BYTES"  # another floor, for nodes whose scratch is small (or tests)
LOG_KEEP_BYTES = 256 * 1024
ROOT = Path(__file__).resolve().parent.parent.parent


class _Stop(Exception):
    pass


class _BadArgument(ValueError):
    """A grade argument that the arguments file cannot carry."""


def grade_command() -> list[str]:
    """The grade's argv prefix: `python -m grader grade`, the single-grade code path. GRADER_BATCH_GRADE_COMMAND
    (a JSON list) replaces it, for tests that inject faults; a result made so records it in graded_on."""
    raw = os.environ.get(GRADE_COMMAND_ENV)
    if raw:
        cmd = json.loads(raw)
        if not (isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd)):
            raise ValueError(f"{GRADE_COMMAND_ENV}: a JSON list of strings")
        return cmd
    return [sys.executable, "-m", "grader", "grade"]


def _gpu_visible(gpu: str | None) -> str:
    """'' when a GPU can be used here; else why not. nvidia-smi where there is one, else PyTorch."""
    if shutil.which("nvidia-smi"):
        return "" if where.query(gpu) is not None else f"no GPU visible (nvidia-smi answers nothing for {gpu or 'any'})"
    probe = (
        "import sys, torch; "
        "sys.exit(0 if torch.cuda.is_available() and torch.zeros(1, device='cuda').sum() == 0 else 1)"
    )
    try:
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "no GPU visible (the CUDA probe did not finish)"
    return "" if r.returncode == 0 else "no GPU visible (PyTorch cannot initialise CUDA)"


def _free(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0


def _tail(log: Path) -> str:
    """The last non-empty line of the grade's log, for people (the status listing); never a decision."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _log_bytes(log: Path) -> bytes:
    try:
        with open(log, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - LOG_KEEP_BYTES))
            data = f.read()
    except OSError:
        return b""
    return (b"[... earlier output cut]\n" if size > LOG_KEEP_BYTES else b"") + data


def run_task(out: Path, index: int, *, engine: str, slot: str | None, task_id: str | None = None) -> int:
    out = out.resolve()
    found = _find_item(out, index)
    if found is None:
        return TASK_USAGE
    manifest, item = found
    sid, key = item["sid"], item["key"]
    if state.is_done(out, sid, key):
        print(f"{sid}: already graded (result key {key[:12]}), nothing to do")
        return TASK_OK
    opts: dict[str, Any] = manifest["options"]
    task_id = task_id or _task_id(engine, index)
    history = state.attempts(out, sid)
    attempt = 1 + sum(1 for a in history if a.get("event") is None and a.get("key") == key)
    stop: dict[str, Any] = {"child": None, "signal": 0}
    on_term = _stopper(stop)
    old = {s: signal.signal(s, on_term) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    base = {"key": key, "engine": engine, "task_id": task_id, "slot": slot, "attempt": attempt, "host": _host()}
    t0, started_at = time.monotonic(), where.now()
    scratch = None
    state.mark_running(out, sid, {"task_id": task_id, "index": index, "engine": engine, "slot": slot})
    try:
        gpu = where.visible_gpu()
        tmp_base = os.environ.get("TMPDIR") or tempfile.gettempdir()
        why = _machine_problem(out, opts, gpu, tmp_base)
        if why:
            return _record(out, sid, base, Outcome.INFRA, why, t0, TASK_INFRA)
        # Named by index, not by student: /tmp can be listed by everyone.
        scratch = Path(tempfile.mkdtemp(prefix=f"grader-batch-{index}.", dir=tmp_base))
        (scratch / "tmp").mkdir()
        # Traversable, not listable, by the grade's unprivileged uid: its private scratch is made inside tmp/
        # (grader/identity.py), and must be reachable for student code to run as that uid. The rest of it (the
        # arguments, the log, the grade's out/) is the grader's alone (the batch's umask, 077).
        os.chmod(scratch, 0o711)
        os.chmod(scratch / "tmp", 0o711)
        res, log = scratch / "out", scratch / "grade.log"
        cmd = [*grade_command(), _args_file(scratch / "grade.args", _grade_args(opts, item, sid, res))]
        start = where.query(gpu)
        env = {**os.environ, "TMPDIR": str(scratch / "tmp")}
        # A batch's grades share their host (or container): never "one grade per container". Without a box
        # (grader/box.py) such a grade records containment "none" and is not official.
        env.pop(box.DECLARE_ENV, None)
        with open(log, "wb") as lf:
            child = subprocess.Popen(
                cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT,
                start_new_session=True,
            )  # fmt: skip
            stop["child"] = child
            try:
                rc = child.wait(timeout=float(opts.get("grade_timeout_s") or 3600))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return _record(
                    out, sid, base, Outcome.INFRA, "the grade ran past the task's time limit", t0, TASK_INFRA
                )
        if rc < 0:
            # The grade was killed by a signal. When the scheduler stops the whole task (scancel signals every
            # process of the job at once), ours may land a moment after the child died: wait for it, so that the
            # attempt reads "killed", not an infrastructure fault (an OOM kill of the grade alone stays one).
            time.sleep(1.0)
        end = where.query(gpu)
        if rc != 0:
            return _not_graded(out, sid, base, rc, log, t0)
        data = _read_results(res / state.RESULTS)
        if isinstance(data, str):
            return _record(out, sid, base, Outcome.INFRA, f"the grade wrote no results.json ({data})", t0, TASK_INFRA)
        data.setdefault("extra_data", {})["graded_on"] = where.graded_on(
            engine=engine,
            task_id=task_id,
            slot=slot,
            attempt=attempt,
            start=start,
            end=end,
            started_at=started_at,
            wall_s=time.monotonic() - t0,
            result_key=key,
            image=opts.get("image"),
            image_digest=opts.get("image_digest"),
            source={
                **item.get("meta", {}),
                **({"grade_command": grade_command()} if os.environ.get(GRADE_COMMAND_ENV) else {}),
            },
        )
        data = _resign(data, opts.get("secret_file"))
        body = json.dumps(data, indent=2).encode()
        files = _result_files(res, body, log)
        rec = {
            **base,
            "sid": sid,
            "outcome": Outcome.GRADED,
            "score": data.get("score"),
            "max_score": data.get("max_score"),
            "results_sha256": hashlib.sha256(body).hexdigest(),
            "finished_at": where.now(),
            "wall_s": round(time.monotonic() - t0, 2),
        }
        state.install(out, sid, files, rec)
        return _record(out, sid, base, Outcome.GRADED, "", t0, TASK_OK, score=data.get("score"))
    except _Stop:
        return _record(out, sid, base, Outcome.KILLED, f"stopped by signal {stop['signal']}", t0, TASK_KILLED)
    except OSError as e:  # ENOSPC while installing, an unreadable scratch: the machine's fault
        return _record(out, sid, base, Outcome.INFRA, f"{type(e).__name__}: {e}"[:300], t0, TASK_INFRA)
    except _BadArgument as e:  # a path the grade's arguments cannot carry: the TA's to fix, never retried
        return _record(out, sid, base, Outcome.REFUSED, str(e)[:300], t0, TASK_REFUSED)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        state.clear_running(out, sid)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _stopper(stop: dict[str, Any]) -> Callable[[int, FrameType | None], None]:
    """The task's SIGTERM/SIGINT/SIGHUP handler: notes the signal in stop["signal"], kills the grade running as
    stop["child"] (its whole process group) and raises _Stop."""

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop["signal"] = signum
        child = stop["child"]
        if child is not None and child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGKILL)  # its whole group: the grade and its workers
            except OSError:
                pass
        raise _Stop

    return on_term


def _find_item(out: Path, index: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The batch's manifest and its item `index`; None (and why, on stderr) when there is no such item."""
    try:
        manifest = state.read_manifest(out)
        item = next(it for it in manifest["items"] if int(it["index"]) == index)
    except StopIteration:
        print(f"batch task: no submission with index {index} in {out}", file=sys.stderr)
        return None
    except (FileNotFoundError, ValueError, OSError) as e:
        print(f"batch task: {e}", file=sys.stderr)
        return None
    return manifest, item


def _result_files(res: Path, body: bytes, log: Path) -> dict[str, Path | bytes]:
    """What a graded submission's folder gets: results.json, the grade's log, and the reports the grade wrote."""
    files: dict[str, Path | bytes] = {state.RESULTS: body, "grade.log": _log_bytes(log)}
    for name in ("report.md", "report.html"):
        if (res / name).is_file():
            files[name] = res / name
    return files


def _machine_problem(out: Path, opts: dict[str, Any], gpu: Any, tmp_base: str) -> str:
    """Why this machine cannot run the grade (too little disk for the scratch or the batch, no GPU when the batch
    needs one), or ""."""
    need = int(os.environ.get(MIN_FREE_ENV) or MIN_FREE_BYTES)
    if _free(Path(tmp_base)) < need:
        return f"out of disk: {_free(Path(tmp_base)) >> 20} MiB free in {tmp_base} (needs {need >> 20} MiB)"
    if _free(out) < 64 * 2**20:
        return f"out of disk: {_free(out) >> 20} MiB free in {out}"
    if opts.get("device") == "cuda":
        return _gpu_visible(gpu)
    return ""


def _grade_args(opts: dict[str, Any], item: dict[str, Any], sid: str, res: Path) -> list[str]:
    """The grade's command-line arguments for `item` under the batch's options."""
    args = ["--problem", opts["problem"], "--submission", item["path"], "--out", str(res)]
    args += ["--device", opts.get("device") or "auto", "--student-id", sid]  # signed: whose grade it is
    args += [] if opts.get("perf", True) else ["--no-perf"]
    for o in opts.get("only") or ():
        args += ["--only", o]
    if opts.get("secret_file"):
        # the batch asked whether its grades can be official once, before the first (grader/preflight.py)
        args += ["--secret-file", opts["secret_file"], "--allow-advisory"]
    return args


def _not_graded(out: Path, sid: str, base: dict[str, Any], rc: int, log: Path, t0: float) -> int:
    """Record a grade that exited rc != 0: refused (exit 2, installed with its log), else an infrastructure fault."""
    if rc == 2:
        rec = {**base, "outcome": Outcome.REFUSED, "why": _tail(log) or "the grader refused it (exit 2)"}
        state.install(out, sid, {"grade.log": _log_bytes(log)}, {**rec, "sid": sid, "finished_at": where.now()})
        return _record(out, sid, base, Outcome.REFUSED, rec["why"], t0, TASK_REFUSED)
    what = "grader fault (exit 3)" if rc == 3 else f"the grade died (exit {rc})" if rc > 0 else f"signal {-rc}"
    return _record(out, sid, base, Outcome.INFRA, f"{what}: {_tail(log)}"[:400], t0, TASK_INFRA)


def _args_file(path: Path, args: list[str]) -> str:
    """`@path` for argparse (grader/cli.py): `args` one a line in a new 0600 file. _BadArgument for an argument that
    holds a line break (it would read back as two) or starts with @ (argparse would read it as one more file)."""
    bad = next((a for a in args if "\n" in a or "\r" in a or a.startswith("@")), None)
    if bad is not None:
        raise _BadArgument(f"a grade argument holds a line break or starts with @ ({bad[:100]!r}): rename it")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(a + "\n" for a in args))
    return f"@{path}"


def _record(
    out: Path, sid: str, base: dict[str, Any], outcome: Outcome, why: str, t0: float, code: int, **kw: Any
) -> int:
    # ended_at_s and the GPU it held: collect.gpu_seconds counts a GPU's time once when two tasks shared it
    # (batch --per-gpu).
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    held = {"ended_at_s": round(time.time(), 2), "gpu_slot": f"{base.get('host')}:{gpu}"}
    state.append_attempt(
        out,
        sid,
        {**base, "outcome": str(outcome), "why": why, "wall_s": round(time.monotonic() - t0, 2), **held, **kw},
    )
    print(f"{sid}: {outcome}{': ' + why if why else ''}", file=sys.stderr if code else sys.stdout, flush=True)
    return code


def _read_results(p: Path) -> dict[str, Any] | str:
    """The grade's results.json as the grader wrote it (JSON, an object with a tests list), or why it is not one.
    Not the TA report's schema: a grade the schema refuses is still the grade, and the report lists it."""
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"[:200]
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list):
        return "not a grader results.json"
    return data


def _resign(data: dict[str, Any], secret_file: str | None) -> dict[str, Any]:
    """A signed results.json that verifies under the batch's key is signed again with graded_on in it; any other
    file keeps its state (unsigned stays unsigned, a bad signature stays bad)."""
    if not secret_file or not isinstance(data.get("extra_data"), dict) or not data["extra_data"].get("signature"):
        return data
    key = keyfile.load(Path(secret_file)).signing
    without = json.loads(json.dumps(data))
    without["extra_data"].pop("graded_on", None)
    if signing.verify(without, key) != signing.VALID:
        return data
    return signing.sign(data, key)


def _host() -> str:
    import socket

    return socket.gethostname()


def _task_id(engine: str, index: int) -> str:
    if engine == "slurm" and os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', index)}"
    if engine == "slurm" and os.environ.get("SLURM_JOB_ID"):
        return os.environ["SLURM_JOB_ID"]
    return f"{engine}:{index}:{os.getpid()}"
