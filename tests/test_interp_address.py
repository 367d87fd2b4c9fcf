"""An out-of-bounds access whose lanes are inside the mask is a wrong address, not a missing mask (issue 40 item 3).

grader/child/interpcheck.py tells the two apart (the interpreter's unmasked tl.load/tl.store come through their own
builder calls), names the pointer and the integer argument of its offset (the kernel's source, read with `ast`) by
comparing its value with the tensors' real row strides, and the worker ends the message at no launch line: the
message names the load/store line itself. In-process kernels (CPU path, as tests/test_interpcheck.py), then the two
broken submissions of the corpus graded end to end (slow)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the check patches Triton's interpreter (CPU path)")

triton = pytest.importorskip("triton")
tl = triton.language

from grader.child import interpcheck, worker  # noqa: E402
from grader.results import Reason  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "problems"


@triton.jit
def _rows(x_ptr, y_ptr, n, h, row_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // h
    col = offs - row * h
    a_off = row * row_stride + col
    a = tl.load(x_ptr + a_off, mask=mask)  # SITE a
    tl.store(y_ptr + offs, a, mask=mask)


@triton.jit
def _bwd(x_ptr, dy_ptr, out_ptr, n, h, x_stride, dy_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // h
    col = offs - row * h
    a = tl.load(x_ptr + row * x_stride + col, mask=mask)
    g = tl.load(dy_ptr + row * x_stride + col, mask=mask)  # SITE g
    tl.store(out_ptr + offs, a * g, mask=mask)


def _line(kernel, tag: str) -> int:
    src, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, s in enumerate(src) if f"# SITE {tag}" in s)


@pytest.fixture(scope="module", autouse=True)
def installed():
    assert interpcheck.install(), "this Triton lacks a hook the check needs: update grader/child/interpcheck.py"


def _stride_in_bytes() -> str:
    x = torch.randn(8, 24)[:, :16]  # rows padded to 24 elements, 96 bytes
    y = torch.full((64,), float("nan"))
    spacer = torch.zeros(4096)  # noqa: F841 -- what lies past x's end is no argument of the kernel
    with pytest.raises(interpcheck.OutOfBounds) as e:
        _rows[(1,)](x, y, 64, 8, x.stride(0) * x.element_size(), BLOCK=64)
    return str(e.value)


def test_a_stride_in_bytes_is_a_wrong_address_not_a_missing_mask():
    msg = _stride_in_bytes()
    first = msg.splitlines()[0]
    assert first.startswith(
        f"out-of-bounds load at test_interp_address.py:{_line(_rows, 'a')}, its lanes inside the mask: the address is "
        "wrong, not the mask. row_stride = 96 is x_ptr's row stride in bytes (24 x 4): Triton offsets count elements."
    ), msg
    assert "mask it" not in msg and "mask=" not in msg, msg
    assert "lanes inside the mask read" in msg, msg


def test_another_tensors_stride_is_named():
    x = torch.randn(4, 40)[:, :32]  # x_stride 40
    dy = torch.randn(4, 16)  # its own row stride: 16
    spacer = torch.zeros(4096)  # noqa: F841 -- past dy's end: no argument of the kernel
    out = torch.empty(64)
    with pytest.raises(interpcheck.OutOfBounds) as e:
        _bwd[(1,)](x, dy, out, 64, 16, 40, 16, BLOCK=64)
    msg = str(e.value)
    assert msg.startswith(f"out-of-bounds load at test_interp_address.py:{_line(_bwd, 'g')}, its lanes inside the mask"), msg
    assert "dy_ptr's offset uses x_stride = 40, the row stride of x_ptr; dy_ptr's own is 16" in msg, msg
    assert "past the end of argument 'dy_ptr'" in msg and "mask it" not in msg, msg


def test_unreadable_source_still_says_inside_the_mask(monkeypatch):
    # The source is the student's: past the size cap it is not parsed, and the words stay generic but true.
    monkeypatch.setattr(interpcheck, "SOURCE_CAP", 16)
    interpcheck._kernel_tree.cache_clear()
    interpcheck._pointer_args.cache_clear()
    try:
        msg = _stride_in_bytes()
    finally:
        interpcheck._kernel_tree.cache_clear()
        interpcheck._pointer_args.cache_clear()
    assert "its lanes inside the mask: the address is wrong, not the mask. check x_ptr's offset" in msg, msg
    assert "x_ptr's row stride is 24 elements" in msg and "mask it" not in msg, msg


def test_the_message_ends_at_no_launch_line():
    # The worker appends ', at FILE line N' (the deepest frame of the student's file) to an error; for the bounds
    # check that frame is the launch, raised after the kernel ran: its message names the access lines instead.
    def launch() -> None:
        raise interpcheck.OutOfBounds("out-of-bounds load at k.py:7, ...")

    def other() -> None:
        raise ValueError("x")

    for fn, at in ((launch, False), (other, True)):
        try:
            fn()
        except Exception as e:
            line, _, _ = worker.explain(e, "", __file__)
            assert (f", at {Path(__file__).name} line " in line) == at, line


# -- end to end: the corpus's two wrong-address submissions ----------------------------------------------------


def _grade(problem: str, sub: str, case: str, tmp_path: Path):
    from grader.pipeline import Options, grade
    from grader.problem.spec import load_problem

    root = Path(__file__).resolve().parent.parent
    opts = Options(submission=DATA / problem / "broken" / sub, out=tmp_path, device="cpu", only=("triton",),
                   perf=False, cases=(case,))
    g = grade(load_problem(root / "reference" / problem / "spec.yaml"), opts)
    return next(t for t in g.tests if t.extra.get("case") == case)


def _bug_line(problem: str, sub: str, needle: str) -> int:
    f = next((DATA / problem / "broken" / sub).glob("*_triton.py"))
    return next(i for i, s in enumerate(f.read_text().splitlines(), 1) if needle in s)


@pytest.mark.slow  # a partial grade: ~10 s
def test_graded_stride_in_bytes(tmp_path):
    t = _grade("glu", "stride_in_bytes", "strided_rows/float32", tmp_path)
    first = t.output.splitlines()[0]
    a = _bug_line("glu", "stride_in_bytes", "a = tl.load")
    assert t.reason == Reason.RAISED and first.startswith("OutOfBounds: 2 out-of-bounds access sites"), t.output
    assert f"load at glu_triton.py:{a}," in first and f"load at glu_triton.py:{a + 1}." in first, first
    assert "row_stride = 896 is x_ptr's row stride in bytes (224 x 4)" in first, first
    assert "Their lanes are inside the mask: the address is wrong, not the mask." in first, first
    assert "mask" not in first.split("not the mask")[1] and " line " not in first, first


@pytest.mark.slow  # a partial grade: ~15 s
def test_graded_dy_read_with_x_stride(tmp_path):
    t = _grade("glu_backward", "dy_with_x_stride", "strided_rows/float32", tmp_path)
    first = t.output.splitlines()[0]
    g = _bug_line("glu_backward", "dy_with_x_stride", "BUG")
    assert first.startswith(f"OutOfBounds: out-of-bounds load at glu_backward_triton.py:{g}, its lanes inside"), first
    assert "dy_ptr's offset uses x_stride = 224, the row stride of x_ptr; dy_ptr's own is 124" in first, first
    assert "mask it" not in t.output and " line " not in first, first
