"""The grade as data: what every stage produces and the report stage consumes. No logic lives here.

A test result says what it is (`Kind`), why it lost points (`Reason`) and what it found (`Finding`s with a
`Code`): ordering, advice, forfeits, flags and the reports read these fields, never a test's name or output text,
which are for people. results.json carries them in each test's extra_data ("kind", "reason", "findings").

The same model is what every report reads: `Grade.from_json` reads a results.json (the file's dict) back into a
Grade once, tolerant of files written by earlier versions (missing fields defaulted, unknown values read as UNKNOWN
or dropped, unknown keys ignored), and the reports (grader/report/) render from that Grade. `Grade.to_json` writes
exactly the results.json the grader always wrote; a grade read back writes the same again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from grader.perfsummary import PerfCase as PerfCase
from grader.perfsummary import PerfSummary as PerfSummary
from grader.perfsummary import Thresholds as Thresholds
from grader.perfsummary import TimingJSON as TimingJSON
from grader.perfsummary import TimingView as TimingView
from grader.resultvalues import float_or_none as _float_or_none
from grader.resultvalues import member as member
from grader.resultvalues import number as number
from grader.resultvalues import obj as _obj


class State(StrEnum):
    """A result's state (extra_data.state). Gradescope's status is passed or failed only (TestResult.gradescope)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # could not be earned on this machine (a GPU-only test on a CPU), or not run


class Stage(StrEnum):
    """Which stage a result belongs to (its second tag). Points are carried by CORRECTNESS and PERFORMANCE."""

    BUILD = "build"
    CORRECTNESS = "correctness"
    PERFORMANCE = "performance"
    CHECKS = "checks"  # static warnings, compiler report, CPU build, kernel check, GPU compile check, sanitizer


class Severity(StrEnum):
    """What a finding costs."""

    VIOLATION = "violation"  # forfeits the part (the kernel check)
    FLAG = "flag"  # a performance finding: lowers or voids the speed credit
    WARNING = "warning"  # costs nothing
    HINT = "hint"  # explains a lost point (a failure pattern); costs nothing of its own


# The names the other stages use: the enum members themselves (a StrEnum member is equal to its string).
PASSED, FAILED, SKIPPED = State.PASSED, State.FAILED, State.SKIPPED


class Kind(StrEnum):
    """What a result is. The value is also the last part of the result's name ("triton / kernel check")."""

    STATIC = "static warnings"
    BUILD = "build"
    COMPILER_REPORT = "compiler report"
    CPU_BUILD = "CPU build"  # the CUDA part built for the CPU layer (grader/cuda/cudacpu.py)
    # on a GPU: a correctness pass under compute-sanitizer (grader/correctness/sanitizer.py)
    SANITIZER = "compute-sanitizer"
    CORRECTNESS = "correctness"
    KERNEL_CHECK = "kernel check"
    COMPILE_CHECK = "GPU compile check"
    PERFORMANCE = "performance"
    UNKNOWN = "unknown"  # read from a results.json that did not say (written before results were typed)


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
    UNKNOWN = "unknown"  # read from a results.json that did not say (written before results were typed)


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
    HINT_HALF_INTERMEDIATE = "hint-half-intermediate"  # a float32 case's wrong outputs are exact 16-bit values
    HINT_FORMULA = "hint-formula"  # the values equal an input operand or a known wrong formula (reference.mistakes)


VIOLATION, FLAG, WARNING, HINT = Severity.VIOLATION, Severity.FLAG, Severity.WARNING, Severity.HINT

FINDING_TEXT_MAX = 2000  # characters of a finding's text read back from a file


@dataclass(frozen=True)
class Finding:
    code: Code
    text: str
    severity: Severity = Severity.WARNING

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))

    def to_json(self) -> dict[str, str]:
        return {"code": str(self.code), "severity": str(self.severity), "text": self.text}

    @classmethod
    def list_from_json(cls, raw: Any) -> list[Finding]:
        """A test's extra_data.findings; one with an unknown code or severity is dropped (a newer or edited file)."""
        out = []
        for d in raw if isinstance(raw, list) else []:
            if not isinstance(d, dict):
                continue
            code, sev = member(Code, d.get("code")), member(Severity, d.get("severity"))
            if code is not None and sev is not None:
                out.append(cls(code, str(d.get("text", ""))[:FINDING_TEXT_MAX], sev))
        return out


