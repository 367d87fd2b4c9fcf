"""grader/child/interpcheck.py: on the CPU path, out-of-bounds lanes fail loudly, before they touch memory.

These tests run kernels in this process, in Triton's interpreter (conftest sets TRITON_INTERPRET=1 on machines
without a GPU), with the check installed as the CPU workers install it. End to end,
tests/data/problems/glu/broken/unmasked_store covers the graded path (tests/test_correctness.py).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the check patches Triton's interpreter (CPU path)")

triton = pytest.importorskip("triton")
tl = triton.language

from grader.child import interpcheck  # noqa: E402


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr, MASK_STORE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m if MASK_LOAD else None)
    tl.store(y_ptr + offs, v, mask=m if MASK_STORE else None)


@pytest.fixture(scope="module", autouse=True)
def installed():
    assert interpcheck.install(), "this Triton lacks a hook the check needs: update grader/child/interpcheck.py"


def _run(n: int, mask_load: bool, mask_store: bool, x: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.arange(n, dtype=torch.float32) if x is None else x
    y = torch.full((n,), float("nan"))
    _copy[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64, MASK_LOAD=mask_load, MASK_STORE=mask_store)
    return x, y


def test_masked_lanes_are_never_checked():
    x, y = _run(100, True, True)
    assert torch.equal(x, y)


def test_an_unmasked_tail_store_is_refused_before_it_writes():
    x = torch.arange(100, dtype=torch.float32)
    y = torch.full((100,), float("nan"))
    with pytest.raises(Exception, match=r"out-of-bounds store at test_interpcheck.py:\d+, which has no mask: mask it") as e:
        _copy[(2,)](x, y, 100, BLOCK=64, MASK_LOAD=True, MASK_STORE=False)
    assert "In _copy (program (1, 0, 0)), 28 of 64 active lanes write" in str(e.value)
    assert "past the end of argument 'y_ptr'" in str(e.value)
    # Program 0 stored its 64 lanes; program 1's store was refused as a whole, before any of it landed.
    assert torch.equal(y[:64], x[:64]) and y[64:].isnan().all(), y


def test_an_unmasked_tail_load_is_refused():
    with pytest.raises(Exception, match=r"out-of-bounds load at .*no mask.* In _copy .*past the end of argument 'x_ptr'"):
        _run(100, False, True)


def test_reading_the_padding_of_a_strided_view_is_real_memory_and_allowed():
    # x is a view into a larger buffer: lanes past the view's end but inside its storage are not a fault.
    big = torch.arange(128, dtype=torch.float32)
    _, y = _run(100, False, True, x=big[:100])
    assert torch.equal(y, big[:100])


def test_every_tensor_of_a_tuple_argument_counts_as_inside():
    x, y = torch.arange(8.0), torch.zeros(8)
    assert [r[0] for r in interpcheck._ranges_of(["xs", "n"], [(x, y), 8], {})] == ["xs[0]", "xs[1]"]
