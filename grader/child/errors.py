"""How an exception raised beside student code becomes one line for the student (docs/architecture.md#errors).

`explain` names the root cause and the submission's line; `_error` builds the capped error reply; `UserError` is a
problem with the submission explained in one line, with its category (wire.ERROR_CATEGORIES).
"""

from __future__ import annotations

import os
import re
import sys
import traceback

# The folder this package was imported from (the grade's scratch, when the grader runs it): tracebacks name the
# grader's and the submission's files relative to it, not by this machine's paths.
_LIB_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRATCH_RO = os.path.dirname(_LIB_ROOT)


def _tail(tb: str, lines: int = 12) -> str:
    text = "\n".join(tb.rstrip().splitlines()[-lines:])
    return text.replace(_LIB_ROOT + os.sep, "").replace(os.path.join(_SCRATCH_RO, "submission") + os.sep, "")


_TRITON_AT = re.compile(r"^at \d+:\d+:$")  # how Triton's CompilationError starts: a location, then source
# The most of an exception's line a reply carries. The line is a lost point's reason in every report, so it is kept
# whole (a hint's sentence runs past 300 characters) and, when even this is exceeded, cut between words, never inside
# one ("mask it: tl." was what a cut at 300 left of a hint, before the ", at <file> line N" that follows it).
GIST_MAX = 2000


def _cut_at_word(text: str, limit: int = GIST_MAX) -> str:
    """grader/textscan.py cut_at_word, here again: this package imports nothing of the trusted grader."""
    if len(text) <= limit:
        return text
    at = max(text.rfind(" ", 0, limit + 1), text.rfind("\t", 0, limit + 1))
    inside = at < limit // 2
    kept = (text[:limit] if inside else text[:at]).rstrip()
    left = len(text) - len(kept)
    return kept + f" [... {left} more characters{' (cut inside a word)' if inside else ''}]"


def _gist(e: BaseException) -> str:
    """The informative line of an exception's message: the first, except for Triton's compile errors, which
    start with a location and a source excerpt and end with the reason."""
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if _TRITON_AT.match(lines[0].strip()):
        reason = [ln for ln in lines[1:] if ln.strip().strip("^")]
        return _cut_at_word(reason[-1].strip() if reason else lines[0])
    return _cut_at_word(lines[0])


def _student_line(chain: list[BaseException], source: str | None) -> str:
    """', at glu_triton.py line N': the deepest frame in the submission's file, searched from the root cause out.
    Triton's interpreter runs a kernel as Python compiled with the file's name and line numbers, so a kernel's
    own line is found too."""
    check = sys.modules.get(f"{__package__}.interpcheck")  # imported by CPU workers only
    if not source or (check is not None and isinstance(chain[-1], check.OutOfBounds)):
        # The interpreter's bounds check (interpcheck.py) raises at the end of the launch, and its message already
        # names each faulting load/store line: the launch line would point the student at the wrong line.
        return ""
    for x in reversed(chain):
        frames = [f for f in traceback.extract_tb(x.__traceback__) if f.filename == source]
        if frames:
            return f", at {os.path.basename(source)} line {frames[-1].lineno}"
    return ""


def explain_error(e: BaseException, tb: str, source: str | None = None) -> tuple[str, str, str]:
    """`explain`, for a reply: a UserError is its own one line."""
    if isinstance(e, UserError):
        return str(e), e.detail, e.detail
    return explain(e, tb, source)


FULL_TRACEBACK_LINES = 200  # of the full traceback kept for report.md (the wire caps a string at 64 KiB)


def _is_wrapper(outer: BaseException, inner: BaseException) -> bool:
    """outer only re-raises inner: its message is inner's repr (Triton's interpreter: InterpreterError(repr(e)),
    once per @triton.jit call level, so a helper's error arrives wrapped twice) or inner's message."""
    msg = str(outer).strip()
    return msg in (repr(inner), str(inner).strip()) or (bool(_gist(inner)) and _gist(inner) in _gist(outer))