# extra_data keys TestResult.gradescope writes from its own fields (everything else in extra_data is `extra`)
_TEST_OWN_KEYS = frozenset({"state", "pending_max_score", "kind", "reason", "findings"})


@dataclass(init=False)
class TestResult:
    name: str  # "triton / correctness / odd_h_1001/float16"
    part: str  # implementation name: "triton" | "cuda"
    stage: Stage
    score: float
    max_score: float
    state: State  # skipped = could not be earned on this machine
    output: str
    extra: dict[str, Any]
    kind: Kind
    reason: Reason
    findings: list[Finding]

    def __init__(
        self,
        name: str,
        part: str,
        stage: Stage | str,
        score: float,
        max_score: float,
        state: State | str,
        output: str,
        extra: dict[str, Any] | None = None,
        kind: Kind = Kind.CORRECTNESS,
        reason: Reason = Reason.OK,
        findings: list[Finding] | None = None,
    ) -> None:
        """A stage or state may be given as its string ("checks", "passed"): the member it names is stored."""
        self.name, self.part, self.stage = name, part, Stage(stage)
        self.score, self.max_score, self.state, self.output = score, max_score, State(state), output
        self.extra = {} if extra is None else extra
        self.kind, self.reason, self.findings = kind, reason, [] if findings is None else findings

    @property
    def pending(self) -> bool:
        """Skipped with points at stake: not earnable on this machine (a GPU-only test on a CPU), so not lost."""
        return self.state == SKIPPED and self.max_score > 0

    @property
    def case(self) -> str:
        """The case a result is about (extra_data.case), else the last part of its name."""
        c = self.extra.get("case")
        return str(c) if c else self.name.split(" / ")[-1]

    @property
    def lost(self) -> float:
        return max(0.0, self.max_score - self.score)

    def pending_line(self) -> str:
        """The line a pending result's output starts with in results.json (what Gradescope shows)."""
        later = "graded on a GPU later" if self.reason == Reason.NEEDS_GPU else "not gradable on this machine"
        pts = f"{self.max_score:g} point{'' if self.max_score == 1 else 's'}"
        if self.reason == Reason.NOT_RUN:
            # grade --watch stopped at the first failing case (correctness/partrun.py): nothing grades these later, so
            # they are not "pending"; the next full grade runs them
            return f"not run: {pts}, --watch stopped at the first failing case (not counted here)"
        return f"pending: {pts}, {later} (not counted here)"

    @classmethod
    def from_json(cls, t: Mapping[str, Any]) -> TestResult:
        """One test of a results.json (as gradescope() writes it, or as an older grader did): part and stage from
        the tags (else the name), state from extra_data (else the tags and status), a pending test's points from
        pending_max_score. The output is kept as written, a pending test's "pending:" line included (gradescope()
        does not add it twice). Unknown kinds and reasons read as UNKNOWN, unknown states as failed, unknown stages
        as checks; unknown findings are dropped."""
        name = str(t.get("name", "?"))
        bits = [b.strip() for b in name.split(" / ")]
        tags = [str(x) for x in t.get("tags") or []] if isinstance(t.get("tags"), list) else []
        ex = _obj(t.get("extra_data"))
        stage = tags[1] if len(tags) > 1 else (bits[1] if len(bits) > 1 else "")
        state = ex.get("state") or (SKIPPED if SKIPPED in tags else t.get("status", FAILED))
        return cls(
            name,
            tags[0] if tags else bits[0],
            member(Stage, stage) or Stage.CHECKS,
            number(t.get("score")),
            # a pending test (skipped here, e.g. GPU-only on a CPU) is max_score 0 for Gradescope; its points are in
            # extra_data
            number(ex.get("pending_max_score"), number(t.get("max_score"))),
            member(State, state) or State.FAILED,
            str(t.get("output") or ""),
            {k: v for k, v in ex.items() if k not in _TEST_OWN_KEYS},
            member(Kind, ex.get("kind")) or Kind.UNKNOWN,
            member(Reason, ex.get("reason")) or Reason.UNKNOWN,
            Finding.list_from_json(ex.get("findings")),
        )

    def gradescope(self) -> dict[str, Any]:
        """This result as one of Gradescope's tests. Gradescope knows only the statuses passed and failed and adds
        every test's max_score into what the student sees, so a test that could not run here (skipped: a GPU-only
        test graded on a CPU) is written as passed with score and max_score 0 and an output that starts with
        "pending:" (nothing red, and the total shown is what this machine could grade); its points, state and
        reason stay in extra_data (pending_max_score, state "skipped", reason) for the staff's reports
        (TestResult.from_json reads pending_max_score back as the test's max)."""
        pending = self.pending
        output = self.output
        line = self.pending_line() if pending else ""
        if pending and output != line and not output.startswith(line + "\n"):  # a result read back has it already
            output = f"{line}\n{self.output}".rstrip("\n")
        return {
            "name": self.name,
            "score": 0.0 if pending else round(self.score, 4),
            "max_score": 0.0 if pending else self.max_score,
            # Gradescope knows only passed/failed: a skipped test did not fail (its state and reason are in
            # extra_data and tags).
            "status": str(FAILED if self.state == FAILED else PASSED),
            "output": output,
            "tags": [self.part, str(self.stage)] + ([str(SKIPPED)] if self.state == SKIPPED else []),
            "visibility": "visible",
            "extra_data": {
                "state": str(self.state),
                **self.extra,
                **({"pending_max_score": self.max_score} if pending else {}),
                "kind": str(self.kind),
                "reason": str(self.reason),
                "findings": [f.to_json() for f in self.findings],
            },
        }


