"""What the student sees of a grade, in the terminal, report.md and report.html (issue 40, items 2, 3, 7, 8, 11).

Each test builds its results in-process (no grade is run): a failed CUDA build's errors reach all three renderings,
no message is cut inside a word, the denominators and "pending" agree, a local grade says once that it is a
practice grade, and identical messages are grouped with a count."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from grader.child import errors as worker
from grader.report import html, markdown, print_summary, results_json, student
from grader.results import FAILED, SKIPPED, Grade, Kind, Reason
from grader.results import TestResult as Result  # not collected as a test class
from grader.textscan import cut_at_word

NVCC_LOG = """nvcc failed:
glu_cuda.cu(20): error: identifier "hh" is undefined
      const int64_t r = i / h, c = i % hh;
                                       ^

glu_cuda.cu(31): warning #177-D: variable "unused_threads" was declared but never referenced
      const int unused_threads = 256;
                ^

1 error detected in the compilation of "glu_cuda.cu"."""


def _terminal(g: Grade, width: int = 200) -> str:
    buf = io.StringIO()
    print_summary(g, Console(file=buf, width=width))
    return buf.getvalue()


def _renderings(g: Grade) -> tuple[str, str, str]:
    """(terminal, report.md, report.html) of a grade, as read back from its results.json."""
    page = student.build(results_json(g), None)
    return _terminal(g), markdown.render(page), html.render(page)


def _case(part: str, case: str, state: str, output: str, reason: Reason, points: float = 1.0) -> Result:
    return Result(f"{part} / correctness / {case}", part, "correctness", 0.0, points, state, output, {"case": case},
                  Kind.CORRECTNESS, reason)


def _build_failed() -> Grade:
    g = Grade(problem="glu", submission="sub", device="cpu")
    g.tests.append(Result("cuda / build", "cuda", "build", 0.0, 0.0, FAILED, NVCC_LOG, {}, Kind.BUILD,
                          Reason.BUILD_FAILED))
    for i in range(3):
        g.tests.append(_case("cuda", f"c{i}", FAILED, "not run: glu_cuda.cu did not compile (see 'cuda / build')",
                             Reason.BUILD_FAILED))
    return g


# -- item 2: a CUDA compile error is shown where a student looks ---------------------------------------------------


def test_a_failed_build_s_errors_and_warnings_are_in_the_terminal_report_md_and_report_html():
    out, md, page = _renderings(_build_failed())
    for line in ('glu_cuda.cu(20): error: identifier "hh" is undefined', "const int64_t r = i / h, c = i % hh;",
                 'warning #177-D: variable "unused_threads" was declared but never referenced',
                 '1 error detected in the compilation of "glu_cuda.cu".'):
        assert line in out, out
        assert line in md
        assert line.replace('"', "&#34;") in page
    assert "## Build output: cuda / build" in md


def test_a_huge_build_log_is_capped_between_words():
    g = _build_failed()
    g.tests[0].output = "nvcc failed:\n" + " ".join(f"error{i}" for i in range(20000))
    _, md, _ = _renderings(g)
    body = md.split("## Build output: cuda / build", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0]
    assert len(body) < 25000 and re.search(r"error\d+ \[\.\.\. \d+ more characters\]$", body), body[-200:]


# -- item 3: never cut inside a word -------------------------------------------------------------------------------

HINT = (
    "out-of-bounds load: program 3 of glu_backward_kernel reads dy at row 127, column 1001, past the row's 1001 "
    "columns (index 128128 of a tensor of 128127 elements); the last block of each row runs past h when h is not a "
    "multiple of BLOCK_SIZE. On a GPU this corrupts memory or faults; mask it: tl.load(..., mask=offs < n)"
)


def test_an_exception_s_line_keeps_a_long_hint_whole():
    """The worker's one-line reason (each case's line in every report) was cut at 300 characters: "mask it: tl."."""
    assert len(HINT) > 300
    assert worker._gist(RuntimeError(HINT)) == HINT
    long = " ".join(["word"] * 2000)
    gist = worker._gist(RuntimeError(long))
    assert re.fullmatch(r"(word )*word \[\.\.\. \d+ more characters\]", gist), gist[-80:]


def test_cut_at_word_never_cuts_inside_a_word_and_is_linear():
    text = " ".join(f"w{i:05d}" for i in range(10000))
    for limit in (7, 50, 301, 999):
        out = cut_at_word(text, limit)
        kept = out.split(" [... ", 1)[0]
        assert text.startswith(kept + " ") and len(kept) <= limit
        assert all(re.fullmatch(r"w\d{5}", w) for w in kept.split())
    assert cut_at_word("short", 10) == "short"
    t0 = time.perf_counter()
    out = cut_at_word("x" * 5_000_000, 1000)  # no whitespace: hostile output, cut inside its one word, and said so
    assert time.perf_counter() - t0 < 1.0 and out.endswith("more characters (cut inside a word)]")


def test_a_long_case_line_is_whole_in_report_md_and_the_terminal():
    g = Grade(problem="glu_backward", submission="sub", device="cpu")
    g.tests += [_case("triton", f"c{i}", FAILED, f"OutOfBounds: {HINT}, at glu_backward_triton.py line 3{i}",
                      Reason.RAISED) for i in range(2)]
    out, md, _ = _renderings(g)
    assert f"- c1: OutOfBounds: {HINT}, at glu_backward_triton.py line 31" in md
    words = " ".join(out.replace("│", " ").split())  # the terminal's table wraps the line: between words only
    assert "mask it: tl.load(..., mask=offs < n), at glu_backward_triton.py line 30" in words


# -- item 7: denominators and "pending" ----------------------------------------------------------------------------


def test_a_row_of_pending_cases_says_the_row_s_points_not_one_case_s():
    g = Grade(problem="glu", submission="sub", device="cpu")
    g.tests += [_case("cuda", c, SKIPPED, "skipped: this case runs only on a GPU", Reason.NEEDS_GPU)
                for c in ("medium/float32", "medium/bfloat16")]
    out = _terminal(g)
    row = next(ln for ln in out.splitlines() if "(2 cases)" in ln)
    assert "0/2" in row and "pending: 2 points, graded on a GPU later" in row and "pending: 1 point," not in row, row


def test_cases_a_watch_grade_did_not_run_are_not_called_pending():
    t = _case("triton", "c1", SKIPPED, "not run: stopped", Reason.NOT_RUN)
    t.extra["stopped"] = True
    line = t.gradescope()["output"].splitlines()[0]
    assert line.startswith("not run: 1 point, --watch stopped at the first failing case") and "pending" not in line


def test_a_part_that_cannot_run_on_a_cpu_leaves_its_gpu_only_cases_pending_as_a_part_that_loads_does(problem):
    """A build failure (or a missing file) counted the GPU-only cases as failed on a CPU, while every other CPU
    grade skips them as pending: the points this machine can earn changed with how the part failed."""
    from grader.partprep import fail_all

    impl = problem.student_implementations["cuda"]
    rows = fail_all(problem, impl, FAILED, "not run: did not compile", Reason.BUILD_FAILED, "cpu")
    gpu_only = {c.name for c in problem.cases if c.gpu_only}
    assert gpu_only, "the glu spec has GPU-only cases"
    for t in rows:
        if t.case in gpu_only:
            assert t.state == SKIPPED and t.reason == Reason.NEEDS_GPU and t.pending, t.output
        else:
            assert t.state == FAILED and t.reason == Reason.BUILD_FAILED
    on_gpu = fail_all(problem, impl, FAILED, "not run: did not compile", Reason.BUILD_FAILED, "cuda")
    assert all(t.state == FAILED for t in on_gpu)


# -- item 11: identical messages grouped with a count --------------------------------------------------------------


def test_identical_case_messages_are_one_entry_with_their_count_in_report_md_and_report_html():
    g = _build_failed()
    g.tests += [_case("cuda", f"d{i}", FAILED, "not run: glu_cuda.cu did not compile (see 'cuda / build')",
                      Reason.BUILD_FAILED) for i in range(19)]
    _, md, page = _renderings(g)
    line = "not run: glu_cuda.cu did not compile (see 'cuda / build')"
    assert md.count(f": {line}") == 1, md
    assert "- 22 cases (c0, c1, c2, d0," in md and "d18): " + line in md
    assert page.count("did not compile (see &#39;cuda / build&#39;)</summary>") == 1
    assert "22 cases (c0, c1, c2, d0," in page
