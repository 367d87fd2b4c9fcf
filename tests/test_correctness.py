"""End-to-end correctness grading on the CPU (Triton interpreter): staff solution, student stub, broken submissions.

Every submission is graded once per session (conftest.grade_dir caches); the tests then ask the resulting
Grade about the *class* of the bug ("every strided case fails, every other case passes"), not exact numbers.
The broken submissions live in tests/data/problems/glu/broken/<name>/glu_triton.py, each with its bug described at
the top.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.results import FAILED, PASSED, SKIPPED, Code, Reason

BROKEN = Path(__file__).resolve().parent / "data" / "problems" / "glu" / "broken"
BROKEN_NAMES = sorted(p.name for p in BROKEN.iterdir() if (p / "glu_triton.py").is_file())
# The fast tier grades one wrong kernel end to end (and the two cheap load failures); every other broken submission
# is a grade of 7-20 s on a 2-core CPU, so it runs in the full tier (`pytest --all`, CI=true: tests/conftest.py).
FAST_BROKEN = {"ignores_row_stride", "import_error", "syntax_error"}


def tiered(names) -> list:
    """Parametrize values: the FAST_BROKEN names as they are, the others marked slow."""
    return [n if n in FAST_BROKEN else pytest.param(n, marks=pytest.mark.slow) for n in names]

N_BAD = re.compile(r"(\d+) of (\d+) elements wrong")
FIRST_AT = re.compile(r"at index \(([\d, ]+)\): expected (\S+), got (\S+)")
NANS = re.compile(r"NaN: expected (\d+), got (\d+)")
BAD_ROWS = re.compile(r"bad rows: (\d+) of (\d+) \(first: (\d+)\)")
NEVER_WRITTEN = "they were never written"  # grader/correctness/check.py: the all-ones poison is still there


# ------------------------------------------------------------------------------------------------------------
# helpers


def correctness(g) -> dict:
    """case name -> TestResult for the correctness stage."""
    out = {t.extra["case"]: t for t in g.tests if t.stage == "correctness"}
    assert len(out) == len([t for t in g.tests if t.stage == "correctness"]), "a case is reported twice"
    return out


def ran(g, problem) -> dict:
    """(Case, TestResult) by case name, for the cases that ran on this machine (not skipped)."""
    res = correctness(g)
    return {c.name: (c, res[c.name]) for c in problem.cases if res[c.name].state != SKIPPED}


def rows(case) -> int:
    return math.prod(case.shape[:-1])


def n_out(case) -> int:
    return rows(case) * (case.shape[-1] // 2)


def show(t) -> str:
    return f"{t.name} [{t.state}]:\n{t.output}"


def expect(t, state: str, *needles: str) -> None:
    assert t.state == state, show(t)
    for n in needles:
        assert n in t.output, f"{n!r} not in the output of\n{show(t)}"


def grade_broken(grade_dir, name: str):
    return grade_dir(BROKEN / name)


def bug_line(name: str) -> int:
    lines = (BROKEN / name / "glu_triton.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "# BUG" in line)


# ------------------------------------------------------------------------------------------------------------
# staff solution and student stub


def test_staff_earns_every_runnable_point_on_cpu(problem, grade_dir, repo_root):
    g = grade_dir(repo_root / "assignment" / "glu", staff=True)
    res = correctness(g)
    assert set(res) == {c.name for c in problem.cases}
    for c in problem.cases:
        t = res[c.name]
        if c.gpu_only:
            expect(t, SKIPPED, "only on a GPU")
            assert t.score == 0 and t.max_score == c.points
        else:
            expect(t, PASSED, "ok")
            assert t.score == t.max_score == c.points
    runnable = sum(c.points for c in problem.cases if not c.gpu_only)
    assert sum(t.score for t in res.values()) == runnable
    assert any("could not be earned on this machine" in n for n in g.notes), g.notes


def test_staff_passes_the_checks(grade_dir, repo_root):
    g = grade_dir(repo_root / "assignment" / "glu", staff=True)
    checks = {t.name: t for t in g.tests if t.stage == "checks"}
    assert checks, "expected the static-warnings and kernel-check rows"
    for t in checks.values():
        assert t.state == PASSED, show(t)
    assert g.score == sum(t.score for t in g.tests)


@pytest.mark.slow  # a grade of the stub: ~14 s
def test_stub_scores_zero_and_points_to_the_handout(problem, grade_dir, repo_root):
    g = grade_dir(repo_root / "assignment" / "glu")
    section = problem.implementations["triton"].handout_section
    assert g.score == 0
    cases = ran(g, problem)
    assert cases, "no case ran"
    for c, t in cases.values():
        expect(t, FAILED, "not implemented", section)


# ------------------------------------------------------------------------------------------------------------
# broken submissions: each loses points, with the right class of diagnostic


def test_every_broken_submission_has_a_diagnosis():
    assert set(BROKEN_NAMES) == set(DIAGNOSES), (
        "add a diagnosis for each tests/data/problems/glu/broken/<name>/ (and vice versa)"
    )


@pytest.mark.parametrize("name", tiered(BROKEN_NAMES))
def test_broken_submission_loses_points(name, problem, grade_dir):
    g = grade_broken(grade_dir, name)
    cases = ran(g, problem)
    got = sum(t.score for _, t in cases.values())
    best = sum(t.max_score for _, t in cases.values())
    assert got < best, f"{name} earned every runnable point ({got:g}/{best:g})"


def _swapped_halves(cases):
    for c, t in cases.values():
        if n_out(c) == 0:
            expect(t, PASSED)
        else:
            expect(t, FAILED, "wrong values", "expected ", ", got ")
            assert FIRST_AT.search(t.output), show(t)


def _ignores_row_stride(cases):
    strided = [ct for ct in cases.values() if ct[0].pad]
    assert strided, "the spec has no padded case"
    for c, t in cases.values():
        if c.pad and n_out(c):
            expect(t, FAILED, "wrong values", "row_stride")
            assert Code.HINT_ROW_STRIDE in [f.code for f in t.findings], show(t)
            m = BAD_ROWS.search(t.output)
            assert m and int(m.group(3)) > 0, show(t)  # row 0 is right
        else:
            expect(t, PASSED)


def _wrong_store_dtype(cases):
    for c, t in cases.values():
        if c.dtype == "float32":
            expect(t, PASSED)
        else:  # even for empty outputs: the tensor's dtype is checked before its values
            expect(t, FAILED, "wrong output tensor", f"dtype float32, expected {c.dtype}")


def _wrong_store_dtype_bf16(cases):
    for c, t in cases.values():
        if c.dtype == "bfloat16" or n_out(c) == 0:
            expect(t, PASSED)
            continue
        # Right tensor, wrong rounding: a precision failure (small relative error), not a dtype failure.
        expect(t, FAILED, "wrong values")
        assert "wrong output tensor" not in t.output, show(t)
        assert 0 < t.extra["max_rel_err"] < 0.01, show(t)


def _overflowing_sigmoid(cases):
    sat = [ct for ct in cases.values() if ct[0].dist == "saturating"]
    assert sat, "the spec has no saturating case"
    for c, t in cases.values():
        if c.dist in ("saturating", "special") and n_out(c):
            # b > ~88.7 (or b = +inf) gives inf / inf = NaN where the answer is a.
            expect(t, FAILED, "wrong values")
            m = NANS.search(t.output)
            assert m and int(m.group(2)) > int(m.group(1)), show(t)
            # A NaN the kernel computed, not the poison: the hint points at the overflow, not at the mask.
            assert t.reason == Reason.NAN_COMPUTED and NEVER_WRITTEN not in t.output, show(t)
        else:
            expect(t, PASSED)


def _partial_output(cases):
    hinted = failed = 0
    for c, t in cases.values():
        if n_out(c) == 0:
            expect(t, PASSED)
            continue
        expect(t, FAILED, "wrong values")
        if rows(c) > 1:  # exactly the last row is wrong
            m = BAD_ROWS.search(t.output)
            assert m, show(t)
            assert (int(m.group(1)), int(m.group(2)), int(m.group(3))) == (1, rows(c), rows(c) - 1), show(t)
        hinted += NEVER_WRITTEN in t.output
        failed += 1
    # Every failing case: the poison is in every new output on a GPU (the caching allocator) and on a CPU (the
    # worker's torch.empty, grader/child/worker.py _poison_cpu_allocations), not only where malloc reused memory.
    assert hinted == failed, f"{failed - hinted} of {failed} failing cases lack the 'never written' hint"


BLOCK = {"float32": 1024, "float16": 2048, "bfloat16": 2048}  # as in BROKEN/missing_mask/glu_triton.py


def _missing_mask(cases):
    hinted = failed = 0
    for c, t in cases.values():
        tail = n_out(c) % BLOCK[c.dtype]
        if tail == 0:  # empty, or a whole number of blocks: nothing is left unwritten
            expect(t, PASSED)
            continue
        expect(t, FAILED, "wrong values")
        n_bad = int(N_BAD.search(t.output).group(1))
        assert 0 < n_bad <= tail, show(t)
        idx = tuple(int(i) for i in FIRST_AT.search(t.output).group(1).split(","))
        out_shape = (*c.shape[:-1], c.shape[-1] // 2)
        flat = sum(i * math.prod(out_shape[k + 1:]) for k, i in enumerate(idx))
        assert flat >= n_out(c) - tail, f"first wrong element {idx} is before the unwritten tail\n{show(t)}"
        hinted += NEVER_WRITTEN in t.output
        failed += 1
    assert hinted == failed, f"{failed - hinted} of {failed} failing cases lack the 'never written' hint"


def _mutates_input(cases):
    # Regression: on CPU the sent input used to be shared memory with the parent's copy, so this passed.
    for c, t in cases.values():
        if c.dist == "saturating":  # |b| >= 80: clamped in place
            expect(t, FAILED, "input was modified")
        elif c.dist in ("normal", "uniform"):  # nothing to clamp, x untouched
            expect(t, PASSED)


def _mutates_input_inplace(cases):
    # Regression: the second run reads the modified x; this used to be reported as "not deterministic".
    for c, t in cases.values():
        if n_out(c):
            expect(t, FAILED, "input was modified")


def _returns_view(cases):
    for c, t in cases.values():
        if rows(c) > 1:
            expect(t, FAILED, "wrong output tensor", "not contiguous")
        else:  # a single row (or none) is contiguous whatever its row stride
            expect(t, PASSED)


def _sys_exit(cases):
    ts = [t for _, t in cases.values()]
    assert all(t.state == FAILED for t in ts), "\n".join(show(t) for t in ts if t.state != FAILED)
    assert "exited with code 3" in ts[0].output, show(ts[0])
    for t in ts:
        assert "exited with code 3" in t.output or t.output.startswith("not run"), show(t)


def _import_error(cases):
    for c, t in cases.values():
        expect(t, FAILED, "importing glu_triton.py failed", "ImportError", "fast_sigmoid")


def _syntax_error(cases):
    line = bug_line("syntax_error")
    for c, t in cases.values():
        expect(t, FAILED, "glu_triton.py does not parse", f"line {line}")


def _chained_error(cases):
    # The one line names the root cause, and the detail shows its message (not only the traceback's last lines).
    for c, t in cases.values():
        expect(t, FAILED, "RuntimeError: launch failed", "caused by ValueError", "needs h to be a multiple of 4096",
               f"at glu_triton.py line {bug_line('chained_error')}")


def _unmasked_store(cases):
    # Every launch whose last program runs past n_out fails with the bounds check's line, deterministically, and
    # the worker survives it: cases after it still pass or fail on their own merits.
    for c, t in cases.values():
        if n_out(c) % 256 == 0:
            expect(t, PASSED)
        else:
            # every unmasked site in one run (issue 29 item 7), each by its own line. How many of the three show
            # depends on where the allocator put y: an unmasked load past x's end that lands inside y is inside a
            # tensor argument, which the interpreter's check cannot tell from a right access (the two loads and the
            # store are all reported when nothing lands in another argument).
            line = bug_line("unmasked_store")
            expect(t, FAILED, "out-of-bounds access sites in one run of glu_kernel", "store at glu_triton.py:",
                   "with no mask: in glu_kernel", "past the end of argument 'x_ptr'", "mask=")
            first = t.output.splitlines()[0]
            assert f"load at glu_triton.py:{line}" in first or f"load at glu_triton.py:{line + 1}" in first, show(t)
            assert "InterpreterError" not in t.output.splitlines()[0], show(t)  # the wrapper is not repeated


def _stride_in_bytes(cases):
    # Row 0 is right; every later row is read 4x too far, past the end of x, by lanes the mask lets through: a wrong
    # address (issue 40 item 3), named with its stride argument, never "mask it".
    for c, t in cases.values():
        if rows(c) > 1 and n_out(c):
            expect(t, FAILED, "the address is wrong, not the mask", "row_stride = ", "is x_ptr's row stride in bytes")
            assert "mask it" not in t.output and "mask every" not in t.output, show(t)
        else:
            expect(t, PASSED)


def _forgets_gate(cases):
    for c, t in cases.values():
        if n_out(c) == 0:
            expect(t, PASSED)
        else:
            expect(t, FAILED, "wrong values")
            if c.dist == "normal":  # the values are a's (inf_nan's NaN where b = +-inf aside)
                assert Code.HINT_FORMULA in [f.code for f in t.findings], show(t)


def _gate_only(cases):
    for c, t in cases.values():
        if n_out(c) == 0:
            expect(t, PASSED)
        else:
            expect(t, FAILED, "wrong values")


def _fp16_through_bf16(cases):
    for c, t in cases.values():
        if c.dtype != "float16" or n_out(c) == 0:
            expect(t, PASSED)
        elif c.dist == "normal":
            expect(t, FAILED, "wrong values", "hint: ")


def _row_tail(cases):
    for c, t in cases.values():
        if n_out(c) and (c.shape[-1] // 2) % 4:
            expect(t, FAILED, "wrong values")
        else:
            expect(t, PASSED)


DIAGNOSES = {
    "forgets_gate": _forgets_gate,
    "gate_only": _gate_only,
    "fp16_through_bf16": _fp16_through_bf16,
    "row_tail": _row_tail,
    "swapped_halves": _swapped_halves,
    "ignores_row_stride": _ignores_row_stride,
    "wrong_store_dtype": _wrong_store_dtype,
    "wrong_store_dtype_bf16": _wrong_store_dtype_bf16,
    "overflowing_sigmoid": _overflowing_sigmoid,
    "partial_output": _partial_output,
    "missing_mask": _missing_mask,
    "mutates_input": _mutates_input,
    "mutates_input_inplace": _mutates_input_inplace,
    "returns_view": _returns_view,
    "sys_exit": _sys_exit,
    "import_error": _import_error,
    "syntax_error": _syntax_error,
    "chained_error": _chained_error,
    "unmasked_store": _unmasked_store,
    "stride_in_bytes": _stride_in_bytes,
}


@pytest.mark.parametrize("name", tiered(sorted(DIAGNOSES)))
def test_broken_submission_diagnosis(name, problem, grade_dir):
    g = grade_broken(grade_dir, name)
    cases = ran(g, problem)
    assert cases, "no case ran"
    DIAGNOSES[name](cases)


@pytest.mark.slow  # sys_exit's grade: ~19 s
def test_sys_exit_does_not_stall_the_grade(problem, grade_dir):
    g = grade_broken(grade_dir, "sys_exit")
    assert set(correctness(g)) == {c.name for c in problem.cases}, "the grade did not complete"
    # A dead worker is noticed at once (not through the stage's timeout).
    assert g.phases["correctness"] < 120, g.phases


@pytest.mark.parametrize("name", ["import_error", "syntax_error"])
def test_load_failure_is_not_reported_as_a_stray_process(name, grade_dir):
    # Regression: a worker that failed to load used to be left running, then killed by reap_strays and
    # reported as a process the submission left behind.
    g = grade_broken(grade_dir, name)
    assert not [n for n in g.notes if "left running" in n], g.notes


# ------------------------------------------------------------------------------------------------------------
# the CLI's results.json


@pytest.mark.slow  # a CLI grade of the staff solution in a subprocess: ~13 s (the fast tier grades it in-process)
def test_cli_writes_gradescope_results(problem, repo_root, tmp_path):
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "GRADER_SECRET_SEED"}
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "grade", "--staff", "--only", "triton", "--device", "cpu", "--out", str(out)],
        cwd=repo_root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((out / "results.json").read_text())
    assert isinstance(data["score"], (int, float))
    tests = data["tests"]
    assert isinstance(tests, list) and tests
    for t in tests:
        assert isinstance(t["name"], str) and t["name"], t
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float)), t
        assert 0 <= t["score"] <= t["max_score"] or t["max_score"] == 0, t
        assert t["status"] in ("passed", "failed"), t
        assert isinstance(t["output"], str), t
    assert len({t["name"] for t in tests}) == len(tests), "test names must be unique"
    assert data["score"] == pytest.approx(sum(t["score"] for t in tests))
    assert data["score"] == pytest.approx(sum(c.points for c in problem.cases if not c.gpu_only))
    assert not list(out.glob(".results.json.*")), "a temporary file was left next to results.json"


def _intake(tmp_path: Path, repo_root: Path) -> Path:
    """A student's assignment/: their kernel, the other problems' folders (gelu/, ...), Python's __pycache__/ (none
    a mistake), a folder of helpers and a symlinked kernel (each may be one: neither reaches the grader)."""
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(repo_root / "reference" / "glu" / "solution_triton.py", sub / "glu_triton.py")
    for d in ("gelu", "swiglu", "__pycache__", "helpers"):
        (sub / d).mkdir()
    (sub / "kernel.py").symlink_to(sub / "glu_triton.py")
    return sub


def test_only_what_might_be_a_mistake_is_named_as_skipped(tmp_path, repo_root, problem):
    from grader.pipeline import worth_naming

    sub = _intake(tmp_path, repo_root)
    (sub / "geglu").symlink_to(sub / "helpers")  # a link stays named, even under another problem's name
    skipped = ["__pycache__", "geglu", "gelu", "helpers", "kernel.py", "swiglu"]
    assert worth_naming(sub, skipped, problem) == ["geglu", "helpers", "kernel.py"]


@pytest.mark.slow
def test_a_grade_names_only_what_might_be_a_mistake_as_not_graded(tmp_path, grade_dir, repo_root):
    g = grade_dir(_intake(tmp_path, repo_root), cases=("tiny_1x2/float32",))
    note = next(n for n in g.notes if n.startswith("not graded"))
    assert "helpers" in note and "kernel.py" in note, note
    assert not any(d in note for d in ("gelu", "swiglu", "__pycache__")), note
