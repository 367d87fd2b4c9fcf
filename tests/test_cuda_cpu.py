"""The CUDA-on-CPU layer (grader/cuda/cudacpu.py, grader/child/cudacpu/, grader/child/cudacpu_binding.py): a CUDA part
graded on a machine without a GPU runs its CPU-runnable cases through the same correctness engine as on a GPU.

Submissions of our own are in tests/data/problems/glu/cuda_cpu/<name>/glu_cuda.cu: correct kernels of the common designs
(scalar, grid-stride, float4 with a scalar tail, row per block) earn every CPU-runnable point; broken ones lose points
with a reason that names the bug class; one that needs __syncthreads is "needs a GPU", never passed or failed."""

from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import torch

from grader.correctness import sanitizer
from grader.cuda import cudacpu, cudacpu_source
from grader.cuda.build import find_nvcc
from grader.pipeline import Options, grade
from grader.results import FAILED, PASSED, SKIPPED, Kind, Reason

SUBS = Path(__file__).resolve().parent / "data" / "problems" / "glu" / "cuda_cpu"
CORRECT = Path(__file__).resolve().parent / "data" / "problems" / "glu" / "correct"
STAFF = Path(__file__).resolve().parent.parent / "reference" / "glu" / "solution_cuda.cu"
needs_cxx = pytest.mark.skipif(cudacpu.find_compiler() is None, reason="no C++ compiler (g++ or clang++)")


def _cases(g, state=None):
    return {
        t.extra["case"]: t
        for t in g.tests
        if t.part == "cuda" and t.kind == Kind.CORRECTNESS and (state is None or t.state == state)
    }


def _runnable(problem):
    return {c.name for c in problem.cases if not c.gpu_only}


# -- the launch rewrite -------------------------------------------------------------------------------------------


def test_launches_are_rewritten_on_the_same_lines_whatever_their_spelling():
    src = (
        "void f() {\n"
        "    glu_kernel<T>\n"
        "        <<<blocks, threads, 0, stream>>>\n"
        "        (static_cast<const T*>(x), y);\n"
        "    ns::k<A, B<C>><<<dim3(1, 2), 3>>>();  // a comment: k<<<1, 1>>>(x)\n"
        '    k <<< g , b , std::min<int>(4, 5) >>> ( a, "s<<<" , (b) );\n'
        '    const char* s = "<<<no>>>";\n'
        "}\n"
    )
    out = cudacpu_source.rewrite_launches(src)
    assert out.count("\n") == src.count("\n")  # sanitizer reports keep the student's line numbers
    lines = out.splitlines()
    # Each part on its own line (__LINE__ in the configuration or the arguments reads what nvcc's build reads), the
    # configuration evaluated first (nvcc's order).
    assert lines[1].strip() == ""
    assert "(::cudacpu::configure(::cudacpu::Config(blocks, threads, 0, stream)) ? (void)0 : " in lines[2]
    assert "::cudacpu::launch_configured([&](auto... cudacpu_a) { glu_kernel<T>(cudacpu_a...); }" in lines[2]
    assert lines[3].strip() == ", static_cast<const T*>(x), y));"  # the arguments stay on their line
    assert (
        "Config(dim3(1, 2), 3)) ? (void)0 : ::cudacpu::launch_configured([&](auto... cudacpu_a) "
        "{ ns::k<A, B<C>>(cudacpu_a...); }));" in lines[4]
    )
    assert lines[4].endswith("// a comment: k<<<1, 1>>>(x)")  # comments are left alone
    assert (
        "Config( g , b , std::min<int>(4, 5) )" in lines[5] and '{ k(cudacpu_a...); },  a, "s<<<" , (b) ));' in lines[5]
    )
    assert lines[6] == '    const char* s = "<<<no>>>";'


