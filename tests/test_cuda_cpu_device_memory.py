"""The CPU layer keeps device memory away from host code (issue 38, item 4 and class 6): what host code can do with
a device pointer on a GPU is what it can do here.

On a GPU, x and y are pointers to GPU memory: a launcher that reads x (its own loop, memcpy) crashes, and a
__device__ / __constant__ variable read or written by host code is a separate host copy (the kernel never sees the
host's write). The layer ran everything in one address space, so a file doing GLU in its launcher beside one empty
kernel earned every CPU point, signed. Now the harness's buffers and (with g++ on Linux) the device variables are
pages that host code cannot touch between launches (grader/child/cudacpu/device_memory.h); a launch opens them to its
kernel. Each test builds real .cu files with the layer; each fails with the defence taken out (the layer's C++ side
and grader/cuda/cudacpu.py back at their state before it): the host-compute files pass every case there."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from grader.child.cudacpu_binding import CpuKernelError, CpuRowKernel, explain_report, host_access
from grader.cuda import cudacpu
from grader.results import FAILED, PASSED, Kind, Reason

ROOT = Path(__file__).resolve().parent.parent
SUBS = ROOT / "tests" / "data" / "problems" / "glu" / "cuda_cpu"
EXPLOIT = ROOT / "tests" / "exploits" / "cpu_layer_host_compute"
CXX = cudacpu.find_compiler()
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++ or clang++)")
needs_protected_variables = pytest.mark.skipif(
    CXX is None or not cudacpu.device_variables_protected(CXX),
    reason="this compiler's build leaves __device__ variables host memory (clang, or not Linux: docs/SECURITY.md)",
)

# A correct kernel that uses device memory every legal way: a __constant__ table and a __device__ variable that
# kernels alone read and write (one kernel sets the variable, the next reads it), a launcher doing pointer arithmetic
# and comparisons on x and y (an alignment test, a pointer one row in, a pointer compared to null and to another).
LEGAL = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

__constant__ float c_one[2] = {1.0f, 0.0f};
__device__ float g_half_one;

__global__ void set_half_one() { g_half_one = 0.5f * c_one[0]; }

template <typename T>
__global__ void glu_row(const T* xr, T* yr, int64_t h) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= h) return;
    const float a = (float)xr[c], b = (float)xr[h + c];
    yr[c] = (T)(2.0f * g_half_one * a / (1.0f + expf(-b)) + c_one[1]);
}

template <typename T>
static void rows(const void* x, void* y, int64_t rows, int64_t h, int64_t stride, cudaStream_t s) {
    const T* xr = static_cast<const T*>(x);
    T* yr = static_cast<T*>(y);
    const bool aligned = (reinterpret_cast<uintptr_t>(xr) % 16) == 0;  // pointer arithmetic, no dereference
    const unsigned blocks = (unsigned)((h + 255) / 256);
    for (int64_t r = 0; r < rows; ++r, xr += stride, yr += h)
        glu_row<T><<<blocks, 256, 0, s>>>(xr, yr, h);
    (void)aligned;
}

extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows_, int64_t h, int64_t stride, int dtype,
                                cudaStream_t stream) {
    if (x == nullptr || y == nullptr || x == y) return -3;
    if (rows_ == 0 || h == 0) return 0;
    const char* end = static_cast<const char*>(x) + (rows_ - 1) * stride + 2 * h;  // never read
    if (end < static_cast<const char*>(x)) return -3;
    set_half_one<<<1, 1, 0, stream>>>();
    if (dtype == 0) rows<float>(x, y, rows_, h, stride, stream);
    else if (dtype == 1) rows<__half>(x, y, rows_, h, stride, stream);
    else rows<__nv_bfloat16>(x, y, rows_, h, stride, stream);
    return (int)cudaGetLastError();
}
"""

