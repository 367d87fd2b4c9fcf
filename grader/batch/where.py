"""Where and how a grade was made: `extra_data.graded_on` in every results.json a batch writes.

Why: docs/architecture.md, "Modules: the why", grader/batch/where.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from datetime import UTC, datetime
from typing import Any

FIELDS = (
    ("index", "index"),
    ("name", "name"),
    ("uuid", "uuid"),
    ("driver", "driver_version"),
    ("pstate", "pstate"),
    ("sm_clock_mhz", "clocks.sm"),
    ("mem_clock_mhz", "clocks.mem"),
    ("max_sm_clock_mhz", "clocks.max.sm"),
    ("temperature_c", "temperature.gpu"),
    ("power_w", "power.draw"),
    ("throttle_reasons", "clocks_throttle_reasons.active"),
)
NUMERIC = {"sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz", "temperature_c", "power_w"}
# nvidia-smi's clocks_throttle_reasons bits that slow a kernel down for reasons of the machine, not the code
# (idle, application clocks and the software power cap under load are left out: they are normal).
SLOWDOWN_BITS = {0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake"}
TIMEOUT_S = 15


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def _parse(line: str, names: list[str]) -> dict[str, Any]:
    vals = [v.strip() for v in line.split(",")]
    d: dict[str, Any] = {}
    for name, v in zip(names, vals, strict=False):
        if name in NUMERIC:
            d[name] = _num(v)
        elif name == "throttle_reasons":
            try:
                d[name] = int(v, 16)
            except ValueError:
                d[name] = None
        elif name == "index":
            d[name] = int(v) if v.isdigit() else None
        else:
            d[name] = None if v.startswith("[") else v
    bits = d.get("throttle_reasons")
    d["throttled"] = [n for b, n in SLOWDOWN_BITS.items() if isinstance(bits, int) and bits & b]
    return d


def visible_gpu() -> str | None:
    """The GPU this task is pinned to, as nvidia-smi's -i takes it: Slurm's absolute index where Slurm set one,
    else CUDA_VISIBLE_DEVICES (an index or a UUID); None when it names none (CPU slots set it empty)."""
    for var in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"):
        v = os.environ.get(var)
        if v is not None:
            first = v.split(",")[0].strip()
            return first or None
    return None


def query(gpu: str | None) -> dict[str, Any] | None:
    """nvidia-smi's view of one GPU, or None (no nvidia-smi, no such GPU, a driver that does not answer). Where
    nvidia-smi does not know `gpu` by that name (a job whose cgroup shows it only its own GPU, renumbered), the
    only GPU it lists is the one."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    for which in [gpu, None] if gpu is not None else [None]:
        got = _ask(exe, which)
        if got is not None:
            return got
    return None


def _ask(exe: str, gpu: str | None) -> dict[str, Any] | None:
    names = [n for n, _ in FIELDS]
    for fields in (FIELDS, FIELDS[:-1]):  # an old driver without the throttle-reason field: ask without it
        cmd = [exe, f"--query-gpu={','.join(f for _, f in fields)}", "--format=csv,noheader,nounits"]
        if gpu is not None:
            cmd += ["-i", gpu]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        if r.returncode == 0 and lines:
            if gpu is None and len(lines) > 1:
                return None  # not pinned and several GPUs: which one graded is unknown
            return _parse(lines[0], names[: len(fields)])
    return None


def graded_on(
    *,
    engine: str,
    task_id: str,
    slot: str | None,
    attempt: int,
    start: dict[str, Any] | None,
    end: dict[str, Any] | None,
    started_at: str,
    wall_s: float,
    result_key: str,
    image: str | None,
    image_digest: str | None,
    source: dict[str, Any],
) -> dict[str, Any]:
    return {
        "engine": engine,
        "host": socket.gethostname(),
        "task_id": task_id,
        "slot": slot,
        "attempt": attempt,
        "image": image,
        "image_digest": image_digest,
        "result_key": result_key,
        "started_at": started_at,
        "finished_at": now(),
        "wall_s": round(wall_s, 2),
        "source": source,
        "gpu": {"start": start, "end": end} if (start or end) else None,
    }