@dataclass(frozen=True)
class Forfeit:
    """A part that earns nothing, however right or fast: its kernel check found the work done outside the part's
    own kernel (or could not profile a call it had answered right: it fails closed). The one record of a forfeit:
    Grade.forfeits derives it from the kernel check's row (reason VIOLATION, whose extra_data "forfeit" says the
    same for older readers); charge() is what it costs the part's other rows, and note is the grade's note."""

    part: str
    check: str  # the kernel check's row: "cuda / kernel check"
    violations: tuple[Finding, ...] = ()

    @property
    def note(self) -> str:
        return f"{self.part}: all points forfeit, see '{self.check}'"

    def charge(self, tests: Iterable[TestResult]) -> None:
        """Every row of the part that earned points earns none: failed, Reason.FORFEIT, its output says why."""
        for t in tests:
            if t.part == self.part and t.score:
                t.score = 0.0
                t.state = FAILED
                t.reason = Reason.FORFEIT
                t.output = f"forfeit: the '{self.check}' found the work done outside your own kernel\n" + t.output


def _forfeits_by(t: TestResult) -> bool:
    """Whether a row is a kernel check that forfeits its part (a file from before results were typed says it only in
    extra_data.forfeit)."""
    return (t.kind == Kind.KERNEL_CHECK and t.reason == Reason.VIOLATION) or t.extra.get("forfeit") is True


@dataclass(frozen=True)
class Stated:
    """What a results.json says of itself where the file, not its tests, is the word: its top-level score and
    max_score (the grader writes the tests' sums; an edited file may not), and whether it says official or advisory
    at all (a file from before grades did, does not). Set by Grade.from_json; None for a grade the pipeline made."""

    score: float | None = None
    max_score: float | None = None
    says_official: bool = True
    unearnable: float | None = None  # extra_data.points_not_earnable_here


# extra_data keys Grade.to_json writes from its own fields (anything else read from a file is Grade.extra)
_GRADE_OWN_KEYS = frozenset(
    {
        "problem",
        "submission",
        "device",
        "points_not_earnable_here",
        "phases_s",
        "performance",
        "official",
        "not_official_because",
        "partial_cases",
        "identity",
        "containment",
    }
)


