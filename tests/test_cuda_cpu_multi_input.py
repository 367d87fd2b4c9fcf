"""The CUDA-on-CPU layer and the compute-sanitizer harness for a problem of several inputs (issue 29, item 6):
the entry point's signature comes from the spec (reference/glu_backward/spec.yaml: inputs x and dy, output dx), so
glu_backward's CUDA part gets CPU feedback like the one-input problems.

Submissions of our own are in tests/data/problems/glu_backward/cuda_cpu/<name>/glu_backward_cuda.cu: `correct` (the
stub's TODOs done) earns every CPU-runnable case; `overread_dy` reads one element past dy's end on every non-empty case
(an out-of-bounds verdict naming dy); `forgets_one_minus_s` computes db wrong (wrong values everywhere). The stub itself
fails every case as not implemented. The harness protocol (grader/child/cudacpu/protocol.h) is tested directly."""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest
import torch

from grader.correctness import sanitizer
from grader.cuda import cudacpu
from grader.cuda.build import find_nvcc
from grader.results import FAILED, PASSED, SKIPPED, Kind, Reason

ROOT = Path(__file__).resolve().parent.parent
SUBS = Path(__file__).resolve().parent / "data" / "problems" / "glu_backward" / "cuda_cpu"
STUB = ROOT / "assignment" / "glu_backward"
ENTRY = "glu_backward_cuda"
needs_cxx = pytest.mark.skipif(cudacpu.find_compiler() is None, reason="no C++ compiler (g++ or clang++)")


@pytest.fixture(scope="module")
def glub():
    from grader.problem.spec import load_problem

    return load_problem(ROOT / "reference" / "glu_backward" / "spec.yaml")


@pytest.fixture(scope="module")
def graded(glub, tmp_path_factory):
    """graded(folder) -> the Grade of its CUDA part on this CPU (cached for the module)."""
    from grader.pipeline import Options, grade

    cache: dict[str, object] = {}

    def run(folder: Path):
        if str(folder) not in cache:
            out = tmp_path_factory.mktemp("glub-grade")
            cache[str(folder)] = grade(
                glub, Options(submission=folder, out=out, only=("cuda",), device="cpu", perf=False)
            )
        return cache[str(folder)]

    return run


def _cases(g):
    return {t.extra["case"]: t for t in g.tests if t.part == "cuda" and t.kind == Kind.CORRECTNESS}


def _runnable(problem):
    return {c.name for c in problem.cases if not c.gpu_only}


def _nonempty(problem):
    return {c.name for c in problem.cases if not c.gpu_only and 0 not in c.shape}


# A float32 kernel against the float64 truth: the spec's float32 tolerances (reference/glu_backward/spec.yaml), not
# float64's default ones (which a right float32 result misses now and then on random inputs).
FP32 = {"atol": 5e-6, "rtol": 1e-5}


