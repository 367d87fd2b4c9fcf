"""The grade as data: what every stage produces and the report stage consumes. No logic lives here.

A test result says what it is (`Kind`), why it lost points (`Reason`) and what it found (`Finding`s with a
`Code`): ordering, advice, forfeits, flags and the reports read these fields, never a test's name or output text,
which are for people. results.json carries them in each test's extra_data ("kind", "reason", "findings")."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


class Kind(StrEnum):
    """What a result is. The value is also the last part of the result's name ("triton / kernel check")."""

    STATIC = "static warnings"
    BUILD = "build"
    COMPILER_REPORT = "compiler report"
    CPU_BUILD = "CPU build"  # the CUDA part built for the CPU layer (grader/cuda/cudacpu.py)
    SANITIZER = "compute-sanitizer"  # on a GPU: a correctness pass under compute-sanitizer (grader/cuda/sanitizer.py)
    CORRECTNESS = "correctness"
    KERNEL_CHECK = "kernel check"
    COMPILE_CHECK = "GPU compile check"
    PERFORMANCE = "performance"


class Reason(StrEnum):
    """Why a result lost its points (OK when it did not)."""

    OK = "ok"
    MISSING = "missing file"  # the submission has no such file
    NOT_IMPLEMENTED = "not implemented"  # still the stub
    LOAD_FAILED = "does not load"  # import or library load failed, or the function is missing
    BUILD_FAILED = "build failed"
    NEEDS_GPU = "needs a GPU"  # skipped: cannot be earned on this machine
    NEEDS_TRITON = "needs Triton"  # skipped: no Triton on this platform
    RAISED = "raised"  # the call raised an exception
    CRASHED = "crashed"  # the worker process died (segfault, illegal address, exit)
    TIMEOUT = "timed out"
    PROTOCOL = "protocol violation"  # the worker's reply broke the wire's format or bounds
    NOT_RUN = "not run"  # an earlier failure or the stage's time limit stopped it
    WRONG_TENSOR = "wrong output tensor"  # type, shape, dtype, device or layout
    NOT_PLAIN = "not a plain tensor"  # subclass, torch function / dispatch mode, autograd
    WRONG_VALUES = "wrong values"
    UNWRITTEN = "unwritten outputs"  # the poison (all-ones NaN) left where a finite value was expected
    NAN_COMPUTED = "NaN computed"  # a NaN the kernel computed where a finite value was expected (an overflow?)
    INPUT_MODIFIED = "input modified"
    NOT_DETERMINISTIC = "not deterministic"
    # the CUDA-on-CPU layer's sanitizers and launch orders (grader/cuda/cudacpu.py)
    OUT_OF_BOUNDS = "out of bounds"  # AddressSanitizer: an access outside x or y
    MISALIGNED = "misaligned access"  # UBSan: a load or store at an address its type's alignment forbids
    UNDEFINED = "undefined behaviour"  # UBSan: another kind (integer overflow, a bad shift, ...)
    RACE = "race"  # two launch orders of the grid gave different outputs
    FORFEIT = "forfeit"  # the kernel check found the work done outside the part's own kernel
    VIOLATION = "violation"  # the kernel check's own row
    COMPILE_FAILED = "does not compile for a GPU"
    NOT_TIMED = "not timed"
    SLOW = "slower than full credit"  # partial or no speed credit, with nothing flagged
    FLAGGED = "flagged"  # a performance finding lowered or voided the credit


class Code(StrEnum):
    """What a finding is."""

    # kernel check (grader/correctness/kernelcheck.py): violations forfeit the part; warnings cost nothing
    TORCH_COMPUTE = "torch-compute"
    HOST_TRANSFER = "host-transfer"
    HOST_MEMORY = "host-memory"
    NO_OWN_KERNEL = "no-own-kernel"
    FOREIGN_KERNEL = "foreign-kernel"
    NO_JIT_KERNEL = "no-jit-kernel"
    JIT_NOT_LAUNCHED = "jit-not-launched"
    CHECK_FAILED_CLOSED = "check-failed-closed"  # the profiled call raised, hung, crashed or answered malformed
    EXTRA_COPY = "extra-copy"
    TORCH_MEMORY_KERNEL = "torch-memory-kernel"
    # performance (grader/performance/)
    TIMED_WRONG = "timed-outputs-wrong"
    WALL_EXCESS = "wall-clock-excess"
    HIDDEN_WORK = "hidden-work"
    BELOW_FLOOR = "below-floor"
    # static checks (grader/correctness/static.py)
    STATIC = "static"
    # failure patterns of a correctness case (grader/correctness/patterns.py): what the wrong elements' positions and
    # values say
    HINT_OVERFLOW = "hint-overflow"  # NaN/inf only where an input operand is large (exp overflow)
    HINT_ROW_STRIDE = "hint-row-stride"  # row 0 right, later rows wrong
    HINT_TAIL = "hint-tail"  # wrong only at the end of the flat output
    HINT_ROW_TAIL = "hint-row-tail"  # wrong only in the last columns of rows
    HINT_LOW_PRECISION = "hint-low-precision"  # wrong in a 16-bit dtype while the float32 case of that input passes
    HINT_FORMULA = "hint-formula"  # the values equal an input operand or a known wrong formula (reference.mistakes)


