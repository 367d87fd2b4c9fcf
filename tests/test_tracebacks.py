"""Error messages from the worker (issue 18 item 3): the one line names the root cause without repeating a pure
wrapper (Triton's interpreter wraps once per @triton.jit call level: InterpreterError('InterpreterError("ValueError(
...)")')), the detail keeps the whole traceback (the result's output, for report.md), and a short form with only
the submission's own frames goes with it (the result's extra 'own_frames', for the terminal)."""

from __future__ import annotations

import importlib.util
import sys
import traceback

import pytest

from grader.child.worker import explain

STUDENT = '''
def helper(h):
    raise ValueError(f"Expected dtype ['fp32', 'fp64'] but got fp16 (h={h})")


def glu_triton(x):
    return helper(x)
'''


@pytest.fixture
def student(tmp_path):
    path = tmp_path / "glu_triton.py"
    path.write_text(STUDENT)
    spec = importlib.util.spec_from_file_location("student_glu_tb", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    yield mod, str(path)
    sys.modules.pop("student_glu_tb", None)


def _grader_frame(fn, *args):
    """Call fn as the worker does, from a frame of this (the grader's) file."""
    return fn(*args)


def test_a_doubly_wrapped_interpreter_error_is_named_by_its_root_cause(student):
    from triton.runtime.errors import InterpreterError

    mod, source = student
    try:
        try:
            try:
                _grader_frame(mod.glu_triton, 7)
            except Exception as e:
                raise InterpreterError(repr(e)) from e  # a @triton.jit helper's level
        except Exception as e:
            raise InterpreterError(repr(e)) from e  # the kernel's level
    except Exception as e:
        line, detail, own = explain(e, traceback.format_exc(), source)
    assert line.startswith("ValueError: Expected dtype ['fp32', 'fp64'] but got fp16 (h=7)"), line
    assert "InterpreterError" not in line and "caused by" not in line, line
    assert line.endswith(", at glu_triton.py line 3"), line
    # The short form: the student's frames (file by its base name), ending with the root cause; no grader frames.
    assert 'File "glu_triton.py", line 7, in glu_triton' in own and 'line 3, in helper' in own, own
    assert "test_tracebacks.py" not in own and "InterpreterError" not in own, own
    assert own.rstrip().endswith("ValueError: Expected dtype ['fp32', 'fp64'] but got fp16 (h=7)"), own
    # The detail keeps every frame, the grader's and the wrappers included.
    assert "_grader_frame" in detail and "InterpreterError" in detail and "helper" in detail, detail


def test_a_real_wrapper_with_words_of_its_own_is_kept(student):
    mod, source = student
    try:
        try:
            mod.glu_triton(1)
        except ValueError as e:
            raise RuntimeError("launch failed") from e
    except RuntimeError as e:
        line, detail, own = explain(e, traceback.format_exc(), source)
    assert line.startswith("RuntimeError: launch failed (caused by ValueError: Expected dtype"), line


def test_without_student_frames_there_is_no_short_form():
    try:
        _grader_frame(int, "x")
    except ValueError as e:
        line, detail, own = explain(e, traceback.format_exc(), "/nonexistent/glu_triton.py")
    assert line.startswith("ValueError: invalid literal") and "_grader_frame" in detail and own == ""


def test_a_live_error_keeps_the_whole_traceback_and_its_own_frames(grade_dir, repo_root):
    g = grade_dir(repo_root / "tests/data/problems/glu/broken/chained_error", cases=("odd_h_1001/float32",))
    (t,) = [t for t in g.tests if t.stage == "correctness"]
    assert 'File "grader/child/worker.py"' in t.output and 'File "glu_triton.py", line 16' in t.output, t.output
    own = t.extra["own_frames"]
    assert own.splitlines()[0] == t.output.splitlines()[0] and "worker.py" not in own, own
    assert 'File "glu_triton.py", line 28, in glu_triton' in own and own.rstrip().endswith("multiple of 4096"), own
