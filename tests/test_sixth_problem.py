"""Adding a problem is a folder under reference/ and one under assignment/, and nothing else (issue 31, "Done when").

The test builds a throwaway course tree in a temporary folder: this repository's grader/, reference/ and assignment/
copied byte for byte, plus a sixth problem that exists nowhere else, SiLU (y = x * sigmoid(x), elementwise):
reference/silu/ (spec.yaml, reference.py with the float64 truth and two baselines, the staff Triton solution,
hints.yaml) and assignment/silu/ (the stub and its handout). The copied grader then grades it on the CPU (Triton's
interpreter) through its command line, as a TA would: the stub loses every correctness point, pointing at its
handout, with the problem's own words (hints.yaml) in the report; the staff solution earns every point a CPU can
grade. Nothing of the grader is edited, so if adding a problem ever needs a grader change (a table of problem names,
a special case for a layout), this test fails.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("grader", "reference", "assignment")

SPEC = """\
name: silu
title: "SiLU: x * sigmoid(x), elementwise"
handout: assignment/silu/README.md
reference: reference.py
out_cols: same
implementations:
  triton:
    kind: triton
    file: silu_triton.py
    entry: silu_triton
    staff: solution_triton.py
    handout_section: "Part 1: the Triton kernel"
baselines:
  manual: manual
  eager: eager
tolerances:
  float32: {rtol: 1.0e-5, atol: 1.0e-6}
  float16: {eager_factor: 2.0, atol: 1.0e-5}
  bfloat16: {eager_factor: 2.0, atol: 1.0e-5}
correctness:
  points_per_case: 1
  seed: 31
  cases:
    - {name: tiny_1x1, shape: [1, 1], dtypes: [float32, bfloat16]}
    - {name: odd_1001, shape: [3, 1001], dtypes: [float32, float16]}
    - {name: strided_rows, shape: [9, 200], pad: 24, dtypes: [float32]}
    - {name: zero_rows, shape: [0, 64], dtypes: [float32]}
    - {name: saturating, shape: [5, 300], dist: saturating, dtypes: [float32]}
    - {name: inf_nan, shape: [4, 512], dist: special, dtypes: [float32]}
    - {name: medium, shape: [4096, 8192], dtypes: [float32], gpu_only: true}
"""

REFERENCE = '''\
"""SiLU: the truth (float64) and the baselines."""

import torch
import torch.nn.functional as F


def truth(x):
    x64 = x.to(torch.float64)
    return x64 * torch.sigmoid(x64)


def manual(x):
    return x * torch.sigmoid(x)


def eager(x):
    return F.silu(x)
'''

KERNEL = """\
import torch
import triton
import triton.language as tl


@triton.jit
def silu_kernel(x_ptr, y_ptr, n, cols, row_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // cols
    x = tl.load(x_ptr + row * row_stride + (offs - row * cols), mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x / (1.0 + tl.exp(-x))).to(y_ptr.dtype.element_ty), mask=mask)