def test_what_the_layer_cannot_run_is_found_on_the_student_s_own_lines_only():
    pre = (
        '# 1 "cudacpu.h"\n'
        "void __syncthreads_like_helper_of_ours();\n"  # the layer's own header: not the student's
        '# 10 "glu_cuda.cu"\n'
        "int a = 0;\n"
        "    __syncthreads();\n"
        "    float v = __shfl_down_sync(0xffffffff, w, 1);\n"
        '    asm("ex2.approx.f32 %0, %1;" : "=f"(e) : "f"(b));\n'
        "    atomicAdd(p, 1.0f);\n"
        "    extern __shared__ float dyn[];\n"
        "    __shared__ float fixed[256];\n"  # static shared memory alone runs (one block at a time)
    )
    found = cudacpu_source.unsupported(pre, "glu_cuda.cu")
    assert found == [
        "__syncthreads (block-wide barriers) (glu_cuda.cu:11)",
        "warp shuffles and votes (glu_cuda.cu:12)",
        "inline PTX (asm) (glu_cuda.cu:13)",
        "atomics (glu_cuda.cu:14)",
        "dynamic shared memory (extern __shared__) (glu_cuda.cu:15)",
    ]


# -- the 16-bit types ---------------------------------------------------------------------------------------------

CONVERT = r"""
#include <cstdio>
#include <cstdint>
#include "cudacpu.h"
int main() {
    float f;
    while (fread(&f, 4, 1, stdin) == 1) {
        const uint16_t h = __half_as_ushort(__float2half_rn(f)), b = __bfloat16_as_ushort(__float2bfloat16_rn(f));
        const float back[2] = {__half2float(__ushort_as_half(h)), __bfloat162float(__ushort_as_bfloat16(b))};
        fwrite(&h, 2, 1, stdout); fwrite(&b, 2, 1, stdout); fwrite(back, 4, 2, stdout);
    }
}
"""


@needs_cxx
def test_half_and_bfloat16_round_like_torch_at_every_kind_of_value(tmp_path):
    (tmp_path / "t.cpp").write_text(CONVERT)
    subprocess.run(
        [cudacpu.find_compiler(), "-std=c++17", "-O1", "-I", str(cudacpu.LAYER), "t.cpp", "-o", "t"],
        cwd=tmp_path,
        check=True,
    )
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(-(2**31), 2**31 - 1, (200_000,), generator=g, dtype=torch.int64).to(torch.int32)
    special = torch.tensor(
        [0.0, -0.0, 65504.0, 65519.99, 65520.0, -65520.0, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0001, 2.0**-14, 6e-8, 1e-40]
        + [float("inf"), float("-inf"), 3.3895314e38, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1.0 + 2.0**-8],
        dtype=torch.float32,
    )
    x = torch.cat([bits.view(torch.float32), special, torch.randn(10_000, generator=g) * 1e4])
    x = x[~x.isnan()]  # NaN payloads differ between implementations; NaN-ness is checked below
    out = subprocess.run([tmp_path / "t"], input=x.numpy().tobytes(), capture_output=True, check=True).stdout
    rec = torch.frombuffer(bytearray(out), dtype=torch.uint8).view(-1, 12)
    half_bits = rec[:, 0:2].contiguous().view(torch.int16).flatten()
    bf16_bits = rec[:, 2:4].contiguous().view(torch.int16).flatten()
    assert torch.equal(half_bits, x.to(torch.float16).view(torch.int16))
    assert torch.equal(bf16_bits, x.to(torch.bfloat16).view(torch.int16))
    back = rec[:, 4:12].contiguous().view(torch.float32).view(-1, 2)
    assert torch.equal(back[:, 0], x.to(torch.float16).float())
    assert torch.equal(back[:, 1], x.to(torch.bfloat16).float())
    nan = subprocess.run([tmp_path / "t"], input=struct.pack("<f", float("nan")), capture_output=True).stdout
    assert torch.frombuffer(bytearray(nan[4:12]), dtype=torch.float32).isnan().all()


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
def test_each_compiler_builds_the_layer_with_sanitizers_and_reports_a_misaligned_load_at_its_line(
    cxx, tmp_path, monkeypatch
):
    if shutil.which(cxx) is None:
        pytest.skip(f"{cxx} not installed")
    from grader.child.cudacpu_binding import CpuKernelError, CpuRowKernel

    monkeypatch.setenv("CXX", cxx)
    built = {}
    for name in ("float4_tail", "misaligned_float4"):
        b = cudacpu.build_cpu(
            SUBS / name / "glu_cuda.cu", entry="glu_cuda_forward", scratch=None, build_dir=tmp_path / name
        )
        assert b.state == cudacpu.State.OK and b.compiler == cxx, b.text
        if not b.sanitized:
            pytest.skip(f"{cxx}'s sanitizer runtimes are not installed: {b.text}")
        built[name] = CpuRowKernel(b.harness, "glu_cuda_forward", lambda c: c // 2, "h", "s", "glu_cuda.cu")
    x = torch.randn(3, 2002)  # h = 1001: rows start off a 16-byte boundary
    torch.testing.assert_close(built["float4_tail"](x), torch.nn.functional.glu(x, dim=-1))
    with pytest.raises(CpuKernelError) as e:
        built["misaligned_float4"](x)
    assert e.value.category == "misaligned" and "glu_cuda.cu:35" in str(e.value), str(e.value)


# -- grades ---------------------------------------------------------------------------------------------------------

CORRECT_DESIGNS = ["scalar", "grid_stride", "float4_tail", "row_per_block"]


def _assert_every_cpu_point(g, problem):
    cases = _cases(g)
    assert cases and set(_cases(g, PASSED)) == _runnable(problem), {
        n: (t.state, t.output) for n, t in cases.items() if t.state != PASSED
    }
    for name, t in cases.items():
        if t.state == PASSED:
            assert t.score == t.max_score and t.extra["cpu_layer"] and "count as on a GPU" in t.output
        else:  # the GPU-only cases: skipped, never failed
            assert t.state == SKIPPED and t.reason == Reason.NEEDS_GPU, name
    rows = {t.kind: t for t in g.tests if t.part == "cuda"}
    assert rows[Kind.CPU_BUILD].state == PASSED and rows[Kind.CPU_BUILD].extra["sanitized"], rows[Kind.CPU_BUILD].output
    assert any("count as on a GPU" in n for n in g.notes), g.notes


@needs_cxx
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[] if n == "scalar" else [pytest.mark.slow]) for n in CORRECT_DESIGNS]
)
def test_a_correct_kernel_of_a_common_design_earns_every_cpu_point(name, problem, grade_dir):
    _assert_every_cpu_point(grade_dir(SUBS / name, only=("cuda",)), problem)


