"""The handout's FAQ quotes the grader's messages (issue 40 item 6): each quoted OutOfBounds message is matched, in
order, fragment by fragment, against what the bounds check (grader/child/interpcheck.py) prints now for the corpus's
broken kernels of that kind; and the handout's words on empty grids match what the pinned Triton does.
CPU path: Triton's interpreter, in this process (as tests/test_interpcheck.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the check patches Triton's interpreter (CPU path)")

triton = pytest.importorskip("triton")
tl = triton.language

from grader.child import interpcheck  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HANDOUT = ROOT / "assignment" / "README.md"
DATA = ROOT / "tests" / "data" / "problems"
QUOTE = re.compile(r"\*\*`(OutOfBounds: [^`]*)`\*\*")


@pytest.fixture(scope="module", autouse=True)
def installed():
    assert interpcheck.install(), "this Triton lacks a hook the check needs: update grader/child/interpcheck.py"


_MESSAGES = r"""
import importlib.util, json, sys
from pathlib import Path
import torch
from grader.child import interpcheck
assert interpcheck.install()
DATA = Path(sys.argv[1])


def module(problem, sub):
    f = next((DATA / problem / "broken" / sub).glob("*_triton.py"))
    spec = importlib.util.spec_from_file_location(f"faq_{problem}_{sub}", f)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def raised(call):
    try:
        call()
    except interpcheck.OutOfBounds as e:
        return "OutOfBounds: " + str(e).splitlines()[0]
    raise AssertionError("no OutOfBounds")


unmasked = module("glu", "unmasked_store")
out = [raised(lambda: unmasked.glu_triton(torch.randn(3, 2002)))]
x, dy = torch.randn(33, 224)[:, :200], torch.randn(33, 124)[:, :100]
spacer = torch.zeros(1 << 14)  # past dy's end: no argument of the kernel
bwd = module("glu_backward", "dy_with_x_stride")
out.append(raised(lambda: bwd.glu_backward_triton(x, dy)))
print(json.dumps(out))
"""


def _messages() -> list[str]:
    """The first line of each message the FAQ explains, from the corpus's kernels on strided_rows-like inputs. In a
    fresh interpreter: which addresses lie outside every argument depends on where the allocator put x, dy, dx and
    the spacer, and a heap shaped by the tests run before (the full tier) once turned the wrong-address message into
    another one."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _MESSAGES, str(DATA)], capture_output=True, text=True, env=env,
                       timeout=300, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return list(json.loads(r.stdout.strip().splitlines()[-1]))


def _pattern(quote: str) -> re.Pattern[str]:
    """The quote as a pattern: its '...' elisions match anything, its numbers any number, its line breaks a space."""
    parts = [re.sub(r"\d+", lambda _: r"\d+", re.escape(p.strip())) for p in " ".join(quote.split()).split("...")]
    return re.compile(".*".join(p for p in parts if p))


def test_every_faq_out_of_bounds_quote_is_a_message_the_grader_prints():
    quotes = QUOTE.findall(HANDOUT.read_text(encoding="utf-8"))
    assert len(quotes) >= 2, "the FAQ quotes the unmasked and the wrong-address OutOfBounds messages"
    messages = _messages()
    for q in quotes:
        p = _pattern(q)
        assert any(p.match(m) for m in messages), (q, messages)
    # Each kind of message the check prints is explained.
    for m in messages:
        assert any(_pattern(q).match(m) for q in quotes), m


@triton.jit
def _one(y_ptr):
    tl.store(y_ptr, 1.0)


def test_an_empty_grid_launches_nothing_as_the_handout_says():
    y = torch.zeros(1)
    _one[(0,)](y)  # the pinned Triton: no error (its CUDA driver skips a launch of 0 programs too)
    assert y.item() == 0.0
    stubs = [HANDOUT, *sorted((ROOT / "assignment").glob("*/*.py")), *sorted((ROOT / "assignment").glob("*/*.md"))]
    said = [p.name for p in stubs if "0 programs is an error" in " ".join(p.read_text(encoding="utf-8").split())]
    assert not said, said


def test_glu_backward_warns_of_no_cancellation_that_no_case_can_catch():
    # db = dy a s (1 - s) with 1 - s from a rounded s is off by at most |dy a| 2^-24, which is what PyTorch's own
    # aten::glu_backward (the spec's tolerance baseline) does: every fp32 case passes it, so a handout warning that
    # it loses points is false (a case that failed it would fail PyTorch too). The words say it is fine.
    from grader.problem import operands
    from grader.problem.inputs import make_input
    from grader.problem.spec import load_problem

    problem = load_problem(ROOT / "reference" / "glu_backward" / "spec.yaml")
    tol = problem.tolerances["float32"]
    assert tol.rtol is not None
    for case in problem.cases:
        if case.dtype != "float32" or case.gpu_only or 0 in case.shape:
            continue
        x = make_input(case, "cpu", secret=0)
        (dy,) = operands.extra_inputs(problem, case, "cpu", 0)
        a, b = x.chunk(2, dim=-1)
        s = torch.sigmoid(b)
        naive = (dy * a * s * (1 - s)).double()
        a64, s64 = a.double(), torch.sigmoid(b.double())
        truth = dy.double() * a64 * s64 * (1 - s64)
        ok = (naive - truth).abs() <= tol.atol + tol.rtol * truth.abs()
        finite = torch.isfinite(truth)
        assert bool(ok[finite].all()), case.name
    words = [ROOT / "assignment" / "glu_backward" / n for n in ("README.md", "glu_backward_triton.py")]
    words.append(ROOT / "reference" / "glu_backward" / "hints.yaml")
    assert not [p.name for p in words if "cancels" in p.read_text(encoding="utf-8")]