def _student_frames(chain: list[BaseException], source: str | None) -> str:
    """The traceback's frames in the submission's own file (from the outermost exception to the root cause, each
    frame once), named by the file's base name: what the student can act on. '' when there are none."""
    if not source:
        return ""
    seen: set[tuple[int, str]] = set()
    frames = []
    for x in chain:
        for f in traceback.extract_tb(x.__traceback__):
            if f.filename == source and (f.lineno or 0, f.name) not in seen:
                seen.add((f.lineno or 0, f.name))
                frames.append(f)
    if not frames:
        return ""
    for f in frames:
        f.filename = os.path.basename(source)
    return "".join(traceback.format_list(frames)).rstrip()


def explain(e: BaseException, tb: str, source: str | None = None) -> tuple[str, str, str]:
    """(one line, detail, full traceback) for an exception raised while running the submission.

    Libraries wrap errors ("raise X from cause"): Triton's interpreter re-raises every kernel error as an
    InterpreterError, and its compiler reports an error inside a @triton.jit helper as a CompilationError at the
    call site. The reason is then in the innermost cause, which a traceback's last lines do not show. So the line
    names the root cause too (a pure wrapper, however deep, is dropped from it), and the detail starts with its whole
    message (a compile error's source excerpt), then the whole traceback (report.md shows it). The third value is
    the same with only the submission's own frames ('' when it has none): what a terminal shows a student, for
    whom the grader's and Triton's frames are noise."""
    chain = [e]
    while len(chain) < 10:
        last = chain[-1]
        nxt = last.__cause__ or (None if last.__suppress_context__ else last.__context__)
        if nxt is None or any(nxt is c for c in chain):
            break
        chain.append(nxt)
    root = chain[-1]
    at = _student_line(chain, source)
    full = _tail(tb, FULL_TRACEBACK_LINES)
    mine = _student_frames(chain, source)
    own = f"{mine}\n{type(root).__name__}: {_gist(root)}" if mine else ""
    # The outermost exception that is more than a wrapper of the next one: its own words are worth a line.
    top = 0
    while top + 1 < len(chain) and _is_wrapper(chain[top], chain[top + 1]):
        top += 1
    head = chain[top]
    line = f"{type(head).__name__}: {_gist(head)}"
    if head is not root:
        line += f" (caused by {type(root).__name__}: {_gist(root)})"
    root_lines = str(root).strip().splitlines()
    if len(root_lines) <= 1:  # already all in the line
        return line + at, full, own
    cause = f"root cause, {type(root).__name__}:\n" + "\n".join(root_lines[:20]) + "\n\n"
    return line + at, cause + full, cause + own if own else ""


class UserError(Exception):
    """A problem with the submission, explained in one line for the student; `category` says which kind (one of
    wire.ERROR_CATEGORIES, sent with the error so that the parent never reads the line to decide)."""

    def __init__(self, line: str, category: str = "call", detail: str = ""):
        super().__init__(line)
        self.category = category
        self.detail = detail


_STICKY_CUDA_ERROR = re.compile(
    r"illegal (memory )?(access|address|instruction)|unspecified launch failure|device-side assert|"
    r"misaligned address|cudaErrorIllegal|cudaErrorLaunchFailure|CUDA error",
    re.IGNORECASE,
)


def category_of(e: BaseException, line: str) -> str:
    """The category of an exception raised while running the submission (one of wire.ERROR_CATEGORIES)."""
    if isinstance(e, UserError):
        return e.category
    return "cuda-fault" if _STICKY_CUDA_ERROR.search(line) else "call"


_ERROR_LINE_MAX = 2000  # characters of an error reply's line; its detail keeps its last _ERROR_DETAIL_MAX
_ERROR_DETAIL_MAX = 16000  # (both far below the 64 KiB per string that the parent accepts: grader/wire.py)


def _error(line: str, detail: str, category: str = "call", own: str = "") -> tuple[str, str, str, str, str]:
    """An error reply, its texts capped: a submission's exception message or traceback can be any size. `own`: the
    detail with only the submission's own frames (explain)."""
    if len(line) > _ERROR_LINE_MAX:
        line = line[:_ERROR_LINE_MAX] + " [...]"
    if len(detail) > _ERROR_DETAIL_MAX:
        detail = "[...]\n" + detail[-_ERROR_DETAIL_MAX:]
    if len(own) > _ERROR_DETAIL_MAX:
        own = "[...]\n" + own[-_ERROR_DETAIL_MAX:]
    return ("error", line, detail, category, own)
