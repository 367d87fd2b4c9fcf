"""Stage 1: load a problem spec (YAML) and validate it into plain, typed dataclasses.

A problem is a folder reference/<name>/ (spec.yaml, reference.py, hints.yaml, the staff solutions) and its stubs'
folder assignment/<name>/ (spec `stubs:`); nothing in the grader names a problem. The problem's words (hints.yaml)
are validated here too, against this spec (`_hints`). Every error is a single `SpecError` line that names the file,
the key path and what was expected, so a TA who mistypes `dtpyes:` learns exactly that, not a KeyError 40 frames
deep.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grader.errors import UsageError
from grader.problem import hints

DTYPES = ("float32", "float16", "bfloat16")
DISTS = ("normal", "uniform", "saturating", "special")
KINDS = ("triton", "cuda")


class SpecError(UsageError):
    """A problem spec is malformed. str(err) is one line: file, key, what was expected."""


@dataclass(frozen=True)
class Case:
    name: str  # unique, e.g. "odd_h_1001/float16"
    shape: tuple[int, ...]
    dtype: str
    pad: int = 0  # row stride = shape[-1] + pad (elements)
    dist: str = "normal"
    seed: int = 0
    points: float = 1.0
    gpu_only: bool = False
    setups: int = 1  # performance cases: independent setups (fresh buffers, warm-up) whose timed rounds are pooled


MAX_SETUPS = 8


INPUT_COLS = ("same", "half")


@dataclass(frozen=True)
class Input:
    """One input tensor of the op. Its shape is the case's with the last dimension `cols` of the case's (same, or
    half: GLU backward's dy next to x); every input has the case's leading dimensions, dtype, dist and pad."""

    name: str
    cols: str = "same"

    def shape(self, case_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (*case_shape[:-1], case_shape[-1] // 2) if self.cols == "half" else tuple(case_shape)


@dataclass(frozen=True)
class Tolerance:
    rtol: float | None = None  # absolute-style check: |out - ref| <= atol + rtol |ref|
    atol: float = 0.0
    eager_factor: float | None = None  # eager-relative check, see grader/correctness/check.py


@dataclass(frozen=True)
class Implementation:
    name: str
    kind: str  # "triton" | "cuda"
    file: str
    entry: str
    staff: Path
    handout_section: str
    # A staff-only row (e.g. the lecture's naive CUDA kernel): graded and timed with --staff (bench), never asked of
    # a student, never in the handout.
    staff_only: bool = False


@dataclass(frozen=True)
class Curve:
    zero_at: str
    partial_baseline: str
    partial_credit: float
    full_at: tuple[str, ...]


@dataclass(frozen=True)
class Performance:
    points_per_case: float
    margin: float
    curve: Curve
    cases: tuple[Case, ...]
    anchor: Anchor | None = None


@dataclass(frozen=True)
class Anchor:
    """Published figures a bench table prints beside the measured ones (e.g. the lecture's H100 table): on `case`,
    `ms[row]` for rows named like the spec's baselines and implementations. Display only; never scored."""

    source: str
    case: str
    ms: dict[str, float]


@dataclass(frozen=True)
class Limits:
    build_s: float = 180.0
    case_s: float = 120.0  # one correctness case (two calls); a hang costs this, not the whole stage
    correctness_s: float = 600.0
    timing_s: float = 600.0


@dataclass(frozen=True)
class Problem:
    name: str
    title: str
    path: Path  # the spec file
    handout: str
    reference: Path
    out_cols: str  # "half" | "same"
    implementations: dict[str, Implementation]
    baselines: dict[str, dict[str, str]]  # name -> {"fn": ...} or {"compile": ...}
    tolerances: dict[str, Tolerance]
    cases: tuple[Case, ...]
    performance: Performance | None
    limits: Limits = field(default_factory=Limits)
    # The baseline whose own error on each input sets the fp16/bf16 tolerance (`eager_factor` tolerances); None: the
    # spec has no such tolerance. Named in the spec (`tolerance_baseline`), else "eager" when there is one.
    tolerance_baseline: str | None = None
    # Where the stubs live, relative to the repository root: the default submission directory and the handout's
    # copy of each implementation's `file:` (spec `stubs:`, default assignment/<name>).
    stubs: str = ""
    # The op's inputs, in call order (spec `inputs:`; default one, x). The output's shape is the case's with out_cols;
    # the CUDA entry's signature follows from this list (grader/child/cuda_abi.py).
    inputs: tuple[Input, ...] = (Input("x"),)

    @property
    def student_implementations(self) -> dict[str, Implementation]:
        """The parts a student submits (every implementation but the staff-only rows)."""
        return {n: i for n, i in self.implementations.items() if not i.staff_only}

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        cols = shape[-1]
        return (*shape[:-1], cols // 2) if self.out_cols == "half" else tuple(shape)

    @property
    def correctness_points(self) -> float:
        return sum(c.points for c in self.cases)

    @property
    def folder(self) -> str:
        """The problem's folder in a submission laid out like assignment/ (a course's, or assignment/ itself): its
        stubs' folder below assignment/ ('assignment/gelu' is gelu/); a problem whose stubs live elsewhere, <name>/."""
        parts = (self.stubs or f"assignment/{self.name}").split("/")
        return "/".join(parts[1:]) if parts[0] == "assignment" and len(parts) > 1 else self.name


class _V:
    """Tiny validator that carries the file and key path for error messages."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, expected: str, got: Any) -> SpecError:
        return SpecError(f"{self.path}: key '{key}': expected {expected}, got {got!r}")

    def mapping(self, obj: Any, key: str, required: set[str], optional: set[str]) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise self.fail(key or "<top>", "a mapping", obj)
        unknown = sorted(set(obj) - required - optional)
        if unknown:
            where = f"{key}.{unknown[0]}" if key else unknown[0]
            allowed = ", ".join(sorted(required | optional))
            raise SpecError(f"{self.path}: unknown key '{where}' (allowed here: {allowed})")
        missing = sorted(required - set(obj))
        if missing:
            where = f"{key}.{missing[0]}" if key else missing[0]
            raise SpecError(f"{self.path}: missing required key '{where}'")
        return obj

    def string(self, obj: Any, key: str, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(obj, str) or not obj:
            raise self.fail(key, "a non-empty string" + (f" ({'|'.join(choices)})" if choices else ""), obj)
        if choices and obj not in choices:
            raise self.fail(key, "one of " + "|".join(choices), obj)
        return obj

    def number(self, obj: Any, key: str, lo: float = 0.0, hi: float = math.inf) -> float:
        if isinstance(obj, bool) or not isinstance(obj, (int, float)) or not (lo <= obj <= hi):
            raise self.fail(key, f"a number in [{lo}, {hi}]", obj)
        return float(obj)

    def integer(self, obj: Any, key: str, lo: int = 0) -> int:
        if isinstance(obj, bool) or not isinstance(obj, int) or obj < lo:
            raise self.fail(key, f"an integer >= {lo}", obj)
        return obj

    def boolean(self, obj: Any, key: str) -> bool:
        if not isinstance(obj, bool):
            raise self.fail(key, "true or false", obj)
        return obj

    def shape(self, obj: Any, key: str, out_cols: str) -> tuple[int, ...]:
        if (
            not isinstance(obj, list)
            or not obj
            or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in obj)
        ):
            raise self.fail(key, "a non-empty list of non-negative integers", obj)
        if obj[-1] < 1 or (out_cols == "half" and obj[-1] % 2):
            raise self.fail(key, "a last dimension that is positive" + (" and even" if out_cols == "half" else ""), obj)
        return tuple(obj)


def _case(v: _V, raw: Any, key: str, dtype: str, defaults: dict[str, Any], out_cols: str) -> Case:
    shape = v.shape(raw["shape"], f"{key}.shape", out_cols)
    return Case(
        name=v.string(raw["name"], f"{key}.name"),
        shape=shape,
        dtype=dtype,
        pad=v.integer(raw.get("pad", 0), f"{key}.pad"),
        dist=v.string(raw.get("dist", "normal"), f"{key}.dist", DISTS),
        seed=v.integer(raw.get("seed", defaults["seed"]), f"{key}.seed"),
        points=v.number(raw.get("points", defaults["points"]), f"{key}.points"),
        gpu_only=v.boolean(raw.get("gpu_only", defaults.get("gpu_only", False)), f"{key}.gpu_only"),
        setups=_setups(v, raw.get("setups", 1), f"{key}.setups"),
    )


def _setups(v: _V, obj: Any, key: str) -> int:
    n = v.integer(obj, key, lo=1)
    if n > MAX_SETUPS:
        raise v.fail(key, f"an integer in [1, {MAX_SETUPS}] (each setup repeats the case's warm-up and rounds)", obj)
    return n


def _cases(v: _V, raw: Any, key: str, defaults: dict[str, Any], out_cols: str, multi: bool) -> tuple[Case, ...]:
    if not isinstance(raw, list) or not raw:
        raise v.fail(key, "a non-empty list of cases", raw)
    out: list[Case] = []
    for i, c in enumerate(raw):
        k = f"{key}[{i}]"
        opt = {"pad", "dist", "seed", "points", "gpu_only"} | (set() if multi else {"setups"})  # setups: timing only
        c = v.mapping(c, k, {"name", "shape", "dtypes" if multi else "dtype"}, opt)
        if multi:
            dts = c["dtypes"]
            if not isinstance(dts, list) or not dts:
                raise v.fail(f"{k}.dtypes", "a non-empty list of " + "|".join(DTYPES), dts)
            for j, dt in enumerate(dts):
                dt = v.string(dt, f"{k}.dtypes[{j}]", DTYPES)
                case = _case(v, c, k, dt, defaults, out_cols)
                out.append(Case(**{**case.__dict__, "name": f"{case.name}/{dt}", "seed": case.seed + 1000 * i + j}))
        else:
            out.append(_case(v, c, k, v.string(c["dtype"], f"{k}.dtype", DTYPES), defaults, out_cols))
    names = [c.name for c in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise SpecError(f"{v.path}: key '{key}': case name '{dup}' is used twice; names must be unique")
    return tuple(out)


def _anchor(
    v: _V, raw: Any, cases: tuple[Case, ...], baselines: dict[str, Any], impls: dict[str, Implementation]
) -> Anchor:
    k = "performance.anchor"
    r = v.mapping(raw, k, {"source", "case", "ms"}, set())
    case = v.string(r["case"], f"{k}.case", tuple(c.name for c in cases))
    rows = tuple(baselines) + tuple(impls)
    ms = v.mapping(r["ms"], f"{k}.ms", set(), set(rows))
    return Anchor(
        source=v.string(r["source"], f"{k}.source"),
        case=case,
        ms={n: v.number(x, f"{k}.ms.{n}", 0, 1e6) for n, x in ms.items()},
    )


def _read_yaml(path: Path, what: str) -> Any:
    """The YAML document at path; a SpecError (one line, the file and what is wrong) when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = (e.strerror or e) if isinstance(e, OSError) else e
        raise SpecError(f"{path}: cannot read {what} ({why})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None


def load_problem(path: str | Path) -> Problem:
    """Read and validate a problem spec, and the problem's words beside it (hints.yaml, `_hints`). Raises SpecError
    (one line) on any problem."""
    # Absolute: the files it names are opened by workers that run from other folders (the trusted worker from
    # its cache, an untrusted one from its scratch), where a path relative to this process's cwd means nothing.
    path = Path(path).absolute()
    v = _V(path)
    top_req = {"name", "title", "reference", "implementations", "baselines", "tolerances", "correctness"}
    optional = {"handout", "out_cols", "performance", "limits", "tolerance_baseline", "stubs", "inputs", "default"}
    raw = v.mapping(_read_yaml(path, "the spec file"), "", top_req, optional)
    here = path.parent

    ref = here / v.string(raw["reference"], "reference")
    if not ref.is_file():
        raise SpecError(f"{path}: key 'reference': file {ref.name} not found next to the spec")
    out_cols = v.string(raw.get("out_cols", "same"), "out_cols", ("half", "same"))
    impls = _implementations(v, raw["implementations"], here)
    baselines = _baselines(v, raw["baselines"])
    tols = _tolerances(v, raw["tolerances"])

    rc = v.mapping(raw["correctness"], "correctness", {"cases"}, {"points_per_case", "seed"})
    seed = v.integer(rc.get("seed", 0), "correctness.seed")
    defaults = {"seed": seed, "points": v.number(rc.get("points_per_case", 1), "correctness.points_per_case")}
    cases = _cases(v, rc["cases"], "correctness.cases", defaults, out_cols, multi=True)
    perf = None
    if "performance" in raw:
        perf = _performance(v, raw["performance"], seed, out_cols, baselines, impls)
    limits = Limits()
    if "limits" in raw:
        rl = v.mapping(raw["limits"], "limits", set(), {"build_s", "case_s", "correctness_s", "timing_s"})
        limits = Limits(**{k: v.number(x, f"limits.{k}", 1, 86400) for k, x in rl.items()})
    name = v.string(raw["name"], "name")
    problem = Problem(
        name=name,
        title=v.string(raw["title"], "title"),
        path=path,
        handout=str(raw.get("handout", "README.md")),
        reference=ref,
        out_cols=out_cols,
        implementations=impls,
        baselines=baselines,
        tolerances=tols,
        cases=cases,
        performance=perf,
        limits=limits,
        tolerance_baseline=_tolerance_baseline(v, raw, baselines, tols),
        stubs=_stubs(v, raw.get("stubs", f"assignment/{name}")),
        inputs=_inputs(v, raw.get("inputs"), cases + (perf.cases if perf else ())),
    )
    if not isinstance(raw.get("default", False), bool):
        raise SpecError(f"{path}: key 'default': true or false (true: graded when no --problem is given)")
    _hints(here / "hints.yaml", problem)
    return problem


def _implementations(v: _V, raw: Any, here: Path) -> dict[str, Implementation]:
    if not isinstance(raw, dict):
        raise v.fail("implementations", "a mapping of implementation name to its settings", raw)
    rimpl = v.mapping(raw, "implementations", set(), set(raw))
    if not rimpl:
        raise v.fail("implementations", "at least one implementation", rimpl)
    impls: dict[str, Implementation] = {}
    for name, r in rimpl.items():
        k = f"implementations.{name}"
        # A plain word: it names result rows, files and worker keys (grader/performance/workers.py keeps its spares
        # under "spare:N" and its baselines under "baselines").
        if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name)) or name == "baselines":
            raise v.fail(k, "an implementation name of letters, digits and _ (not 'baselines')", name)
        r = v.mapping(r, k, {"kind", "file", "entry", "staff"}, {"handout_section", "staff_only"})
        # staff: not checked here: the grading image ships without staff solutions (docs/SECURITY.md); only --staff
        # needs the file, and says so when it is missing.
        impls[name] = Implementation(
            name=name,
            kind=v.string(r["kind"], f"{k}.kind", KINDS),
            file=v.string(r["file"], f"{k}.file"),
            entry=v.string(r["entry"], f"{k}.entry"),
            staff=here / v.string(r["staff"], f"{k}.staff"),
            handout_section=str(r.get("handout_section", name)),
            staff_only=v.boolean(r.get("staff_only", False), f"{k}.staff_only"),
        )
    if all(i.staff_only for i in impls.values()):
        raise v.fail("implementations", "at least one implementation that is not staff_only", sorted(impls))
    return impls


def _baselines(v: _V, rb: Any) -> dict[str, dict[str, str]]:
    if not isinstance(rb, dict) or not rb:
        raise v.fail("baselines", "a mapping of baseline name to a reference function", rb)
    baselines: dict[str, dict[str, str]] = {}
    for name, r in rb.items():
        if isinstance(r, str):
            baselines[name] = {"fn": r}
        else:
            k = f"baselines.{name}"
            r = v.mapping(r, k, {"compile"}, set())
            baselines[name] = {"compile": v.string(r["compile"], f"{k}.compile")}
    return baselines


def _tolerances(v: _V, raw: Any) -> dict[str, Tolerance]:
    tols: dict[str, Tolerance] = {}
    rt = v.mapping(raw, "tolerances", set(DTYPES), set())
    for dt in DTYPES:
        k = f"tolerances.{dt}"
        r = v.mapping(rt[dt], k, {"atol"}, {"rtol", "eager_factor"})
        if ("rtol" in r) == ("eager_factor" in r):
            raise SpecError(f"{v.path}: key '{k}': give exactly one of 'rtol' or 'eager_factor'")
        tols[dt] = Tolerance(
            rtol=v.number(r["rtol"], f"{k}.rtol", 0, 1) if "rtol" in r else None,
            atol=v.number(r["atol"], f"{k}.atol", 0, 1),
            eager_factor=v.number(r["eager_factor"], f"{k}.eager_factor", 1, 100) if "eager_factor" in r else None,
        )
    return tols


def _performance(
    v: _V, raw: Any, seed: int, out_cols: str, baselines: dict[str, Any], impls: dict[str, Implementation]
) -> Performance:
    rp = v.mapping(raw, "performance", {"cases", "curve"}, {"points_per_case", "margin", "anchor"})
    rcurve = v.mapping(rp["curve"], "performance.curve", {"zero_at", "partial_at", "full_at"}, set())
    rpart = v.mapping(rcurve["partial_at"], "performance.curve.partial_at", {"baseline", "credit"}, set())
    full = rcurve["full_at"]
    full = [full] if isinstance(full, str) else full
    if not isinstance(full, list) or not full:
        raise v.fail("performance.curve.full_at", "a baseline name or a list of them", full)
    curve = Curve(
        zero_at=v.string(rcurve["zero_at"], "performance.curve.zero_at", tuple(baselines)),
        partial_baseline=v.string(rpart["baseline"], "performance.curve.partial_at.baseline", tuple(baselines)),
        partial_credit=v.number(rpart["credit"], "performance.curve.partial_at.credit", 0, 1),
        full_at=tuple(v.string(b, f"performance.curve.full_at[{i}]", tuple(baselines)) for i, b in enumerate(full)),
    )
    pdefaults = {
        "seed": seed + 7,
        "points": v.number(rp.get("points_per_case", 1), "performance.points_per_case"),
        "gpu_only": True,
    }
    perf = Performance(
        points_per_case=pdefaults["points"],
        margin=v.number(rp.get("margin", 0.0), "performance.margin", 0, 0.5),
        curve=curve,
        cases=_cases(v, rp["cases"], "performance.cases", pdefaults, out_cols, multi=False),
    )
    if "anchor" in rp:
        perf = Performance(**{**perf.__dict__, "anchor": _anchor(v, rp["anchor"], perf.cases, baselines, impls)})
    return perf


def _tolerance_baseline(
    v: _V, raw: dict[str, Any], baselines: dict[str, Any], tols: dict[str, Tolerance]
) -> str | None:
    tol_base: str | None = "eager" if "eager" in baselines else None
    if "tolerance_baseline" in raw:
        tol_base = v.string(raw["tolerance_baseline"], "tolerance_baseline")
        if tol_base not in baselines:
            raise v.fail("tolerance_baseline", f"one of the baselines ({', '.join(baselines)})", tol_base)
    if tol_base is None and any(t.eager_factor is not None for t in tols.values()):
        raise v.fail(
            "tolerance_baseline",
            "the baseline that eager_factor tolerances compare with (no 'eager' baseline to default to)",
            None,
        )
    return tol_base


# -- the problem's words: hints.yaml beside the spec ------------------------------------------------------------------


def _hints(path: Path, problem: Problem) -> None:
    """Validate the problem's hints.yaml (absent: nothing to check) against its schema (grader/problem/hints.py) and
    this spec: every key must be one the grader looks up for this problem (a real reason, finding or pattern code,
    perf key, and a distribution or dtype that a case of the spec uses), every value a non-empty text. A key no case
    or grader code can match is text no student ever sees, so a typo fails the problem's load (and its tests), not
    silently its students. Raises SpecError, one line naming the file, the key and the valid choices."""
    if not path.is_file():
        return
    raw = _read_yaml(path, "it")
    if raw is None:
        return
    top = hints.SECTIONS + hints.TOP_TEXTS
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a mapping of sections ({', '.join(top)})")
    for key, value in raw.items():
        if key in hints.TOP_TEXTS:
            _hint_text(path, str(key), value)
            continue
        if key not in hints.SECTIONS:
            raise SpecError(f"{path}: unknown key '{key}' (valid: {', '.join(top)})")
        if not isinstance(value, dict):
            raise SpecError(f"{path}: key '{key}': expected a mapping of key to text, got {type(value).__name__}")
        allowed = hints.valid_keys(
            str(key),
            dists=(c.dist for c in problem.cases),
            dtypes=(c.dtype for c in problem.cases),
            kinds=(i.kind for i in problem.implementations.values()),
        )
        for sub, words in value.items():
            _hint_key(path, str(key), sub, allowed)
            _hint_text(path, f"{key}.{sub}", words)


def _hint_key(path: Path, section: str, sub: Any, allowed: tuple[str, ...] | None) -> None:
    where = f"{section}.{sub}"
    if allowed is None:  # formula: the operands by position, or the name of one of the reference's mistakes
        if not (isinstance(sub, str) and (sub in hints.FORMULA_OPERANDS or hints.WORD.fullmatch(sub))):
            raise SpecError(
                f"{path}: key '{where}': expected one of {', '.join(hints.FORMULA_OPERANDS)} or the name of a "
                "mistake the reference's mistakes(x) returns"
            )
    elif str(sub) not in allowed:
        what = {
            "dist": "a distribution that no case of the spec uses",
            "dtype": "a dtype that no case of the spec uses",
        }.get(section, f"not a {section} key the grader reads")
        raise SpecError(f"{path}: key '{where}': {what} (valid: {', '.join(allowed)})")


def _hint_text(path: Path, where: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{path}: key '{where}': expected a non-empty text, got {value!r:.60}")


def _inputs(v: _V, raw: Any, cases: tuple[Case, ...]) -> tuple[Input, ...]:
    if raw is None:
        return (Input("x"),)
    if not isinstance(raw, list) or not raw:
        raise v.fail("inputs", "a non-empty list of {name, cols} (the op's inputs, in call order)", raw)
    out: list[Input] = []
    for i, r in enumerate(raw):
        k = f"inputs[{i}]"
        r = v.mapping(r, k, {"name"}, {"cols"})
        name = v.string(r["name"], f"{k}.name")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or any(x.name == name for x in out):
            raise v.fail(f"{k}.name", "a unique identifier", name)
        cols = v.string(r.get("cols", "same"), f"{k}.cols", INPUT_COLS)
        if i == 0 and cols != "same":
            raise v.fail(f"{k}.cols", "same (the first input's shape is the case's)", cols)
        if cols == "half":
            odd = next((c.name for c in cases if c.shape[-1] % 2), None)
            if odd:
                raise v.fail(f"{k}.cols", f"same, or half with even last dimensions (case {odd} is odd)", cols)
        out.append(Input(name, cols))
    return tuple(out)


def _stubs(v: _V, obj: Any) -> str:
    s = v.string(obj, "stubs")
    parts = s.replace("\\", "/").split("/")
    if s.startswith("/") or ":" in s or any(p in ("", ".", "..") for p in parts) or parts == ["assignment"]:
        # assignment/ itself is every problem's parent: a problem's stubs are a folder of their own below it
        raise v.fail("stubs", "a relative folder inside the repository, e.g. assignment/<problem>", obj)
    return "/".join(parts)


def sibling_folders(problem: Problem) -> set[str]:
    """The folders that the problems beside this one (every spec.yaml one folder over) take inside a submission laid
    out like assignment/ (`Problem.folder`: gelu's files in gelu/). A grade of one problem from the top of such a
    submission (grader/problem/layout.py: the files of a course that published the layout before each problem had
    its own folder) sees them, and does not call them skipped."""
    out = set()
    here = problem.path.resolve()
    for spec in sorted(here.parent.parent.glob("*/spec.yaml")):
        try:
            other = load_problem(spec)
        except SpecError:  # another problem's broken spec is that problem's error, not this grade's
            continue
        if other.path.resolve() != here:
            out.add(other.folder.split("/")[0])
    return out


def find_problem(name_or_path: str | None, root: Path) -> Path:
    """`glu` -> <root>/reference/glu/spec.yaml; an explicit path is returned as is; None -> the course's default
    problem (default_problem)."""
    if name_or_path is None:
        return default_problem(root)
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        return p
    return root / "reference" / name_or_path / "spec.yaml"


def default_problem(root: Path) -> Path:
    """The spec graded when no --problem is given: the one problem under <root>/reference/ whose spec.yaml says
    `default: true` (data, like everything else about a problem: the grader names none). Raises SpecError naming
    the fix when none or several are marked."""
    marked = []
    for spec in sorted((root / "reference").glob("*/spec.yaml")):
        try:
            raw = _read_yaml(spec, "the spec file")
        except SpecError:
            continue  # that problem's own error, reported when it is graded
        if isinstance(raw, dict) and raw.get("default") is True:
            marked.append(spec)
    if len(marked) != 1:
        found = ", ".join(p.parent.name for p in marked) or "none"
        raise SpecError(
            f"no single default problem under {root / 'reference'} (marked `default: true`: {found}): pass "
            "--problem NAME, or mark exactly one problem's spec.yaml `default: true`"
        )
    return marked[0]