@pytest.mark.slow
@needs_cxx
def test_the_staff_kernel_earns_every_cpu_point(problem, grade_dir):
    _assert_every_cpu_point(grade_dir(STAFF.parent, only=("cuda",), staff=True), problem)


def _h(case) -> int:
    return case.shape[-1] // 2


# name -> (the cases that must fail, as a predicate on the spec's Case, the Reason, words every such output has)
BROKEN = {
    "ignores_row_stride": (lambda c: bool(c.pad) and 0 not in c.shape, Reason.WRONG_VALUES, "row_stride"),
    "missing_bf16": (
        lambda c: c.dtype == "bfloat16" and 0 not in c.shape,
        Reason.RAISED,
        "without launching a kernel for this bfloat16 input (a missing dtype path?)",
    ),
    "missing_tail": (lambda c: c.dtype == "float32" and c.pad and _h(c) % 8 == 4, Reason.UNWRITTEN, "tail"),
    "oob_write": (lambda c: 0 not in c.shape, Reason.OUT_OF_BOUNDS, "past the end of y (the output)"),
    # (saturating_gates/float16 survives the mix-up: its outputs are 0 or tiny, within float16's absolute tolerance)
    "fp16_bf16_mixup": (
        lambda c: c.dtype != "float32" and 0 not in c.shape and (c.dtype, c.dist) != ("float16", "saturating"),
        Reason.WRONG_VALUES,
        "wrong values",
    ),
    "misaligned_float4": (lambda c: c.dtype == "float32" and _h(c) % 4 and _h(c) >= 8, Reason.MISALIGNED, ":35"),
    "racy": (lambda c: 0 not in c.shape, Reason.RACE, "race:"),
    # Host code that touches device memory (grader/child/cudacpu/device_memory.h): GLU through x and y beside an
    # empty kernel, and a __device__ variable the launcher writes. Each earned every CPU point before.
    "host_compute": (lambda c: 0 not in c.shape, Reason.RAISED, "host code read device memory at glu_cuda.cu:"),
    "host_device_variable": (
        lambda c: 0 not in c.shape,
        Reason.RAISED,
        "host code wrote the device variable `g_scale` (defined at glu_cuda.cu:11) at glu_cuda.cu:26",
    ),
    # Launches that differ between nvcc's build and the layer's unless the rewrite keeps lines and nvcc's order.
    "two_program_line": (lambda c: 0 not in c.shape, Reason.RAISED, "cudaErrorInvalidConfiguration"),
    "two_program_order": (lambda c: 0 not in c.shape, Reason.RAISED, "cudaErrorInvalidConfiguration"),
}