# Host code that reads a __device__ variable a kernel wrote ("did my kernel run?"): on a GPU it reads its own copy, 0.
READS_FLAG = r"""
#include <cuda_runtime.h>
#include <stdint.h>

__device__ int g_done;

__global__ void glu_f32(const float* x, float* y, int64_t rows, int64_t h, int64_t stride) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < h; ++c) y[r * h + c] = x[r * stride + c] / (1.0f + expf(-x[r * stride + h + c]));
    g_done = 1;
}

extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t stride, int dtype,
                                cudaStream_t stream) {
    if (dtype != 0) return -1;
    glu_f32<<<1, 1, 0, stream>>>((const float*)x, (float*)y, rows, h, stride);
    return g_done ? 0 : -5;
}
"""

# Host code that writes a __constant__ variable (instead of cudaMemcpyToSymbol): on a GPU the kernel reads 0.
WRITES_CONSTANT = (
    READS_FLAG.replace("__device__ int g_done;", "__constant__ float c_scale;")
    .replace("g_done = 1;", "y[0] *= c_scale;")
    .replace("    glu_f32<<<", "    c_scale = 1.0f;\n    glu_f32<<<")
    .replace("return g_done ? 0 : -5;", "return 0;")
)

# Host code that writes y (a beginner's zero-fill before the launch).
WRITES_Y = (
    READS_FLAG.replace("__device__ int g_done;", "")
    .replace("    g_done = 1;\n", "")
    .replace("    glu_f32<<<", "    for (int64_t i = 0; i < rows * h; ++i) ((float*)y)[i] = 0.0f;\n    glu_f32<<<")
    .replace("return g_done ? 0 : -5;", "return 0;")
)


def _runnable(problem) -> set[str]:
    return {c.name for c in problem.cases if not c.gpu_only}


