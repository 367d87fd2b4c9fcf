"""The problems beyond GLU (issue 20) are data: reference/<name>/ and assignment/<name>/, graded by the same grader.

For every problem: the staff Triton solution gets every correctness point on CPU (Triton interpreter; the CUDA parts
compile here and run on the GPU, tests/test_gpu.py), broken submissions of our own lose points for the reason they
are broken, and a correct submission of another design than the staff's gets full marks. The grader itself names no
problem (test_the_grader_names_no_problem). Submissions: tests/data/problems/<problem>/{broken,correct}/<name>/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import problem_names

from grader.performance import anchor
from grader.pipeline import Options, grade
from grader.problem import hints
from grader.problem.spec import SpecError, load_problem
from grader.publish import handout
from grader.results import FAILED, PASSED, SKIPPED, Kind, PerfSummary, Reason

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "problems"
# Every problem under reference/ (tests/conftest.py problem_names); GLU's CPU grades have tests of their own
# (tests/test_correctness.py), the others' are here.
PROBLEMS = tuple(n for n in problem_names() if n != "glu")


def _load(name: str):
    return load_problem(ROOT / "reference" / name / "spec.yaml")


def _grade_triton(name: str, tmp_path: Path, submission: Path | None):
    problem = _load(name)
    opts = Options(
        submission=submission if submission is not None else tmp_path / "none",
        out=tmp_path / "out",
        device="cpu",
        staff=submission is None,
        only=("triton",),
        perf=False,
    )
    g = grade(problem, opts)
    corr = [t for t in g.tests if t.kind == Kind.CORRECTNESS]
    return g, corr


def _cpu_cases(corr):
    return [t for t in corr if t.reason != Reason.NEEDS_GPU]


# -- the specs --------------------------------------------------------------------------------------------------


def test_every_problem_spec_loads_and_names_its_files(problem_name):
    name = problem_name
    p = _load(name)
    assert p.name == name
    for impl in p.student_implementations.values():
        assert (ROOT / p.stubs / impl.file).is_file(), f"{name}: stub {impl.file} not in {p.stubs}"
    for impl in p.implementations.values():
        assert impl.staff.is_file(), impl.staff
    assert (ROOT / p.handout).is_file()
    words = hints.load(name, ROOT)  # the report's words for this problem (grader/problem/hints.py)
    assert hints.text(words, "reason", "wrong values") and hints.text(words, "later_rows"), name
    # Tolerances: fp32 absolute-style, fp16/bf16 relative to the spec's own tolerance baseline.
    assert p.tolerances["float32"].rtol is not None
    assert p.tolerances["bfloat16"].eager_factor is not None and p.tolerance_baseline in p.baselines
    dists = {c.dist for c in p.cases}
    assert {"saturating", "special"} <= dists and any(c.pad for c in p.cases)
    assert any(c.shape[0] == 0 for c in p.cases) and {c.dtype for c in p.cases} == {"float32", "float16", "bfloat16"}


def test_gelu_has_the_lecture_case_and_its_table():
    p = _load("gelu")
    assert p.performance is not None
    lecture = next(c for c in p.performance.cases if c.name == "lecture_16k")
    assert lecture.shape == (16384, 16384) and lecture.dtype == "float32"
    a = p.performance.anchor
    assert a is not None and a.case == "lecture_16k"
    assert a.ms == {"manual": 8.1, "pytorch": 1.1, "naive_cuda": 1.8, "triton": 1.84, "compiled": 1.47}
    assert p.implementations["naive_cuda"].staff_only and "naive_cuda" not in p.student_implementations


def test_llm_shapes_are_graded_in_bf16():
    shapes = {(c.shape, c.dtype) for n in ("swiglu", "geglu") for c in _load(n).performance.cases}  # type: ignore[union-attr]
    assert ((8192, 28672), "bfloat16") in shapes  # Llama-3-8B's MLP (and Gemma-2-9B's)
    assert ((8192, 49152), "bfloat16") in shapes  # Gemma-7B's


def _spec_with(tmp_path: Path, old: str, new: str) -> Path:
    src = ROOT / "reference" / "gelu" / "spec.yaml"
    text = src.read_text()
    assert old in text
    d = tmp_path / "gelu"
    d.mkdir()
    (d / "reference.py").write_text((src.parent / "reference.py").read_text())
    (d / "spec.yaml").write_text(text.replace(old, new))
    return d / "spec.yaml"


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("stubs: assignment/gelu ", "stubs: ../outside ", "key 'stubs'"),
        ("case: lecture_16k", "case: lecture_32k", "performance.anchor.case"),
        ("naive_cuda: 1.8,", "naive_cudaa: 1.8,", "performance.anchor.ms.naive_cudaa"),
        ("    staff_only: true", "    staff_only: yes please", "staff_only"),
    ],
)
def test_a_bad_new_spec_key_is_one_clear_error(tmp_path, old, new, says):
    with pytest.raises(SpecError) as e:
        load_problem(_spec_with(tmp_path, old, new))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_spec_of_only_staff_rows_is_refused(tmp_path):
    spec = _spec_with(tmp_path, "    handout_section: \"Part 1: the Triton kernel\"\n",
                      "    handout_section: \"Part 1: the Triton kernel\"\n    staff_only: true\n")
    text = spec.read_text().replace("    handout_section: \"Part 2: the CUDA kernel\"\n",
                                    "    handout_section: \"Part 2: the CUDA kernel\"\n    staff_only: true\n")
    spec.write_text(text)
    with pytest.raises(SpecError, match="not staff_only"):
        load_problem(spec)


def test_the_handout_has_each_problems_stubs_and_no_staff_row():
    rels = {it.rel for it in handout.plan(ROOT)}
    for name in problem_names():
        p = _load(name)
        for impl in p.student_implementations.values():
            assert f"{p.stubs}/{impl.file}" in rels
        assert f"reference/{name}/spec.yaml" in rels and f"reference/{name}/solution_triton.py" not in rels
    assert not any(r.endswith("naive_cuda.cu") for r in rels)


def test_the_bench_prints_the_lecture_figures_beside_the_measured_ones():
    p = _load("gelu")
    perf = {
        "device": {"name": "NVIDIA H200"},
        "cases": {
            "lecture_16k": {
                "baselines": {"manual": {"effective_ms": 5.49, "pct_roofline": 9.0},
                              "pytorch": {"effective_ms": 0.508, "pct_roofline": 99.0}},
                "impls": {"triton": {"effective_ms": 0.507, "pct_roofline": 99.2},
                          "cuda": {"effective_ms": 0.505, "pct_roofline": 99.6}},
            }
        },
    }
    perf = PerfSummary.from_json(perf)
    rows = anchor.anchor_rows(p, perf)
    # The lecture's order first, then the rows it does not have; untimed rows stay, with no measurement.
    assert [r.name for r in rows] == ["manual", "pytorch", "naive_cuda", "triton", "compiled", "cuda"]
    by = {r.name: r for r in rows}
    assert by["manual"].published_ms == 8.1 and by["manual"].measured_ms == 5.49
    assert by["naive_cuda"].measured_ms is None and by["cuda"].published_ms is None
    assert anchor.anchor_rows(p, PerfSummary.from_json({"cases": {}})) == [] and anchor.anchor_rows(_load("glu"), perf) == []


# -- the grader names no problem ---------------------------------------------------------------------------------

PROBLEM_WORD = re.compile(r"(?<![a-z])(glu|gelu|swiglu|geglu|glu_backward)(?![a-z])", re.IGNORECASE)
# What the grader still says that names GLU, file -> the strings, each with why it stays. None of them decides
# anything by problem.
KNOWN_REMNANTS = {
}


def _named_strings(path: Path) -> set[str]:
    """Strings and identifiers in code (docstrings and comments left out) that name a problem."""
    tree = ast.parse(path.read_text())
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }
    found = set()
    for n in ast.walk(tree):
        s = None
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            s = n.value
        elif isinstance(n, ast.Name):
            s = n.id
        elif isinstance(n, ast.Attribute):
            s = n.attr
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            s = n.name
        if s and PROBLEM_WORD.search(s):
            found.add(s)
    return found


def test_the_grader_names_no_problem():
    """No branch, table or text of the grader's code names a problem, except the listed remnants (each string found
    must start with one listed for its file), and nothing compares a value with a problem's name."""
    found = {}
    for p in sorted((ROOT / "grader").rglob("*.py")):
        names = _named_strings(p)
        if names:
            found[p.relative_to(ROOT).as_posix()] = names
    assert set(found) <= set(KNOWN_REMNANTS), {k: v for k, v in found.items() if k not in KNOWN_REMNANTS}
    for f, names in found.items():
        new = {n for n in names if not n.startswith(KNOWN_REMNANTS[f])}
        assert not new, (f, new)
    for p in sorted((ROOT / "grader").rglob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, (ast.Compare, ast.match_case)):
                consts = [c for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                assert not any(PROBLEM_WORD.fullmatch(c.value) for c in consts), f"{p}:{n.lineno} decides by problem"


def test_the_name_scan_finds_a_problem_branch(tmp_path):
    """The scan above can fail: a branch on a problem's name is found (in a string, a name, a comparison)."""
    src = tmp_path / "x.py"
    src.write_text('"""Docstrings may say GLU."""\nif problem.name == "gelu":\n    swiglu_scale = 2\n')
    assert _named_strings(src) == {"gelu", "swiglu_scale"}


# -- grades on CPU -------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_the_staff_triton_solution_gets_every_cpu_point(name, tmp_path):
    g, corr = _grade_triton(name, tmp_path, None)
    cpu = _cpu_cases(corr)
    assert cpu and all(t.state == PASSED for t in cpu), [(t.name, t.output[:300]) for t in cpu if t.state != PASSED]
    assert all(t.state == SKIPPED for t in corr if t not in cpu)
    check = next(t for t in g.tests if t.kind == Kind.KERNEL_CHECK)
    assert check.state == PASSED and not check.findings, check.output


BROKEN = [
    # (problem, submission, the reason its failing cases must give, a case that must fail)
    ("gelu", "quick_gelu", Reason.WRONG_VALUES, "odd_1001/float32"),
    ("gelu", "ignores_row_stride", Reason.WRONG_VALUES, "strided_rows/float32"),
    ("gelu", "tanh_overflow", Reason.NAN_COMPUTED, "saturating/float32"),
    # The NaN poison is best effort on CPU (malloc may hand back other memory): the unwritten tail reads as the
    # poison, or as stale memory (wrong values, a stale NaN, or two runs that differ).
    ("gelu", "drops_tail", (Reason.UNWRITTEN, Reason.WRONG_VALUES, Reason.NAN_COMPUTED, Reason.NOT_DETERMINISTIC),
     "odd_1001/float32"),
    ("swiglu", "swapped_halves", Reason.WRONG_VALUES, "odd_h_1001/float32"),
    ("swiglu", "glu_instead", Reason.WRONG_VALUES, "odd_h_1001/float32"),
    ("swiglu", "silu_overflow", Reason.NAN_COMPUTED, "saturating/float32"),
    ("geglu", "quick_gelu", Reason.WRONG_VALUES, "odd_h_1001/float32"),
    ("geglu", "activation_on_b", Reason.WRONG_VALUES, "odd_h_1001/float32"),
    ("geglu", "ignores_row_stride", Reason.WRONG_VALUES, "strided_rows/float32"),
    ("glu_backward", "forgets_a", Reason.WRONG_VALUES, "odd_h_1001/float32"),
    ("glu_backward", "ignores_dy_stride", Reason.WRONG_VALUES, "strided_rows/float32"),
    # dy read with x's row stride: past dy's end inside the mask, the bounds check's wrong-address diagnosis
    ("glu_backward", "dy_with_x_stride", Reason.RAISED, "strided_rows/float32"),
    ("glu_backward", "swapped_outputs", Reason.WRONG_VALUES, "odd_h_1001/float32"),
    ("glu_backward", "writes_into_dy", Reason.INPUT_MODIFIED, "odd_h_1001/float32"),  # the second input, checked too
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "sub", "reason", "case"), BROKEN, ids=[f"{b[0]}-{b[1]}" for b in BROKEN])
def test_a_broken_submission_loses_points_for_its_bug(name, sub, reason, case, tmp_path):
    g, corr = _grade_triton(name, tmp_path, DATA / name / "broken" / sub)
    by = {t.extra["case"]: t for t in corr}
    reasons = reason if isinstance(reason, tuple) else (reason,)
    assert by[case].state == FAILED and by[case].reason in reasons, (by[case].state, by[case].reason, by[case].output[:500])
    assert g.score < sum(t.max_score for t in _cpu_cases(corr))