@pytest.mark.slow  # ~20 s each: nvcc, the sanitized CPU build, 24 cases
@needs_cxx
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_kernel_loses_exactly_the_cases_its_bug_touches_with_its_reason(name, problem, grade_dir):
    cxx = cudacpu.find_compiler()
    if name == "host_device_variable" and not (cxx and cudacpu.device_variables_protected(cxx)):
        pytest.skip("this compiler's build leaves __device__ variables host memory (docs/SECURITY.md)")
    must_fail, reason, words = BROKEN[name]
    g = grade_dir(SUBS / name, only=("cuda",))
    cases = _cases(g)
    want = {c.name for c in problem.cases if not c.gpu_only and must_fail(c)}
    assert want, "the predicate selects no case: the test would prove nothing"
    failed = {n for n, t in cases.items() if t.state == FAILED}
    assert failed == want, {n: cases[n].output.splitlines()[0] for n in failed ^ want}
    for n in failed:
        assert cases[n].reason == reason and cases[n].score == 0, (n, cases[n].reason, cases[n].output)
        assert words in cases[n].output, cases[n].output
        if reason in (Reason.OUT_OF_BOUNDS, Reason.MISALIGNED):  # file and line, from the sanitizer
            assert "glu_cuda.cu:" in cases[n].output.splitlines()[0], cases[n].output
    assert set(_cases(g, PASSED)) == _runnable(problem) - want


@pytest.mark.slow  # three hangs of 10 s each
@needs_cxx
def test_a_hanging_kernel_times_out_like_any_case(problem, tmp_path):
    quick = dataclasses.replace(problem, limits=dataclasses.replace(problem.limits, case_s=10.0))
    g = grade(quick, Options(submission=SUBS / "hangs", out=tmp_path, only=("cuda",), device="cpu", perf=False))
    cases = _cases(g)
    first = next(c.name for c in problem.cases if 0 not in c.shape)
    assert cases[first].state == FAILED and cases[first].reason == Reason.TIMEOUT, cases[first].output
    assert not any(t.score for t in cases.values())


@needs_cxx
def test_a_kernel_with_shared_memory_and_syncthreads_needs_a_gpu(problem, grade_dir):
    g = grade_dir(SUBS / "shared_sync", only=("cuda",))
    cases = _cases(g)
    assert cases and all(t.state == SKIPPED and t.reason == Reason.NEEDS_GPU for t in cases.values())
    row = next(t for t in g.tests if t.kind == Kind.CPU_BUILD)
    assert row.state == SKIPPED and "__syncthreads" in row.output and "glu_cuda.cu:23" in row.output, row.output
    assert all("__syncthreads" in t.output for t in cases.values())


def test_no_compiler_says_how_to_get_one_and_fails_nothing(problem, tmp_path, monkeypatch):
    monkeypatch.setattr(cudacpu, "find_compiler", lambda: None)
    g = grade(problem, Options(submission=SUBS / "scalar", out=tmp_path, only=("cuda",), device="cpu", perf=False))
    cases = _cases(g)
    assert cases and all(t.state == SKIPPED and t.reason == Reason.NEEDS_GPU for t in cases.values())
    row = next(t for t in g.tests if t.kind == Kind.CPU_BUILD)
    assert row.output == cudacpu.how_to_get_a_compiler() and "install" in row.output


@pytest.mark.slow
@needs_cxx
def test_without_nvcc_the_cpu_layer_still_checks_the_kernel(problem, tmp_path, monkeypatch):
    import grader.cuda.build

    monkeypatch.setattr(grader.cuda.build, "find_nvcc", lambda: None)
    g = grade(problem, Options(submission=SUBS / "scalar", out=tmp_path, only=("cuda",), device="cpu", perf=False))
    build = next(t for t in g.tests if t.kind == Kind.BUILD)
    assert build.state == SKIPPED and "nvcc not found" in build.output
    assert set(_cases(g, PASSED)) == _runnable(problem)


# -- on the GPU: compute-sanitizer, and the same verdicts ----------------------------------------------------------