VIOLATION, FLAG, WARNING = "violation", "flag", "warning"
HINT = "hint"  # explains a lost point (a failure pattern); costs nothing of its own


@dataclass(frozen=True)
class Finding:
    code: Code
    text: str
    severity: str = WARNING  # VIOLATION (forfeits the part) | FLAG (a performance finding) | WARNING | HINT

    def to_json(self) -> dict[str, str]:
        return {"code": str(self.code), "severity": self.severity, "text": self.text}


@dataclass
class TestResult:
    name: str  # "triton / correctness / odd_h_1001/float16"
    part: str  # implementation name: "triton" | "cuda"
    stage: str  # "build" | "correctness" | "performance" | "checks"
    score: float
    max_score: float
    state: str  # PASSED | FAILED | SKIPPED (skipped = could not be earned on this machine)
    output: str
    extra: dict[str, Any] = field(default_factory=dict)
    kind: Kind = Kind.CORRECTNESS
    reason: Reason = Reason.OK
    findings: list[Finding] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        """Skipped with points at stake: not earnable on this machine (a GPU-only test on a CPU), so not lost."""
        return self.state == SKIPPED and self.max_score > 0

    def gradescope(self) -> dict[str, Any]:
        """This result as one of Gradescope's tests. Gradescope knows only the statuses passed and failed and adds
        every test's max_score into what the student sees, so a test that could not run here (skipped: a GPU-only
        test graded on a CPU) is written as passed with score and max_score 0 and an output that starts with
        "pending:" (nothing red, and the total shown is what this machine could grade); its points, state and
        reason stay in extra_data (pending_max_score, state "skipped", reason) for the staff's reports
        (grader/report/records.py reads pending_max_score back as the test's max)."""
        pending = self.pending
        if pending:
            later = "graded on a GPU later" if self.reason == Reason.NEEDS_GPU else "not gradable on this machine"
            if (
                self.reason == Reason.NOT_RUN
            ):  # grade --watch stopped at the first failing case (grader/correctness/stage.py)
                later = "not run this time: --watch stopped at the first failing case"
            pts = f"{self.max_score:g} point{'' if self.max_score == 1 else 's'}"
            output = f"pending: {pts}, {later} (not counted here)\n{self.output}".rstrip("\n")
        else:
            output = self.output
        return {
            "name": self.name,
            "score": 0.0 if pending else round(self.score, 4),
            "max_score": 0.0 if pending else self.max_score,
            # Gradescope knows only passed/failed: a skipped test did not fail (its state and reason are in
            # extra_data and tags).
            "status": FAILED if self.state == FAILED else PASSED,
            "output": output,
            "tags": [self.part, self.stage] + ([SKIPPED] if self.state == SKIPPED else []),
            "visibility": "visible",
            "extra_data": {
                "state": self.state,
                **self.extra,
                **({"pending_max_score": self.max_score} if pending else {}),
                "kind": str(self.kind),
                "reason": str(self.reason),
                "findings": [f.to_json() for f in self.findings],
            },
        }


@dataclass
class Grade:
    problem: str
    submission: str
    device: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one-line facts for the summary (skips, flags)
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per phase: build, correctness, ...
    perf: dict[str, Any] = field(default_factory=dict)  # per perf case: baselines, thresholds, times
    # Official: decided by the trusted side (key file present, student code unable to reach it). Only an official
    # grade is signed (report.write_results); any other is advisory, and official_why says why.
    official: bool = False
    official_why: list[str] = field(default_factory=list)  # reasons it is not official
    # --case patterns when only some cases were run (grader/pipeline.py select_cases): a partial grade, never official
    partial: list[str] = field(default_factory=list)
    # Whose grade this is (grader/signing.py new_identity: student id, graded files' hash, problem, spec, grader
    # version, time, nonce), written into extra_data.identity and so signed with the rest. None: not recorded.
    identity: dict[str, Any] | None = None

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    @property
    def unearnable(self) -> float:
        return sum(t.max_score for t in self.tests if t.state == SKIPPED)

    def to_json(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 4),
            "max_score": self.max_score,
            "execution_time": round(sum(self.phases.values()), 2),
            "output": "\n".join(self.notes),
            "visibility": "visible",
            "tests": [t.gradescope() for t in self.tests],
            "extra_data": {
                "problem": self.problem,
                "submission": self.submission,
                "device": self.device,
                "points_not_earnable_here": self.unearnable,
                "phases_s": {k: round(v, 2) for k, v in self.phases.items()},
                "performance": self.perf,
                "official": bool(self.official),
                "not_official_because": [] if self.official else list(self.official_why),
                "partial_cases": list(self.partial),
                **({"identity": dict(self.identity)} if self.identity is not None else {}),
            },
        }
