"""The problems beyond GLU on a real GPU (issue 20): every staff part (the staff-only naive CUDA row included) gets
every correctness point, the kernel check passes, and the fast staff kernels get full speed credit at >= 95% of
the measured ceiling on the large cases. Marked `gpu`: skipped cleanly without a CUDA device. On the H200:

    python -m pytest -m gpu tests/test_gpu_problems.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import problem_names

from grader.pipeline import Options, grade
from grader.problem.spec import load_problem
from grader.results import PASSED, Kind

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
PROBLEMS = [n for n in problem_names() if n != "glu"]  # every problem under reference/ but GLU (tests/test_gpu.py)


@pytest.fixture(scope="module", params=PROBLEMS)
def staff(request, tmp_path_factory):
    problem = load_problem(ROOT / "reference" / request.param / "spec.yaml")
    g = grade(problem, Options(submission=ROOT / problem.stubs, out=tmp_path_factory.mktemp(request.param),
                               staff=True, device="cuda"))
    return problem, g


def test_every_staff_part_is_correct_on_gpu(staff):
    problem, g = staff
    corr = [t for t in g.tests if t.kind == Kind.CORRECTNESS]
    assert {t.part for t in corr} == set(problem.implementations)
    bad = [f"{t.name}: {t.output}" for t in corr if t.state != PASSED]
    assert not bad, "\n".join(bad)
    for t in (t for t in g.tests if t.kind == Kind.KERNEL_CHECK):
        assert t.state == PASSED, t.output


def test_the_fast_staff_kernels_get_full_speed_credit_near_the_ceiling(staff):
    problem, g = staff
    if problem.performance is None:
        pytest.skip(f"{problem.name} has no performance cases yet")
    fast = [n for n, i in problem.implementations.items() if not i.staff_only]
    perf = [t for t in g.tests if t.kind == Kind.PERFORMANCE and t.part in fast]
    low = [f"{t.name}: {t.output}" for t in perf if t.extra.get("credit", 0) < 1.0]
    assert not low, "\n".join(low)
    for name, c in g.perf.cases.items():
        for impl in fast:
            pct = c.impls[impl].pct_roofline or 0.0
            assert pct >= 95.0, f"{problem.name} {name} {impl}: {pct:.1f}% of the measured ceiling"
