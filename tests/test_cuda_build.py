"""grader/cuda/build.py and grader/child/cuda_binding.py: nvcc builds, the build cache, error reports, and the binding's
messages. Needs nvcc (not a GPU); builds go to a temporary cache directory. About 4 nvcc runs in all."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from grader.child.cuda_binding import CudaRowKernel, KernelCallError, describe_return_code
from grader.cuda.build import BuildResult, build_cuda, error_lines, find_nvcc, nvcc_flags

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "assignment" / "glu" / "glu_cuda.cu"
STAFF = ROOT / "reference" / "glu" / "solution_cuda.cu"
SYMBOL = "glu_cuda_forward"
HANDOUT = "assignment/README.md"
SECTION = "Part 2: the CUDA kernel"

requires_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found (CUDA toolkit not installed)")


def exports_symbol(lib: Path, symbol: str) -> bool:
    """Prefer loading the library (cudart is linked statically, so this needs no GPU driver); fall back to nm."""
    try:
        return hasattr(ctypes.CDLL(str(lib), mode=os.RTLD_LOCAL), symbol)
    except OSError:
        nm = shutil.which("nm")
        if nm is None:
            pytest.skip("cannot load the library and nm is not installed")
        out = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
        return any(line.split()[-1] == symbol for line in out.splitlines() if line.strip())


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(scope="module")
def stub_build(cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult]:
    src = tmp_path_factory.mktemp("stub") / "glu_cuda.cu"
    shutil.copyfile(STUB, src)
    return src, build_cuda(src, cache_dir=cache_dir)


@pytest.mark.nvcc
@requires_nvcc
@pytest.mark.parametrize("which", ["stub", "staff"])
def test_builds_and_exports_symbol(which: str, stub_build: tuple[Path, BuildResult], cache_dir: Path) -> None:
    res = stub_build[1] if which == "stub" else build_cuda(STAFF, cache_dir=cache_dir)
    assert res.ok, res.log
    assert res.lib is not None and res.lib.is_file() and res.lib.parent == cache_dir
    assert exports_symbol(res.lib, SYMBOL)
    assert not list(cache_dir.glob("*.tmp.so")), "temporary build files left behind"
    assert res.command[0] == "nvcc" and "-lineinfo" in res.command


@pytest.mark.nvcc
@requires_nvcc
def test_same_source_is_cached_and_one_byte_rebuilds(stub_build: tuple[Path, BuildResult], cache_dir: Path) -> None:
    src, first = stub_build
    assert first.ok, first.log
    built = first.lib.stat().st_mtime_ns
    again = build_cuda(src, cache_dir=cache_dir)
    assert again.ok and again.cached and again.lib == first.lib
    assert again.lib.stat().st_mtime_ns == built  # the cached file itself, not rebuilt (no wall-clock bound)
    # Same bytes under another name and directory: same key.
    other = src.parent / "copy" / "other_name.cu"
    other.parent.mkdir()
    shutil.copyfile(src, other)
    assert build_cuda(other, cache_dir=cache_dir).lib == first.lib

    changed = src.parent / "changed" / "glu_cuda.cu"
    changed.parent.mkdir()
    changed.write_bytes(src.read_bytes() + b"\n")
    rebuilt = build_cuda(changed, cache_dir=cache_dir)
    assert rebuilt.ok, rebuilt.log
    assert not rebuilt.cached and rebuilt.lib != first.lib and rebuilt.lib is not None and rebuilt.lib.is_file()
    assert first.lib is not None and first.lib.is_file()  # the old library is untouched


@pytest.mark.nvcc
@requires_nvcc
def test_syntax_error_reports_relative_lines(tmp_path: Path, cache_dir: Path) -> None:
    src = tmp_path / "glu_cuda.cu"
    text = STUB.read_text()
    marker = "const int threads = 256;"
    assert marker in text
    src.write_text(text.replace(marker, "const int threads = 256  // missing semicolon\n    int oops = ;"))
    res = build_cuda(src, cache_dir=cache_dir)
    assert not res.ok and res.lib is None and not res.cached
    errs = error_lines(res.log)
    assert errs and any(re.match(r"glu_cuda\.cu\(\d+\): error", e) for e in errs), res.log
    for absolute in {str(tmp_path), str(cache_dir), tempfile.gettempdir() + "/", str(ROOT)}:
        assert absolute not in res.log, f"machine path {absolute!r} in the student-facing log"
        assert all(absolute not in part for part in res.command)
    assert not list(cache_dir.glob("*.tmp.so")), "failed build left a temporary file"


@pytest.mark.nvcc
@requires_nvcc
def test_binding_loads_library_and_rejects_cpu_tensors(stub_build: tuple[Path, BuildResult]) -> None:
    import torch

    lib = stub_build[1].lib
    assert lib is not None
    try:
        kernel = CudaRowKernel(lib, SYMBOL, lambda cols: cols // 2, HANDOUT, SECTION)
    except KernelCallError as e:
        pytest.skip(f"library does not load on this machine: {e}")
    with pytest.raises(KernelCallError, match="needs a CUDA tensor"):
        kernel(torch.ones(2, 4))
    with pytest.raises(KernelCallError, match=r"symbol 'no_such_symbol' not found.*extern \"C\""):
        CudaRowKernel(lib, "no_such_symbol", lambda cols: cols // 2, HANDOUT, SECTION)


def test_nvcc_flags() -> None:
    assert nvcc_flags("sm_80")[-1] == "-arch=sm_80"
    assert nvcc_flags(None)[-1] == "-arch=sm_90"
    assert {"-O3", "-std=c++17", "-shared", "-lineinfo"} <= set(nvcc_flags(None))


def test_missing_nvcc_is_a_result_not_an_exception(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("grader.cuda.build.find_nvcc", lambda: None)
    src = tmp_path / "glu_cuda.cu"
    src.write_text("int main() {}\n")
    res = build_cuda(src, cache_dir=tmp_path / "cache")
    assert not res.ok and res.lib is None
    assert res.log == "nvcc not found: install the CUDA toolkit or set CUDA_HOME"


def test_error_lines_picks_errors_and_source_context() -> None:
    log = "\n".join(
        [
            "glu_cuda.cu(42): error: expected a \";\"",
            "      int oops = ;",
            "                 ^",
            "",
            "glu_cuda.cu(7): warning #177-D: variable \"z\" was declared but never referenced",
            "glu_cuda.cu(50): error: identifier \"q\" is undefined",
            "1 error detected in the compilation of \"glu_cuda.cu\".",
        ]
    )
    assert error_lines(log) == [
        "glu_cuda.cu(42): error: expected a \";\"",
        "      int oops = ;",
        "                 ^",
        "glu_cuda.cu(50): error: identifier \"q\" is undefined",
    ]
    assert error_lines(log, limit=1) == ["glu_cuda.cu(42): error: expected a \";\""]


def test_not_implemented_message_names_the_handout_section() -> None:
    msg = describe_return_code(-2, SYMBOL, HANDOUT, SECTION)
    assert msg == (
        "glu_cuda_forward returned ERR_NOT_IMPLEMENTED (-2): not implemented yet; "
        "see assignment/README.md, section 'Part 2: the CUDA kernel'"
    )
    assert "\n" not in msg


def test_cuda_error_codes_are_named() -> None:
    assert "cudaErrorNoKernelImageForDevice (209)" in describe_return_code(209, SYMBOL, HANDOUT, SECTION)
    assert "cudaErrorX (5)" in describe_return_code(5, SYMBOL, HANDOUT, SECTION, lambda c: "cudaErrorX")
    assert "cudaError_t 12345" in describe_return_code(12345, SYMBOL, HANDOUT, SECTION, lambda c: None)
    assert "ERR_ARGS (-3)" in describe_return_code(-3, SYMBOL, HANDOUT, SECTION)
    assert "ERR_DTYPE (-1)" in describe_return_code(-1, SYMBOL, HANDOUT, SECTION)
