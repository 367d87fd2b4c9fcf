"""grader/child/interpcheck.py lists every unmasked access site of a launch in one run (issue 29 item 7): a kernel
with two unmasked loads and an unmasked store gets one error naming all three, each with its source line, instead
of one grade per bug. Runs in Triton's interpreter in this process (CPU path, as tests/test_interpcheck.py)."""

from __future__ import annotations

import inspect

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the check patches Triton's interpreter (CPU path)")

triton = pytest.importorskip("triton")
tl = triton.language

from grader.child import interpcheck  # noqa: E402


@triton.jit
def _glu_unmasked(x_ptr, y_ptr, n, h, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)  # SITE a
    b = tl.load(x_ptr + offs + h)  # SITE b
    tl.store(y_ptr + offs, a * tl.sigmoid(b))  # SITE y


def _line(tag: str) -> int:
    src, first = inspect.getsourcelines(_glu_unmasked.fn)
    return first + next(i for i, s in enumerate(src) if f"# SITE {tag}" in s)


@pytest.fixture(scope="module", autouse=True)
def installed():
    assert interpcheck.install(), "this Triton lacks a hook the check needs: update grader/child/interpcheck.py"


def test_every_unmasked_site_in_one_run():
    h = 100
    x = torch.randn(2 * h)
    y = torch.full((h,), float("nan"))
    with pytest.raises(interpcheck.OutOfBounds) as e:
        _glu_unmasked[(4,)](x, y, h, h, BLOCK=64)  # 256 lanes: a, b and y all run past their tensors
    msg = str(e.value)
    first = msg.splitlines()[0]
    assert first.startswith("3 out-of-bounds access sites in one run of _glu_unmasked: load at "), msg
    assert first.count(" at test_interp_sites.py:") == 3, first
    for tag, kind in (("a", "load"), ("b", "load"), ("y", "store")):
        assert f"out-of-bounds {kind} at test_interp_sites.py:{_line(tag)} with no mask: in _glu_unmasked" in msg, msg
    assert "past the end of argument 'y_ptr'" in msg and "past the end of argument 'x_ptr'" in msg, msg
    assert "tl.load(..., mask=offs < n) and tl.store(..., mask=offs < n)" in msg, msg
    # Refused accesses never touch memory: the tail program's store landed nowhere.
    assert y[64:].isnan().all(), y


def test_a_clean_launch_after_a_faulty_one_is_clean():
    h = 128
    x, y = torch.randn(2 * h), torch.empty(h)
    with pytest.raises(interpcheck.OutOfBounds):
        _glu_unmasked[(3,)](x, y, h, h, BLOCK=64)  # a third program past the end
    _glu_unmasked[(2,)](x, y, h, h, BLOCK=64)  # exactly covered: no error carried over
    a, b = x.chunk(2)
    assert torch.allclose(y, a * torch.sigmoid(b))


@triton.jit
def _spin_on_oob(x_ptr, y_ptr):
    # Waits for a flag far past the end of x: the refused load gives 0 forever, so only the refusal cap ends it.
    flag = tl.load(x_ptr + 1000)
    while flag == 0:
        flag = tl.load(x_ptr + 1000)
    tl.store(y_ptr, flag)


def test_a_loop_on_a_refused_load_is_stopped_not_hung():
    x, y = torch.zeros(4), torch.zeros(1)
    with pytest.raises(interpcheck.OutOfBounds, match=r"out-of-bounds load at .*: in _spin_on_oob \(program"):
        _spin_on_oob[(1,)](x, y)