CORRECT = [("gelu", "rows_2d_tanh"), ("swiglu", "row_loop"), ("geglu", "tiles_2d_where"), ("glu_backward", "two_pass_rows")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "sub"), CORRECT, ids=[f"{c[0]}-{c[1]}" for c in CORRECT])
def test_a_correct_submission_of_another_design_gets_full_marks(name, sub, tmp_path):
    g, corr = _grade_triton(name, tmp_path, DATA / name / "correct" / sub)
    cpu = _cpu_cases(corr)
    assert all(t.state == PASSED for t in cpu), [(t.name, t.output[:300]) for t in cpu if t.state != PASSED]
    check = next(t for t in g.tests if t.kind == Kind.KERNEL_CHECK)
    assert check.state == PASSED, check.output


# -- more than one input (glu_backward) ----------------------------------------------------------------------------


def _spec_text_with(tmp_path: Path, old: str, new: str) -> Path:
    src = ROOT / "reference" / "glu_backward" / "spec.yaml"
    d = tmp_path / "gb"
    d.mkdir()
    (d / "reference.py").write_text((src.parent / "reference.py").read_text())
    text = src.read_text()
    assert old in text
    (d / "spec.yaml").write_text(text.replace(old, new))
    return d / "spec.yaml"


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("  - {name: x}\n", "  - {name: x, cols: half}\n", "inputs[0].cols"),
        ("  - {name: dy, cols: half}", "  - {name: x, cols: half}", "inputs[1].name"),
        ("  - {name: dy, cols: half}", "  - {name: dy, cols: third}", "inputs[1].cols"),
        ("shape: [1, 2], dtypes", "shape: [1, 3], dtypes", "case tiny_1x2/float32 is odd"),
    ],
)
def test_a_bad_inputs_list_is_one_clear_error(tmp_path, old, new, says):
    with pytest.raises(SpecError) as e:
        load_problem(_spec_text_with(tmp_path, old, new))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_second_input_has_its_own_shape_seed_and_padding():
    from grader.problem import inputs, operands

    p = _load("glu_backward")
    case = next(c for c in p.cases if c.name == "strided_rows/float16")
    x = inputs.make_input(case, "cpu", secret=5)
    (dy,) = operands.extra_inputs(p, case, "cpu", secret=5)
    assert dy.shape == (33, 100) and dy.dtype == x.dtype and dy.stride(0) == 100 + case.pad  # a padded view too
    assert not torch_equal(dy, x[..., :100])  # its own values, not x's
    (again,) = operands.extra_inputs(p, case, "cpu", secret=5)
    (other,) = operands.extra_inputs(p, case, "cpu", secret=6)
    assert torch_equal(dy, again) and not torch_equal(dy, other)  # reproducible, and secret
    assert operands.extra_inputs(_load("glu"), case, "cpu", secret=5) == []  # one input: nothing extra
    payload = operands.extra_payload([dy])
    assert payload["extra"][0]["cols"] == 100 and payload["extra"][0]["base"].shape == (33, 100 + case.pad)
    assert operands.extra_payload([]) == {}


