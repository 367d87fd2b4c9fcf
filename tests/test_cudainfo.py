"""grader/cuda/cudainfo.py: the CUDA compiler report of CPU grades (global access widths, registers, spills).

The parsers are tested on PTX and ptxas text of the form nvcc 13 writes; with nvcc present, the staff kernel
(16-byte vector path) and a correct scalar design (tests/data/problems/glu/correct/cuda_row_blocks) are told apart.
"""

from __future__ import annotations

import pytest

from grader.cuda import cudainfo
from grader.cuda.build import find_nvcc

PTX = """
.visible .entry _Z4wideILi1EEvPKfPf(
	.param .u64 _Z4wideILi1EEvPKfPf_param_0
)
{
	ld.global.nc.v4.u32 	{%r1, %r2, %r3, %r4}, [%rd4];
	@%p1 ld.global.nc.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd5];
	st.global.cs.v4.u32 	[%rd6], {%r5, %r6, %r7, %r8};
	ld.param.u64 	%rd1, [_Z4wideILi1EEvPKfPf_param_0];
}
.entry _ZN12_GLOBAL__N_16narrowEPK6__halfPS0_(
	.param .u64 p
)
{
	ld.global.nc.b16 	%rs1, [%rd2];
	ld.global.v2.f32 	{%f1, %f2}, [%rd3];
	st.global.b16 	[%rd4], %rs2;
	ld.shared.v4.f32 	{%f3, %f4, %f5, %f6}, [%r1];
}
"""

PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4wideILi1EEvPKfPf' for 'sm_90'
ptxas info    : Function properties for _Z4wideILi1EEvPKfPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 27 registers, used 0 barriers
ptxas info    : Compiling entry function '_ZN12_GLOBAL__N_16narrowEPK6__halfPS0_' for 'sm_90'
ptxas info    : Function properties for _ZN12_GLOBAL__N_16narrowEPK6__halfPS0_
    8 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers
"""


def test_access_widths_per_kernel_from_ptx():
    ks = cudainfo.parse_ptx(PTX)
    assert list(ks) == ["_Z4wideILi1EEvPKfPf", "_ZN12_GLOBAL__N_16narrowEPK6__halfPS0_"]  # .visible or not
    wide, narrow = ks.values()
    assert wide.loads == {16: 2} and wide.stores == {16: 1}  # v4 of 32 bits, predicated or not; ld.param is no load
    assert narrow.loads == {2: 1, 8: 1} and narrow.stores == {2: 1}  # shared-memory loads are not global


def test_registers_and_spills_from_ptxas():
    ks = cudainfo.parse_ptx(PTX)
    cudainfo.parse_ptxas(PTXAS, ks)
    wide, narrow = ks.values()
    assert (wide.registers, wide.spill_bytes) == (27, 0)
    assert (narrow.registers, narrow.spill_bytes) == (255, 12)
    assert "255 registers, 12 bytes spilled" in narrow.line()


def test_short_names_keep_the_template_arguments():
    assert cudainfo._short("void (anonymous namespace)::glu_kernel<float, Vec16<float>, 1, long>(float const*, long)") == \
        "glu_kernel<float, Vec16<float>, 1, long>"


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_the_staff_kernel_has_16_byte_accesses_and_a_scalar_design_gets_the_hint(repo_root):
    text, info = cudainfo.report(repo_root / "reference" / "glu" / "solution_cuda.cu")
    assert info["wide_loads"], text
    assert all(k["registers"] for k in info["kernels"]), text
    assert "hint: no 16-byte" not in text
    text, info = cudainfo.report(repo_root / "tests/data/problems/glu/correct/cuda_row_blocks/glu_cuda.cu")
    assert not info["wide_loads"] and "hint: no 16-byte (v4) global loads" in text, text
    assert "glu_rows" in text, text  # named per kernel (demangled where c++filt is installed)


def test_a_file_that_does_not_compile_gets_a_reason_not_a_crash(tmp_path):
    bad = tmp_path / "glu_cuda.cu"
    bad.write_text("this is not C++\n")
    text, info = cudainfo.report(bad)
    assert text.startswith("could not produce a compiler report") and info == {}
