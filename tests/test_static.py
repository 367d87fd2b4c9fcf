"""Static warnings (grader/correctness/static.py): legal code that is how graders get fooled is pointed out, with the reason;
ordinary kernel code, the staff solutions and the stubs get none. Warnings never change the score."""

from __future__ import annotations

import pytest

from grader.correctness import static


def whats(src: str) -> list[str]:
    return [w.what for w in static.scan_python(src)]


@pytest.mark.parametrize("path,kind", [
    ("reference/glu/solution_triton.py", "triton"),
    ("reference/glu/solution_cuda.cu", "cuda"),
    ("assignment/glu/glu_triton.py", "triton"),
    ("assignment/glu/glu_cuda.cu", "cuda"),
])
def test_staff_solutions_and_stubs_get_no_warning(path, kind, repo_root):
    assert static.scan(repo_root / path, kind) == []


ORDINARY = '''
import torch
import triton
import triton.language as tl
"""The grader calls glu_triton; see the grader's README."""

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * tl.sigmoid(x), mask=offs < n)

def glu_triton(x):
    h = x.shape[-1] // 2
    y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    kind = getattr(x, "dtype")
    k[(triton.cdiv(y.numel(), 1024),)](x, y, y.numel(), BLOCK=1024)
    return y
'''


def test_ordinary_kernel_code_gets_no_warning():
    assert whats(ORDINARY) == []


@pytest.mark.parametrize("src,what", [
    ("import sys\nw = sys.modules.get('x')\n", "uses sys.modules"),
    ("import sys\nw = sys.modules['x']\n", "uses sys.modules"),
    ("import importlib\n", "imports importlib"),
    ("m = __import__('x')\n", "uses __import__"),
    ("from grader import timing\n", "imports grader"),
    ("import grader.child.worker\n", "imports grader.child.worker"),
    ("name = 'grader.child.timing'\n", "names 'grader.child.timing'"),
    ("cls = getattr(mod, 'Timer')\n", "names 'Timer'"),
    ("f = getattr(torch.nn.functional, 'g' + 'lu')\n", "getattr with a computed name"),
    ("setattr(obj, name, value)\n", "setattr with a computed name"),
])
def test_reaching_for_the_graders_internals_is_warned(src, what):
    assert what in whats(src)


def test_one_use_is_one_warning():
    """sys.modules.get(...) is one use of sys.modules, not two; two different names on a line are two."""
    assert whats("import sys\nw = sys.modules.get('x')\n") == ["uses sys.modules"]
    assert whats("y = F.glu(a) + torch.sigmoid(b)\n") == ["uses F.glu", "uses torch.sigmoid"]


@pytest.mark.parametrize("exploit", ["patch_worker_kernels", "gpu_timer_forgery"])
def test_exploits_that_rewrite_the_grader_are_warned(exploit, repo_root):
    warnings = static.scan(repo_root / "tests" / "exploits" / exploit / "glu_triton.py", "triton")
    assert any(w.why == static.WHY["grader internals"] for w in warnings), [w.text() for w in warnings]
