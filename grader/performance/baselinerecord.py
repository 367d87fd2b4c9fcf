"""Baselines measured once per GPU for a batch window, and the drift check that keeps them honest.

Why: docs/performance.md, "Modules: the why", grader/performance/baselinerecord.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.problem.spec import Problem

DRIFT_BOUND = 0.015  # the control's relative change that makes the record stale (see the docstring for why 1.5%)
MAX_AGE_S = 1800.0  # a record older than this is re-calibrated whatever its control says (clocks, heat, neighbours)
MAX_BYTES = 1 << 20  # a record is a few kB; anything larger is not one
VERSION = 1
ENV = "GRADER_BASELINE_RECORD"  # the batch engine names the GPU's record file here, as it names its lock


class RecordError(ValueError):
    """A record file that cannot be used: missing, too large, malformed, or measured for something else."""


@dataclass(frozen=True)
class RecordKey:
    """What a record was measured for; a grade uses it only when every field is its own."""

    gpu_uuid: str
    problem: str
    spec_sha256: str
    grader_code: str
    torch: str
    triton: str


@dataclass
class CaseRecord:
    """One performance case's baseline medians (ms, CUDA events) and the baselines' host-clock overhead."""

    medians_ms: dict[str, float]
    overhead_ms: float


@dataclass
class BaselineRecord:
    key: RecordKey
    control: str  # the baseline every grade still times (the spec's tolerance_baseline)
    made_at: float  # time.time() of the calibration
    copy: dict[str, float]  # the copy-bandwidth measurement of the calibration (bytes_per_s, read2_write1_...)
    cases: dict[str, CaseRecord] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps({"version": VERSION, **asdict(self)}, sort_keys=True)


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise RecordError(f"{what} is not a positive number")
    return float(v)


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str) or len(v) > 200:
        raise RecordError(f"{what} is not a short string")
    return v


def parse(text: str) -> BaselineRecord:
    """A record from its JSON text, every field checked (RecordError otherwise)."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise RecordError(f"not JSON: {e}") from None
    except RecursionError:  # deeply nested arrays: json recurses once per level
        raise RecordError("not JSON: nested too deeply") from None
    if not isinstance(raw, dict) or raw.get("version") != VERSION:
        raise RecordError(f"not a version-{VERSION} baseline record")
    k = raw.get("key")
    if not isinstance(k, dict) or set(k) != set(RecordKey.__dataclass_fields__):
        raise RecordError("its key is not a record key")
    key = RecordKey(**{n: _str(k[n], f"key.{n}") for n in RecordKey.__dataclass_fields__})
    copy = raw.get("copy")
    if not isinstance(copy, dict) or not copy:
        raise RecordError("no copy-bandwidth measurement")
    cases_raw = raw.get("cases")
    if not isinstance(cases_raw, dict) or not cases_raw:
        raise RecordError("no cases")
    control = _str(raw.get("control"), "control")
    cases: dict[str, CaseRecord] = {}
    for name, c in cases_raw.items():
        if not isinstance(c, dict) or not isinstance(c.get("medians_ms"), dict) or not c["medians_ms"]:
            raise RecordError(f"case {name!r} has no medians")
        medians = {_str(b, "a baseline's name"): _num(ms, f"{name}/{b}") for b, ms in c["medians_ms"].items()}
        if control not in medians:
            raise RecordError(f"case {name!r} has no median for the control baseline {control!r}")
        cases[_str(name, "a case's name")] = CaseRecord(medians, _num(c.get("overhead_ms"), f"{name}/overhead_ms"))
    return BaselineRecord(
        key=key,
        control=control,
        made_at=_num(raw.get("made_at"), "made_at"),
        copy={_str(n, "a copy field"): _num(v, f"copy/{n}") for n, v in copy.items()},
        cases=cases,
    )


def load(path: Path, key: RecordKey, *, now: float | None = None) -> BaselineRecord:
    """The record at PATH if it is the grader's own file, fresh, and measured for KEY; RecordError (saying why)
    otherwise. Only a file of this process's uid and mode 0600 is read: the batch writes it, nobody else can."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise RecordError(f"cannot open {path.name}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
            raise RecordError(f"{path.name} is not the grader's own file of mode 0600")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise RecordError(f"{path.name} is larger than {MAX_BYTES} bytes")
    rec = parse(data.decode("utf-8", "replace"))
    if rec.key != key:
        diff = [n for n in RecordKey.__dataclass_fields__ if getattr(rec.key, n) != getattr(key, n)]
        raise RecordError(f"measured for another {', '.join(diff)}")
    age = (time.time() if now is None else now) - rec.made_at
    if age > MAX_AGE_S:
        raise RecordError(f"{age:.0f} s old (re-calibrated after {MAX_AGE_S:.0f} s)")
    return rec


def save(path: Path, rec: BaselineRecord) -> None:
    """Write REC to PATH atomically, mode 0600 (a reader never sees half a record)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(rec.as_json())
    os.replace(tmp, path)


def drift(recorded_ms: float, now_ms: float) -> float:
    """The control's relative change since the record: |now / recorded - 1|."""
    return abs(now_ms / recorded_ms - 1.0)


def usable(rec: BaselineRecord, case: str, control_now_ms: float) -> bool:
    """Whether the record's baselines stand for this grade's on CASE: the case is recorded and the control timed
    now is within DRIFT_BOUND of the recorded one."""
    c = rec.cases.get(case)
    return c is not None and drift(c.medians_ms[rec.control], control_now_ms) <= DRIFT_BOUND


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return ""
    return str(triton.__version__)


def record_key(problem: Problem, device_info: dict[str, Any]) -> RecordKey:
    """What a record measured now on this GPU is for: the GPU (its UUID, from the trusted worker's device info),
    the problem's spec bytes, the grader's code and the torch/Triton versions."""
    import torch

    from grader.signing import grader_version

    return RecordKey(
        gpu_uuid=str(device_info.get("uuid", "")),
        problem=problem.name,
        spec_sha256=hashlib.sha256(problem.path.read_bytes()).hexdigest(),
        grader_code=grader_version(),
        torch=torch.__version__,
        triton=_triton_version(),
    )


def control_baseline(problem: Problem) -> str:
    """The baseline a grade still times beside a record: the spec's tolerance baseline (it also sets the host
    clock's overhead, so it is timed anyway), else the first baseline."""
    return problem.tolerance_baseline or next(iter(problem.baselines))