def torch_equal(a, b) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.equal(a.float().nan_to_num(7.0), b.float().nan_to_num(7.0)))


def test_the_cuda_signature_follows_the_inputs(tmp_path):
    """The ABI for one input is GLU's; for (x, dy) the pointers, then rows and out_cols, then each row stride. A C
    stand-in (built with the system's cc, no GPU) records what the binding passes, in order."""
    import shutil
    import subprocess

    from grader.child import cuda_abi

    assert cuda_abi.signature(["x"]) == (
        "int entry(const void* x, void* y, int64_t rows, int64_t out_cols, int64_t x_row_stride, int dtype, "
        "cudaStream_t stream)"
    )
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "stub.c"
    src.write_text(
        "#include <stdint.h>\nint64_t seen[9];\n"
        "int glu_backward_cuda(const void* x, const void* dy, void* dx, int64_t rows, int64_t out_cols,"
        " int64_t xs, int64_t ys, int dtype, void* stream) {\n"
        "  seen[0] = (int64_t)x; seen[1] = (int64_t)dy; seen[2] = (int64_t)dx; seen[3] = rows; seen[4] = out_cols;\n"
        "  seen[5] = xs; seen[6] = ys; seen[7] = dtype; seen[8] = (int64_t)stream; return 0; }\n"
    )
    lib = tmp_path / "stub.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    k = cuda_abi.CudaMultiKernel(lib, "glu_backward_cuda", [["x", "same"], ["dy", "half"]], lambda c: c, "h", "s")
    assert k._fn(11, 22, 33, 4, 200, 224, 112, 2, 99) == 0
    import ctypes

    seen = (ctypes.c_int64 * 9).in_dll(k._lib, "seen")
    assert list(seen) == [11, 22, 33, 4, 200, 224, 112, 2, 99]
    with pytest.raises(Exception, match="not found in the built library"):
        cuda_abi.CudaMultiKernel(lib, "nosuch", [["x", "same"], ["dy", "half"]], lambda c: c, "h", "s")


def test_the_default_problem_is_data_one_spec_marked_default(tmp_path):
    """No --problem: the grader grades the one problem whose spec says `default: true` (glu in this repository); none
    or two marked is one error that names the fix."""
    from grader.problem.spec import SpecError, default_problem, find_problem

    assert find_problem(None, ROOT) == ROOT / "reference" / "glu" / "spec.yaml"
    for name, marked in (("a", True), ("b", False)):
        (tmp_path / "reference" / name).mkdir(parents=True)
        (tmp_path / "reference" / name / "spec.yaml").write_text(f"name: {name}\ndefault: {str(marked).lower()}\n")
    assert default_problem(tmp_path) == tmp_path / "reference" / "a" / "spec.yaml"
    (tmp_path / "reference" / "b" / "spec.yaml").write_text("name: b\ndefault: true\n")
    with pytest.raises(SpecError, match=r"marked `default: true`: a, b\): pass --problem NAME"):
        default_problem(tmp_path)