def _glu_backward(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    x = x.double().requires_grad_()
    torch.nn.functional.glu(x, dim=-1).backward(dy.double())
    assert x.grad is not None
    return x.grad


# -- grades: the stub, a correct kernel and two broken ones ---------------------------------------------------------


@needs_cxx
def test_a_correct_glu_backward_kernel_earns_every_cpu_point(glub, graded):
    g = graded(SUBS / "correct")
    rows = {t.kind: t for t in g.tests if t.part == "cuda"}
    assert rows[Kind.CPU_BUILD].state == PASSED and rows[Kind.CPU_BUILD].extra["sanitized"], rows[Kind.CPU_BUILD].output
    cases = _cases(g)
    passed = {n for n, t in cases.items() if t.state == PASSED}
    assert passed == _runnable(glub), {n: t.output for n, t in cases.items() if n not in passed}
    for n, t in cases.items():
        if n in passed:
            assert t.score == t.max_score and t.extra["cpu_layer"], (n, t.output)
        else:  # the GPU-only cases: skipped, never failed
            assert t.state == SKIPPED and t.reason == Reason.NEEDS_GPU, (n, t.output)
    assert not any("one-input" in n for n in g.notes), g.notes


@pytest.mark.slow  # ~15 s each: nvcc, the sanitized CPU build, 25 cases
@needs_cxx
def test_the_glu_backward_stub_fails_every_cpu_case_as_not_implemented(glub, graded):
    cases = _cases(graded(STUB))
    assert {n for n, t in cases.items() if t.state == FAILED} == _runnable(glub)
    for t in cases.values():
        if t.state == FAILED:
            assert t.score == 0 and "NOT_IMPLEMENTED" in t.output, t.output


@pytest.mark.slow
@needs_cxx
def test_a_glu_backward_kernel_reading_past_dy_fails_out_of_bounds_naming_dy(glub, graded):
    cases = _cases(graded(SUBS / "overread_dy"))
    failed = {n for n, t in cases.items() if t.state == FAILED}
    assert failed == _nonempty(glub), failed ^ _nonempty(glub)
    for n in failed:
        t = cases[n]
        assert t.reason == Reason.OUT_OF_BOUNDS and t.score == 0, (n, t.reason, t.output)
        assert "glu_backward_cuda.cu:34" in t.output.splitlines()[0], t.output
    # Where the allocations are far apart (not the 1-row case, whose 4-byte buffers are neighbours), the buffer
    # named is the one read past: the spec's second input, by its name.
    assert "past the end of dy (argument 2)" in cases["odd_h_1001/float32"].output, cases["odd_h_1001/float32"].output
    assert {n for n, t in cases.items() if t.state == PASSED} == _runnable(glub) - _nonempty(glub)


@pytest.mark.slow
@needs_cxx
def test_a_glu_backward_kernel_with_a_wrong_db_fails_with_wrong_values(glub, graded):
    cases = _cases(graded(SUBS / "forgets_one_minus_s"))
    failed = {n for n, t in cases.items() if t.state == FAILED}
    assert failed == _nonempty(glub), failed ^ _nonempty(glub)
    assert all(cases[n].reason == Reason.WRONG_VALUES for n in failed)


# -- the protocol ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def correct_harness(tmp_path_factory):
    b = cudacpu.build_cpu(
        SUBS / "correct" / "glu_backward_cuda.cu",
        entry=ENTRY,
        scratch=None,
        build_dir=tmp_path_factory.mktemp("glub-cpu"),
        inputs=2,
    )
    assert b.state == cudacpu.State.OK, b.text
    return b.harness


def _run(harness: Path, request: bytes) -> subprocess.CompletedProcess[bytes]:
    """The harness as the binding runs it (its sanitizer options: no leak report at exit)."""
    from grader.child.cudacpu_binding import ASAN_OPTIONS, UBSAN_OPTIONS

    env = dict(os.environ, ASAN_OPTIONS=ASAN_OPTIONS, UBSAN_OPTIONS=UBSAN_OPTIONS)
    return subprocess.run([str(harness), "0"], input=request, capture_output=True, env=env)


def _request(xs: list[torch.Tensor], out_elems: int, dtype: int, scalars: list[int], n_in: int | None = None) -> bytes:
    from grader.child.cudacpu_binding import MAGIC

    n_in = len(xs) if n_in is None else n_in
    head = struct.pack("<5q", MAGIC, n_in, 1, len(scalars), dtype)
    bufs = b"".join(struct.pack("<2q", x.numel(), dtype) for x in xs) + struct.pack("<2q", out_elems, dtype)
    return head + bufs + struct.pack(f"<{len(scalars)}q", *scalars) + b"".join(x.numpy().tobytes() for x in xs)


@needs_cxx
def test_the_harness_takes_every_input_of_the_spec_and_names_each_buffer(correct_harness):
    """Two inputs and one output, each its own exact-size allocation (the stderr line gives each one's size), the
    shape arguments in the spec's order (rows, out_cols, x's row stride, dy's), and the result right."""
    x, dy = torch.randn(3, 8), torch.randn(3, 4)
    p = _run(correct_harness, _request([x, dy], 24, 0, [3, 8, 8, 4]))
    assert p.returncode == 0, p.stderr[-2000:]
    line = next(s for s in p.stderr.decode().splitlines() if s.startswith("cudacpu-buffers"))
    sizes = [f.split("+")[1] for f in line.split()[1:]]
    assert [f.split("=")[0] for f in line.split()[1:]] == ["in0", "in1", "out0"] and sizes == ["96", "48", "96"]
    status, code, _, _, launches, _ = struct.unpack_from("<6q", p.stdout)
    assert (status, code) == (0, 0) and launches >= 1
    dx = torch.frombuffer(bytearray(p.stdout[48 : 48 + 96]), dtype=torch.float32).view(3, 8)
    torch.testing.assert_close(dx.double(), _glu_backward(x, dy), **FP32)
    # The inputs come back after the output, as the kernel left them (the grader's input check reads them).
    assert p.stdout[48 + 96 :] == x.numpy().tobytes() + dy.numpy().tobytes()


@needs_cxx
def test_the_harness_refuses_a_request_for_another_signature(correct_harness):
    """Built for two inputs, it refuses a request of one (exit 3, nothing called) instead of calling the entry with
    a missing pointer; a bad magic or dtype is refused the same way."""
    x, dy = torch.randn(2, 4), torch.randn(2, 2)
    for req in (
        _request([x], 8, 0, [2, 4, 4]),  # one input, three shape arguments: another entry's signature
        _request([x, dy], 8, 0, [2, 4, 4, 2])[8:] + b"\0" * 8,  # no magic
        _request([x, dy], 8, 7, [2, 4, 4, 2]),  # no such dtype
        # five shape arguments (another signature), and enough bytes that a harness not checking the counts would
        # read the request through and call the entry with shifted arguments
        _request([x, dy], 8, 0, [2, 4, 4, 2, 0]) + b"\0" * 8,
    ):
        p = _run(correct_harness, req)
        assert p.returncode == 3 and p.stdout == b"", (p.returncode, p.stderr[-500:])


@needs_cxx
def test_the_binding_passes_every_input_and_writes_each_back(correct_harness):
    """CpuRowKernel with the spec's inputs: padded rows (each input its own row stride), all three dtypes, and a
    wrong number of inputs is one clear error."""
    from grader.child.cuda_binding import KernelCallError
    from grader.child.cudacpu_binding import CpuRowKernel

    k = CpuRowKernel(correct_harness, ENTRY, lambda c: c, "h", "s", "glu_backward_cuda.cu", inputs=["x", "dy"])
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(5, 40)[:, :34].to(dtype)  # row stride 40, 34 columns (h = 17)
        dy = torch.randn(5, 20)[:, :17].to(dtype)  # row stride 20
        want = _glu_backward(x, dy)
        got = k(x, dy)
        assert got.shape == (5, 34) and got.dtype == dtype
        tol = FP32 if dtype == torch.float32 else {"atol": 1e-2, "rtol": 1e-2}
        torch.testing.assert_close(got.double(), want, **tol)
    with pytest.raises(KernelCallError, match=r"takes 2 inputs \(x, dy\)"):
        k(torch.randn(2, 4))


# -- the compute-sanitizer harness: the same protocol --------------------------------------------------------------

# The few runtime calls gpu_harness.cu makes, on the host: with them the GPU harness's own logic (request, exact-size
# buffers, the poison, the call, the reply) builds with the CPU layer and runs here under AddressSanitizer.
GPU_SHIM = """
#include <cstdlib>
#include <cstring>
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
inline cudaError_t cudaMalloc(void** p, size_t n) { *p = malloc(n); return *p ? cudaSuccess : cudaErrorInvalidValue; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void* d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
"""


def _cpu_built_gpu_harness(src: Path, bdir: Path) -> Path:
    unit = cudacpu._stage(bdir, src.name, src.read_text())
    (bdir / "gpu_shim.h").write_text(GPU_SHIM)
    common = [*cudacpu.BASE, "-Iinclude", "-I.", "-include", "cudacpu.h", *cudacpu.SANITIZE]
    cmd = [cudacpu.find_compiler() or "g++", *common, f"-DCUDACPU_ENTRY={ENTRY}", *cudacpu.signature_flags(2)]
    cmd += [unit.name, "-include", "gpu_shim.h", "-x", "c++", "gpu_harness.cu", "-o", "gpu_harness_cpu"]
    done = subprocess.run(cmd, cwd=bdir, capture_output=True, text=True)
    if done.returncode != 0 and "sanitize" in done.stderr:
        pytest.skip("the sanitizers' runtimes are not installed")
    assert done.returncode == 0, done.stderr[-3000:]
    return bdir / "gpu_harness_cpu"


@needs_cxx
def test_the_gpu_harness_logic_speaks_the_same_protocol_built_for_the_cpu(tmp_path):
    """gpu_harness.cu, built on the CPU (its few runtime calls shimmed), through the same binding: the correct
    kernel's result, and AddressSanitizer on its exact-size dy for the kernel that reads past it."""
    from grader.child.cudacpu_binding import CpuKernelError, CpuRowKernel

    x, dy = torch.randn(3, 2002), torch.randn(3, 1001)
    good = _cpu_built_gpu_harness(SUBS / "correct" / "glu_backward_cuda.cu", tmp_path / "good")
    k = CpuRowKernel(good, ENTRY, lambda c: c, "h", "s", "glu_backward_cuda.cu", inputs=["x", "dy"])
    torch.testing.assert_close(k(x, dy).double(), _glu_backward(x, dy), **FP32)
    bad = _cpu_built_gpu_harness(SUBS / "overread_dy" / "glu_backward_cuda.cu", tmp_path / "bad")
    k = CpuRowKernel(bad, ENTRY, lambda c: c, "h", "s", "glu_backward_cuda.cu", inputs=["x", "dy"])
    with pytest.raises(CpuKernelError) as e:
        k(x, dy)
    assert e.value.category == "out-of-bounds" and "glu_backward_cuda.cu:34" in str(e.value), str(e.value)


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_the_compute_sanitizer_harness_builds_for_glu_backward_s_signature(tmp_path):
    harness, why = sanitizer.build_harness(
        SUBS / "correct" / "glu_backward_cuda.cu",
        entry=ENTRY,
        arch=None,
        scratch=None,
        timeout_s=180,
        out_name="h",
        build_dir=tmp_path,
        inputs=2,
    )
    assert harness is not None and harness.stat().st_mode & 0o111, why


def test_the_pass_no_longer_skips_a_problem_of_several_inputs(glub, monkeypatch):
    """run_pass reaches the harness build for glu_backward (it used to stop at 'its harness takes one input')."""
    impl = glub.implementations["cuda"]
    seen: dict[str, int] = {}

    def fake_build(src, *, entry, arch, scratch, timeout_s, out_name, build_dir=None, inputs=1):
        seen["inputs"] = inputs
        return None, "stopped here by the test"

    monkeypatch.setattr(sanitizer, "find_compute_sanitizer", lambda: "compute-sanitizer")
    monkeypatch.setattr(sanitizer, "build_harness", fake_build)
    row = sanitizer.run_pass(glub, impl, Path("x.cu"), "x.cu", None, secret=0, scratch=None)  # type: ignore[arg-type]
    assert seen == {"inputs": 2} and "stopped here by the test" in row.output, row.output


def test_signature_flags_follow_the_spec_s_inputs():
    assert cudacpu.signature_flags(2) == ["-DCUDACPU_INPUTS=2", "-DCUDACPU_OUTPUTS=1", "-DCUDACPU_SCALARS=4"]
    with pytest.raises(ValueError):
        cudacpu.signature_flags(0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.skipif(sanitizer.find_compute_sanitizer() is None, reason="compute-sanitizer not found")
@pytest.mark.parametrize("name, state", [("correct", PASSED), ("overread_dy", FAILED)])
def test_gpu_glu_backward_gets_the_compute_sanitizer_pass(name, state, glub, tmp_path):
    """On a GPU the pass runs for a problem of two inputs (it was skipped): clean for the correct kernel, failed for
    the one that reads past dy (every value is wrong there too, so no case is charged twice)."""
    from grader.pipeline import Options, grade

    g = grade(glub, Options(SUBS / name, tmp_path, only=("cuda",), device="cuda", perf=False))
    row = next(t for t in g.tests if t.kind == Kind.SANITIZER)
    assert row.state == state, row.output
    if state == PASSED:
        assert "no errors" in row.output and all(t.state == PASSED for t in _cases(g).values()), row.output
