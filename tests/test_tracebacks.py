"""Error messages from the worker (issue 18 item 3): the one line names the root cause without repeating a pure
wrapper (Triton's interpreter wraps once per @triton.jit call level: InterpreterError('InterpreterError("ValueError(
...)")')), the detail shows only the submission's own frames, and the full traceback is kept (a result's
extra 'traceback', for report.md)."""

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
        line, detail, full = explain(e, traceback.format_exc(), source)
    assert line.startswith("ValueError: Expected dtype ['fp32', 'fp64'] but got fp16 (h=7)"), line
    assert "InterpreterError" not in line and "caused by" not in line, line
    assert line.endswith(", at glu_triton.py line 3"), line
    # The detail: the student's frames (file by its base name), ending with the root cause; no grader frames.
    assert 'File "glu_triton.py", line 7, in glu_triton' in detail and 'line 3, in helper' in detail, detail
    assert "test_tracebacks.py" not in detail and "InterpreterError" not in detail, detail
    assert detail.rstrip().endswith("ValueError: Expected dtype ['fp32', 'fp64'] but got fp16 (h=7)"), detail
    # The full traceback keeps every frame, the grader's and the wrappers included.
    assert "_grader_frame" in full and "InterpreterError" in full and "helper" in full, full


def test_a_real_wrapper_with_words_of_its_own_is_kept(student):
    mod, source = student
    try:
        try:
            mod.glu_triton(1)
        except ValueError as e:
            raise RuntimeError("launch failed") from e
    except RuntimeError as e:
        line, detail, full = explain(e, traceback.format_exc(), source)
    assert line.startswith("RuntimeError: launch failed (caused by ValueError: Expected dtype"), line


def test_without_student_frames_the_traceback_tail_is_the_detail():
    try:
        _grader_frame(int, "x")
    except ValueError as e:
        line, detail, full = explain(e, traceback.format_exc(), "/nonexistent/glu_triton.py")
    assert line.startswith("ValueError: invalid literal") and "_grader_frame" in detail and "_grader_frame" in full