def _strings(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


@dataclass
class Grade:
    problem: str
    submission: str
    device: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one-line facts for the summary (skips, flags)
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per phase: build, correctness, ...
    perf: PerfSummary = field(default_factory=PerfSummary)  # per perf case: baselines, thresholds, times
    # Official: decided by the trusted side (key file present, student code unable to reach it). Only an official
    # grade is signed (report.write_results); any other is advisory, and official_why says why.
    official: bool = False
    official_why: list[str] = field(default_factory=list)  # reasons it is not official
    # --case patterns when only some cases were run (grader/pipeline.py select_cases): a partial grade, never official
    partial: list[str] = field(default_factory=list)
    # Whose grade this is (grader/signing.py new_identity: student id, graded files' hash, problem, spec, grader
    # version, time, nonce), written into extra_data.identity and so signed with the rest. None: not recorded.
    identity: dict[str, Any] | None = None
    # What held the grade's untrusted processes (grader/box.py): "box", "container" or "none"; "" where not recorded
    # (an older grader's file). Signed with the rest.
    containment: str = ""
    # Read back from a file only (Grade.from_json): the extra_data keys no field holds (graded_on, signature, an old
    # file's student_id), and what the file says of itself.
    extra: dict[str, Any] = field(default_factory=dict)
    stated: Stated | None = None

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    @property
    def unearnable(self) -> float:
        """The points this machine could not grade (a GPU-only case on a CPU). Cases that `grade --watch` did not
        run (Reason.NOT_RUN) are not among them: this machine can grade them, and the next full grade does."""
        return sum(t.max_score for t in self.tests if t.state == SKIPPED and t.reason != Reason.NOT_RUN)

    @property
    def not_run(self) -> float:
        """The points of the cases `grade --watch` did not run after the first failing one."""
        return sum(t.max_score for t in self.tests if t.state == SKIPPED and t.reason == Reason.NOT_RUN)

    @property
    def forfeits(self) -> dict[str, Forfeit]:
        """part -> its forfeit, for each part whose kernel check found a violation, in the grade's order."""
        out: dict[str, Forfeit] = {}
        for t in self.tests:
            if t.part not in out and _forfeits_by(t):
                out[t.part] = Forfeit(t.part, t.name, tuple(f for f in t.findings if f.severity == VIOLATION))
        return out

    @property
    def parts(self) -> list[str]:
        """The implementations' names in the order the grade first mentions them."""
        return list(dict.fromkeys(t.part for t in self.tests))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Grade:
        """A Grade from a results.json's dict (Grade.to_json's, a signed one, or an older grader's): missing fields
        get their defaults, unknown extra_data keys are kept in `extra`, top-level keys other than the grade's
        (leaderboard, Gradescope's formats) are not read. Never raises for a dict; the TA report validates a file
        against grader/results.schema.json first, the student report reads the grader's own."""
        ex = _obj(d.get("extra_data"))
        ident = ex.get("identity")
        output = d.get("output")
        official = ex.get("official")
        return cls(
            problem=str(ex.get("problem") or ""),
            submission=str(ex.get("submission", "?")),
            device=str(ex.get("device", "")),
            tests=[TestResult.from_json(t) for t in d.get("tests") or [] if isinstance(t, dict)],
            notes=str(output).splitlines() if isinstance(output, str) else [],
            phases={str(k): number(v) for k, v in _obj(ex.get("phases_s")).items()},
            perf=PerfSummary.from_json(ex.get("performance")),
            official=official is True,
            official_why=_strings(ex.get("not_official_because")),
            partial=_strings(ex.get("partial_cases")),
            identity=ident if isinstance(ident, dict) else None,
            containment=str(ex.get("containment") or ""),
            extra={k: v for k, v in ex.items() if k not in _GRADE_OWN_KEYS},
            stated=Stated(
                _float_or_none(d.get("score")),
                _float_or_none(d.get("max_score")),
                isinstance(official, bool),
                _float_or_none(ex.get("points_not_earnable_here")),
            ),
        )

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
                "performance": self.perf.to_json(),
                "official": bool(self.official),
                "not_official_because": [] if self.official else list(self.official_why),
                "partial_cases": list(self.partial),
                **({"identity": dict(self.identity)} if self.identity is not None else {}),
                **({"containment": self.containment} if self.containment else {}),
                **self.extra,
            },
        }