MEMCHECK_LOG = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at void glu_kernel<float>(const float *, float *, long, long, long)+0x2b0 in /s/cpubuild-1/glu_cuda.cu:21
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f2e9a000204 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2e9a000200 of size 4 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2dfbef] in libcuda.so.1
=========
========= ERROR SUMMARY: 1 error
"""


def test_compute_sanitizer_reports_become_typed_failures_with_file_and_line():
    from grader.child.cudacpu_binding import explain_sanitizer

    line, category = explain_sanitizer(MEMCHECK_LOG, "glu_cuda.cu")
    assert category == "out-of-bounds" and "glu_cuda.cu:21" in line and "write of 4 bytes" in line
    line, category = explain_sanitizer(MEMCHECK_LOG.replace("is out of bounds", "is misaligned"), "glu_cuda.cu")
    assert category == "misaligned"
    # CUDA 13.0's compute-sanitizer (on the H200) words it "Access to ... is misaligned" (scripts/sanitizer_log.py)
    h200 = MEMCHECK_LOG.replace("write of size 4", "read of size 16").replace(
        "Address 0x7f2e9a000204 is out of bounds", "Access to 0x7fea40801ba4 is misaligned"
    )
    line, category = explain_sanitizer(h200, "glu_cuda.cu")
    assert category == "misaligned" and "read of 16 bytes" in line and "glu_cuda.cu:21" in line, line
    race = "========= Error: Race reported between Write access at void k(float*)+0x90 in /b/glu_cuda.cu:30\n"
    assert explain_sanitizer(race, "glu_cuda.cu")[1] == "race"
    assert explain_sanitizer("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n", "glu_cuda.cu") == (
        "",
        "",
    )
    hazard = "========= Error: Potential WAR hazard detected at __shared__ 0x40 in block (0,0,0) :\n"
    assert explain_sanitizer(hazard, "glu_cuda.cu")[1] == "race"
    # A clean racecheck run ends with its summary, which says "hazards": no race there (the shared-memory kernel
    # of tests/data/problems/glu/cuda_cpu/shared_sync was flagged by that word alone on the H200).
    clean = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    assert explain_sanitizer(clean, "glu_cuda.cu") == ("", "")
    assert sanitizer.tools_for((SUBS / "shared_sync" / "glu_cuda.cu").read_text()) == ["memcheck", "racecheck"]
    assert sanitizer.tools_for("// __shared__ in a comment only\n__global__ void k() {}") == ["memcheck"]


def test_the_sanitizer_row_counts_only_what_the_sanitizer_found(problem):
    from grader.results import TestResult

    impl = problem.implementations["cuda"]

    def case(name: str, state: str, reason: Reason, output: str) -> TestResult:
        return TestResult(
            f"cuda / correctness / {name}",
            "cuda",
            "correctness",
            0.0,
            1.0,
            state,
            output,
            {"case": name},
            kind=Kind.CORRECTNESS,
            reason=reason,
        )

    results = [
        case("a", FAILED, Reason.NOT_IMPLEMENTED, "glu_cuda_forward returned ERR_NOT_IMPLEMENTED (-2)"),
        case("b", FAILED, Reason.WRONG_VALUES, "wrong values: 3 of 9 elements outside tolerance"),
        case("c", PASSED, Reason.OK, "ok"),
        case("d", FAILED, Reason.OUT_OF_BOUNDS, "out of bounds: write of 4 bytes to global memory at glu_cuda.cu:21"),
    ]
    lines, first = sanitizer.fold(impl, "memcheck", results)
    assert lines == ["memcheck, case d: out of bounds: write of 4 bytes to global memory at glu_cuda.cu:21"]
    assert first == Reason.OUT_OF_BOUNDS
    assert sanitizer.fold(impl, "memcheck", results[:3]) == ([], Reason.OK)


def test_a_case_the_sanitizer_flagged_loses_its_points_even_when_its_values_were_right(problem):
    """On a GPU an over-read past a row's end (tests/data/problems/glu/cuda_cpu/overread_past_row) leaves every value
    right, and the graded run cannot see it; the CPU layer's AddressSanitizer fails those cases. The compute-sanitizer
    pass sees it on the same cases: `charge` fails exactly those graded cases of that part: both machines agree."""
    from grader.results import TestResult

    impl = problem.implementations["cuda"]

    def case(part: str, name: str, state: str = PASSED) -> TestResult:
        return TestResult(
            f"{part} / correctness / {name}",
            part,
            "correctness",
            1.0 if state == PASSED else 0.0,
            1.0,
            state,
            "ok",
            {"case": name},
            kind=Kind.CORRECTNESS,
        )

    tests = [case("cuda", "a"), case("cuda", "b"), case("cuda", "c", FAILED), case("triton", "a")]
    flagged = [
        TestResult(
            "cuda / correctness / a",
            "cuda",
            "correctness",
            0.0,
            1.0,
            FAILED,
            "out of bounds: read of 1 bytes to global memory at glu_cuda.cu:28",
            {"case": "a"},
            kind=Kind.CORRECTNESS,
            reason=Reason.OUT_OF_BOUNDS,
        )
    ]
    cases: dict[str, tuple[str, str]] = {}
    lines, first = sanitizer.fold(impl, "memcheck", flagged, cases)
    row = sanitizer.row(impl, FAILED, "\n".join(lines), first, flagged_cases=cases)
    assert sanitizer.charge(tests, row) == 1
    a, b, c, other = tests
    assert (a.state, a.score, a.reason) == (FAILED, 0.0, Reason.OUT_OF_BOUNDS)
    assert "glu_cuda.cu:28" in a.output and "compute-sanitizer" in a.output
    assert (b.state, b.score) == (PASSED, 1.0) and (other.state, other.score) == (PASSED, 1.0)
    assert c.state == FAILED and c.reason == Reason.OK  # already failed: left as the graded run said
    clean = sanitizer.row(impl, PASSED, "no errors", flagged_cases={"b": ("out of bounds", "x")})
    assert sanitizer.charge(tests, clean) == 0 and b.state == PASSED


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_the_compute_sanitizer_harness_builds_with_the_student_s_file(tmp_path):
    harness, why = sanitizer.build_harness(
        SUBS / "scalar" / "glu_cuda.cu",
        entry="glu_cuda_forward",
        arch=None,
        scratch=None,
        timeout_s=180,
        out_name="h",
        build_dir=tmp_path,
    )
    assert harness is not None and harness.stat().st_mode & 0o111, why


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_the_sanitizer_harness_does_not_show_the_student_s_file_its_entry_macro(tmp_path):
    """The entry point's name is defined for the harness's translation unit only: a file that tests CUDACPU_ENTRY
    (to be another program under compute-sanitizer than in the graded build) sees it undefined, as under nvcc."""
    src = tmp_path / "glu_cuda.cu"
    src.write_text(
        "#ifdef CUDACPU_ENTRY\n#error the sanitizer's build is told apart from the graded one\n#endif\n"
        + (SUBS / "scalar" / "glu_cuda.cu").read_text()
    )
    harness, why = sanitizer.build_harness(
        src, entry="glu_cuda_forward", arch=None, scratch=None, timeout_s=180, out_name="h", build_dir=tmp_path / "b"
    )
    assert harness is not None, why


def _rows_by_kind(g):
    return {t.kind: t for t in g.tests if t.part == "cuda"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.skipif(sanitizer.find_compute_sanitizer() is None, reason="compute-sanitizer not found")
@pytest.mark.parametrize(
    "name, state, reason",
    [
        ("scalar", PASSED, Reason.OK),
        ("oob_write", FAILED, Reason.OUT_OF_BOUNDS),  # every value right on the GPU: only the sanitizer sees it
        ("overread_past_row", FAILED, Reason.OUT_OF_BOUNDS),  # the same for a read one element past a row
        ("misaligned_float4", FAILED, Reason.MISALIGNED),
    ],
)
def test_gpu_compute_sanitizer_row(name, state, reason, problem, tmp_path):
    g = grade(problem, Options(SUBS / name, tmp_path, only=("cuda",), device="cuda", perf=False))
    row = _rows_by_kind(g)[Kind.SANITIZER]
    assert row.state == state and row.reason == reason, row.output
    if state == FAILED:
        assert "glu_cuda.cu:" in row.output, row.output


# Where a GPU run cannot see the bug: a race's winner depends on the scheduling. (A store one element past y, or a
# read one element past a row, lands in the allocator's slack in the graded run; the compute-sanitizer pass sees it
# on the same cases and `sanitizer.charge` fails them, so those verdicts match the CPU layer's.)
GPU_BLIND = {"racy"}
# Host code that reads the device pointers: on the CPU layer every non-empty case fails ("host code read device
# memory"); on a GPU the process dies (SIGSEGV) and, after MAX_RESTARTS crashes, the rest is not run. Both fail
# every case with work in it; only the empty ones can differ (passed on CPU, not run on the GPU).
# (host_device_variable gets the same verdicts on both: its launcher's write fails each case with work here, and
# leaves the GPU's kernel reading 0, wrong values, there.)
CRASHES_ON_GPU = {"host_compute"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.skipif(find_nvcc() is None or cudacpu.find_compiler() is None, reason="needs nvcc and g++")
@pytest.mark.parametrize("name", sorted(p.name for p in SUBS.iterdir() if p.name not in ("hangs", "glu_backward")))
def test_gpu_the_same_submissions_get_the_same_verdicts_as_on_cpu(name, problem, tmp_path):
    verdicts = {}
    for device in ("cpu", "cuda"):
        g = grade(problem, Options(SUBS / name, tmp_path / device, only=("cuda",), device=device, perf=False))
        verdicts[device] = {n: t.state for n, t in _cases(g).items() if n in _runnable(problem)}
    print(f"\n{name}: " + ", ".join(f"{n}: cpu {s} / gpu {verdicts['cuda'][n]}" for n, s in verdicts["cpu"].items()))
    if name == "shared_sync":  # needs a GPU: skipped on CPU, passed there
        assert set(verdicts["cpu"].values()) == {SKIPPED} and set(verdicts["cuda"].values()) == {PASSED}
    elif name in CRASHES_ON_GPU:
        failed_cpu = {n for n, st in verdicts["cpu"].items() if st == FAILED}
        assert failed_cpu and all(verdicts["cuda"][n] == FAILED for n in failed_cpu)
    elif name not in GPU_BLIND:
        assert verdicts["cpu"] == verdicts["cuda"]


@needs_cxx
def test_under_a_sanitizer_a_case_s_second_call_on_the_same_input_reuses_the_first_run(tmp_path):
    """The compute-sanitizer pass reads only the sanitizer's reports, and each run of the harness costs a sanitizer
    start: the correctness engine's second call of a case (same input bytes) reuses the first run; a new input runs
    again. A fake sanitizer (a script that counts its runs, then runs the harness) stands in for NVIDIA's."""
    from grader.child.cudacpu_binding import CpuRowKernel

    b = cudacpu.build_cpu(SUBS / "scalar" / "glu_cuda.cu", entry="glu_cuda_forward", scratch=None, build_dir=tmp_path)
    assert b.harness is not None, b.text
    runs = tmp_path / "runs"
    fake = tmp_path / "fake-sanitizer"
    fake.write_text(f'#!/bin/sh\necho run >> "{runs}"\nshift 2\nexec "$@"\n')  # drops its own "--log-file LOG"
    fake.chmod(0o755)
    k = CpuRowKernel(b.harness, "glu_cuda_forward", lambda c: c // 2, "README.md", "Part 2", "glu_cuda.cu", [str(fake)])
    x = torch.randn(6, 16)
    y1, y2 = k(x), k(x.clone())
    want = x[:, :8] * torch.sigmoid(x[:, 8:])
    assert torch.allclose(y1, want) and torch.equal(y1, y2) and y1.data_ptr() != y2.data_ptr()
    assert runs.read_text().count("run") == 1
    assert torch.allclose(k(x * 2), (x * 2)[:, :8] * torch.sigmoid((x * 2)[:, 8:]))
    assert runs.read_text().count("run") == 2


def test_the_sanitizer_pass_deals_the_cases_to_parallel_workers_and_keeps_their_order(problem, monkeypatch):
    from grader.results import TestResult

    seen: list[tuple[str, ...]] = []

    def fake_run(p, target, ref, *, device, secret):
        seen.append(tuple(c.name for c in p.cases))
        return [TestResult(c.name, "cuda", "correctness", 1, 1, PASSED, "", {"case": c.name}) for c in p.cases]

    monkeypatch.setattr(sanitizer, "run_correctness", fake_run)
    monkeypatch.setattr(sanitizer, "_chunks", lambda: 3)
    results = sanitizer._run_split(problem, None, None, 0)
    assert [r.extra["case"] for r in results] == [c.name for c in problem.cases]
    assert len(seen) == 3 and sorted(n for chunk in seen for n in chunk) == sorted(c.name for c in problem.cases)
    assert all(abs(len(a) - len(b)) <= 1 for a in seen for b in seen)  # dealt evenly