def _glu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.glu(x.float(), dim=-1).to(x.dtype)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """build(source text or path) -> a CpuRowKernel for glu_cuda_forward (cached for the module)."""
    cache: dict[str, CpuRowKernel] = {}

    def run(src: str | Path) -> CpuRowKernel:
        key = str(src)
        if key not in cache:
            d = tmp_path_factory.mktemp("devmem")
            if isinstance(src, str):
                (d / "src").mkdir()
                path = d / "src" / "glu_cuda.cu"
                path.write_text(src)
            else:
                path = src
            b = cudacpu.build_cpu(path, entry="glu_cuda_forward", scratch=None, build_dir=d / "build")
            assert b.state == cudacpu.State.OK and b.harness is not None, b.text
            cache[key] = CpuRowKernel(b.harness, "glu_cuda_forward", lambda c: c // 2, "README.md", "Part 2", path.name)
        return cache[key]

    return run


def _fails(k: CpuRowKernel, x: torch.Tensor) -> CpuKernelError:
    with pytest.raises(CpuKernelError) as e:
        k(x)
    return e.value


# -- the entry point's buffers ---------------------------------------------------------------------------------------


@needs_cxx
def test_host_code_that_does_the_glu_through_x_and_y_fails_every_case_with_work_in_it(problem, grade_dir):
    """tests/data/problems/glu/cuda_cpu/host_compute: GLU in the launcher through x and y, one empty kernel launched
    first. Without the defence it earns every CPU point; with it every case with an element fails, naming x."""
    g = grade_dir(SUBS / "host_compute", only=("cuda",))
    cases = {t.extra["case"]: t for t in g.tests if t.part == "cuda" and t.kind == Kind.CORRECTNESS}
    work = {c.name for c in problem.cases if not c.gpu_only and 0 not in c.shape}
    assert work and {n for n, t in cases.items() if t.state == FAILED} == work, {
        n: t.output.splitlines()[0] for n, t in cases.items()
    }
    for n in work:
        first = cases[n].output.splitlines()[0]
        assert cases[n].score == 0 and cases[n].reason == Reason.RAISED, (n, cases[n].reason, first)
        assert first.startswith("host code read device memory at glu_cuda.cu:1"), first  # load(), lines 15-17
        assert "x (the input), byte 0 of its " in first and "crashes (a segfault)" in first, first
    empty = {c.name for c in problem.cases if not c.gpu_only and 0 in c.shape}
    assert empty and all(cases[n].state == PASSED for n in empty)  # no element: nothing read, as on a GPU


@needs_cxx
def test_the_exploit_copying_x_with_memcpy_keeps_no_point_with_work_in_it(problem, grade_dir):
    """tests/exploits/cpu_layer_host_compute: libc's memcpy from x in the launcher, GLU on the host, memcpy to y, an
    empty kernel. The fault in libc is named at the student's line (AddressSanitizer's stack)."""
    g = grade_dir(EXPLOIT, only=("cuda",))
    cases = {t.extra["case"]: t for t in g.tests if t.part == "cuda" and t.kind == Kind.CORRECTNESS}
    earned = {n for n, t in cases.items() if t.score}
    assert cases and earned == {c.name for c in problem.cases if not c.gpu_only and 0 in c.shape}, earned
    assert {n for n, t in cases.items() if t.state == FAILED} == _runnable(problem) - earned
    for n, t in cases.items():
        if n not in earned and t.state == FAILED:
            assert t.output.startswith("host code read device memory at glu_cuda.cu:40 in glu_cuda_forward: x"), (
                t.output.splitlines()[0]
            )


@needs_cxx
def test_host_code_that_writes_y_fails_naming_y(build):
    e = _fails(build(WRITES_Y), torch.randn(3, 16))
    assert e.category == "call" and str(e).startswith("host code wrote device memory at glu_cuda.cu:"), str(e)
    assert "y (the output), byte 0 of its 96" in str(e), str(e)


@needs_cxx
def test_kernels_use_device_memory_freely_and_host_code_may_do_pointer_arithmetic(build):
    """LEGAL: __constant__ and __device__ variables used by kernels only, pointer arithmetic and comparisons on x and
    y in the launcher: every dtype right, every order alike."""
    k = build(LEGAL)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(5, 2 * 37).to(dtype)
        torch.testing.assert_close(k(x), _glu(x))
        xs = torch.randn(4, 100).to(dtype)[:, :64]  # a row stride of 100: a view with padded rows
        torch.testing.assert_close(k(xs), _glu(xs))
    assert k(torch.randn(0, 8)).shape == (0, 4)


@needs_cxx
@pytest.mark.parametrize(
    "design",
    [
        SUBS / "scalar" / "glu_cuda.cu",
        SUBS / "float4_tail" / "glu_cuda.cu",  # checks x's and y's alignment on the host
        ROOT / "tests" / "data" / "problems" / "glu" / "correct" / "cuda_pairs" / "glu_cuda.cu",
        ROOT / "reference" / "glu" / "solution_cuda.cu",
    ],
    ids=lambda p: p.parent.name,
)
def test_correct_kernels_still_compute_glu(design, build):
    k = build(design)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(3, 2 * 1001).to(dtype)
        torch.testing.assert_close(k(x), _glu(x))


@needs_cxx
def test_a_kernel_s_access_past_a_buffer_is_still_out_of_bounds_naming_it(build):
    """The buffers are no longer malloc'd: the guard bands around them are what AddressSanitizer sees."""
    e = _fails(build(SUBS / "oob_write" / "glu_cuda.cu"), torch.randn(3, 2002))
    assert e.category == "out-of-bounds" and "0 bytes past the end of y (the output)" in str(e), str(e)
    assert "glu_cuda.cu:21" in str(e) and "block (" in str(e), str(e)


# -- __device__ and __constant__ variables ---------------------------------------------------------------------------


@needs_protected_variables
def test_host_code_that_writes_a_device_variable_fails_naming_it(build):
    """tests/data/problems/glu/cuda_cpu/host_device_variable: the launcher sets `g_scale`; on a GPU the kernel reads
    0 (wrong values), here the write fails each case with work in it; an empty case passes on both."""
    k = build(SUBS / "host_device_variable" / "glu_cuda.cu")
    e = _fails(k, torch.randn(2, 8))
    assert e.category == "call", str(e)
    assert str(e).startswith(
        "host code wrote the device variable `g_scale` (defined at glu_cuda.cu:11) at glu_cuda.cu:26 in "
        "glu_cuda_forward: on a GPU, host code reaches a separate host copy"
    ), str(e)
    assert k(torch.randn(0, 8)).shape == (0, 4)


@needs_protected_variables
def test_host_code_that_reads_a_device_variable_a_kernel_wrote_fails(build):
    e = _fails(build(READS_FLAG), torch.randn(2, 8))
    assert str(e).startswith(
        "host code read the device variable `g_done` (defined at glu_cuda.cu:5) at glu_cuda.cu:"
    ), e


@needs_protected_variables
def test_host_code_that_writes_a_constant_variable_fails(build):
    e = _fails(build(WRITES_CONSTANT), torch.randn(2, 8))
    assert str(e).startswith("host code wrote the device variable `c_scale`"), str(e)


# -- what the layer does not offer ------------------------------------------------------------------------------------


@needs_cxx
def test_a_launcher_that_copies_with_cuda_memcpy_still_needs_a_gpu(tmp_path):
    """The layer offers no cudaMalloc or cudaMemcpy (so no host-side copy of x it could grant points to: on a GPU the
    kernel check forfeits device<->host copies in the call, tests/exploits/gpu_cuda_host_compute): such a file is
    left to the GPU grade, as before."""
    src = ROOT / "tests" / "exploits" / "gpu_cuda_host_compute" / "glu_cuda.cu"
    b = cudacpu.build_cpu(src, entry="glu_cuda_forward", scratch=None, build_dir=tmp_path)
    assert b.state == cudacpu.State.NEEDS_GPU and "cudaMemcpy" in b.text, b.text


# -- the harness's line, hostile text ------------------------------------------------------------------------------


def test_the_host_access_line_is_parsed_strictly_and_in_linear_time():
    ok = "cudacpu-buffers in0=0x1000+64 out0=0x2000+32\ncudacpu-host-access read in0+8 of 64\n"
    assert host_access(ok, "glu_cuda.cu") == ("read", "in0", "", 8, 64)
    assert host_access("junk cudacpu-host-access read in0+8 of 64\n", "glu_cuda.cu") is None  # not a line start
    for forged in (
        "cudacpu-host-access read in0+8 of ²\n",
        "cudacpu-host-access peek in0+8 of 64\n",
        "cudacpu-host-access read in123+8 of 64\n",
        "cudacpu-host-access read x0+8 of 64\n",
        "cudacpu-host-access read in0+ of 64\n",
        "cudacpu-host-access read device-variable+8 of 64\n",
    ):
        assert host_access(forged, "glu_cuda.cu") is None, forged
    var = (
        "cudacpu-host-access write device-variable+0\n0x5 is located 0 bytes inside of global variable 'g<1>' "
        "defined in '/b/glu_cuda.cu:8:18' (0x5) of size 4\n"
    )
    assert host_access(var, "glu_cuda.cu") == ("wrote", "device-variable", "g<1>` (defined at glu_cuda.cu:8)", 0, 0)
    odd = var.replace("'g<1>'", "'g\";<script>'")  # a name that is not a C++ name is left out
    assert host_access(odd, "glu_cuda.cu") == ("wrote", "device-variable", "", 0, 0)
    line, category = explain_report(ok + "    #0 0x1 in glu_cuda_forward /s/glu_cuda.cu:17\n", "glu_cuda.cu")
    assert category == "call" and line.startswith("host code read device memory at glu_cuda.cu:17 in glu_cuda_forward")
    assert "x (the input), byte 8 of its 64" in line
    for hostile in (
        "cudacpu-host-access " * 20_000,
        "\ncudacpu-host-access" * 20_000,
        "cudacpu-host-access write device-variable+0\n" + "global variable '" * 20_000,
        "x" * 200_000 + "\ncudacpu-host-access read in0+1 of " + "9" * 100_000,
    ):
        t0 = time.monotonic()
        host_access(hostile, "glu_cuda.cu")
        assert time.monotonic() - t0 < 1.0
