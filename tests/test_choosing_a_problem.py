"""The handouts' words about problems (issue 29 item 5) stay true to the specs: assignment/README.md opens with a
paragraph naming every problem and the command that grades it, and every problem's handout says how many of its
points a CPU grade checks and which ones it cannot (the `medium` cases and the performance cases), with the numbers
of its spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(ROOT.glob("reference/*/spec.yaml"))


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]


def test_the_handout_opens_with_choosing_a_problem():
    paras = _paragraphs((ROOT / "assignment" / "README.md").read_text(encoding="utf-8"))
    assert paras[0].startswith("# "), paras[0]
    first = paras[1]
    assert first.startswith("**Choosing a problem.**"), first[:80]
    for spec in SPECS:
        name = spec.parent.name
        assert f"`{name}`" in first and f"`nox -s grade -- --problem {name}`" in first, name
    assert "five problems" in first and len(SPECS) == 5  # the count it states


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.parent.name)
def test_every_handout_says_what_its_cpu_grade_checks(spec):
    problem = load_problem(spec)
    parts = len(problem.student_implementations)
    corr = sum(c.points for c in problem.cases)
    gpu_only = [c for c in problem.cases if c.gpu_only]
    perf_cases = problem.performance.cases if problem.performance else []
    perf = sum(c.points for c in perf_cases)
    total = parts * (corr + perf)
    cpu = parts * (corr - sum(c.points for c in gpu_only))
    text = " ".join((ROOT / problem.handout).read_text(encoding="utf-8").split())
    assert f"checks {cpu:g} of its {total:g} points" in text, (problem.name, cpu, total)
    assert f"other {total - cpu:g}" in text, (problem.name, total - cpu)
    assert {c.name.split("/")[0] for c in gpu_only} == {"medium"}  # the handouts name the GPU-only cases `medium`
    assert f"{sum(c.points for c in gpu_only):g} points a part" in text and f"{perf:g} points a part" in text
    assert "pending" in text  # what Gradescope shows for them (grader/results.py TestResult.gradescope)
    if problem.name != "glu":  # GLU's own handout names its perf cases in its table
        for c in perf_cases:
            assert f"`{c.name}`" in text, c.name