def silu_triton(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    x2 = x.view(-1, cols)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x2.shape[0] * cols
    if n:
        silu_kernel[(triton.cdiv(n, 1024),)](x2, y, n, cols, x2.stride(0), BLOCK=1024)
    return y
"""

STUB = '''\
"""Part 1: SiLU in Triton. See assignment/silu/README.md, "Part 1: the Triton kernel"."""

import torch


def silu_triton(x: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("silu_triton is not implemented yet: see assignment/silu/README.md")
'''

HANDOUT = """\
# Problem: SiLU

## Part 1: the Triton kernel

`assignment/silu/silu_triton.py`, `silu_triton(x)`: y = x * sigmoid(x), any shape, padded rows, fp32 math.
"""

WORDS = "SiLU-only advice: replace the NotImplementedError with a kernel that computes x / (1 + exp(-x))."
HINTS = f"""\
reason:
  not implemented: "{WORDS}"
  wrong values: "Compare with x * sigmoid(x), computed in fp32."
dist:
  saturating: "exp(-x) overflows for x below about -88: x / (1 + exp(-x)) is then -0, as it should be."
  special: "silu(-inf) is NaN (-inf * 0), silu(+inf) is +inf, NaN stays NaN."
dtype:
  bfloat16: "Load, compute in fp32, and cast once on store."
perf:
  roofline: "SiLU is memory-bound: one read and one write per element."
"""


def _course_tree(tmp: Path) -> Path:
    """A copy of this repository's grader and problems, plus reference/silu/ and assignment/silu/."""
    tree = tmp / "course"
    for top in COPIED:
        shutil.copytree(ROOT / top, tree / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tree / "pyproject.toml")  # a checkout: `grade` grades its assignment/
    ref, stubs = tree / "reference" / "silu", tree / "assignment" / "silu"
    ref.mkdir()
    stubs.mkdir()
    for path, text in (
        (ref / "spec.yaml", SPEC),
        (ref / "reference.py", REFERENCE),
        (ref / "solution_triton.py", KERNEL),
        (ref / "hints.yaml", HINTS),
        (stubs / "silu_triton.py", STUB),
        (stubs / "README.md", HANDOUT),
    ):
        path.write_text(text, encoding="utf-8")
    return tree


def _same_tree(a: Path, b: Path) -> bool:
    """Whether two folders hold the same files with the same bytes (caches left out)."""
    c = filecmp.dircmp(a, b, ignore=["__pycache__"])
    if c.left_only or c.right_only or c.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, c.common_files, shallow=False)
    return not mismatch and not errors and all(_same_tree(a / d, b / d) for d in c.common_dirs)


def _grade(tree: Path, out: Path, *extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    cmd = [sys.executable, "-m", "grader", "grade", "--problem", "silu", "--device", "cpu", "--no-perf"]
    r = subprocess.run(
        [*cmd, "--out", str(out), *extra], cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def _correctness(results: dict) -> tuple[list[dict], list[dict]]:
    """The correctness rows graded here, and those left for a GPU (the gpu_only case: 0 points here, 'pending')."""
    rows = [t for t in results["tests"] if "/ correctness /" in t["name"]]
    return [t for t in rows if t["max_score"] > 0], [t for t in rows if t["max_score"] == 0]


@pytest.mark.slow  # two CLI grades on the CPU: ~15-25 s on 2 cores
def test_a_sixth_problem_is_two_folders_and_grades_with_the_grader_unchanged(tmp_path):
    tree = _course_tree(tmp_path)
    # Nothing but the two new folders differs from this repository: the grader is byte for byte the same.
    assert _same_tree(ROOT / "grader", tree / "grader")
    for top in ("reference", "assignment"):
        new = {p.name for p in (tree / top).iterdir()} - {p.name for p in (ROOT / top).iterdir()}
        assert new == {"silu"}, (top, new)

    # The stub, from the problem's own folder (the default submission: its spec's stubs, assignment/silu/).
    stub = _grade(tree, tmp_path / "stub")
    assert stub["extra_data"]["problem"] == "silu"
    assert Path(stub["extra_data"]["submission"]).resolve() == (tree / "assignment" / "silu").resolve()
    cpu, later = _correctness(stub)
    assert len(cpu) == 8 and all(t["status"] == "failed" and t["score"] == 0 for t in cpu), cpu
    assert [t["extra_data"]["case"] for t in later] == ["medium/float32"] and "on a GPU" in later[0]["output"]
    assert stub["score"] == 0 and stub["max_score"] == 9
    assert any("assignment/silu/README.md" in t["output"] for t in cpu), cpu[0]["output"]
    # The problem's words reach the student's report (reference/silu/hints.yaml, validated when the spec loaded).
    assert WORDS in (tmp_path / "stub" / "report.md").read_text(encoding="utf-8")

    # The staff solution: every point a CPU can grade (the gpu_only case is left for a GPU).
    staff = _grade(tree, tmp_path / "staff", "--staff")
    runnable, later = _correctness(staff)
    assert len(runnable) == 8 and [t["extra_data"]["case"] for t in later] == ["medium/float32"]
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] == 1 for t in runnable), [
        (t["name"], t["output"][:300]) for t in runnable if t["status"] != "passed"
    ]
    assert staff["score"] == 8
