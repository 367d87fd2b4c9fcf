"""The terminal: progress while grading, the summary table after it (from the same failures as the reports), and
the lecture-style bench tables. Test names and outputs are printed as text, never read as rich markup."""

from __future__ import annotations

import copy
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader.report.failures import Failure, capped, failures, short_output
from grader.report.output import student_advisory
from grader.report.records import grade_of
from grader.report.student import build_rows, headline
from grader.results import FAILED, PASSED, SKIPPED, Grade, PerfCase, Reason, Stage, TestResult, TimingView

STYLE: dict[str, str] = {PASSED: "green", FAILED: "red", SKIPPED: "yellow"}
ANSI_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


@contextmanager
def progress(
    label: str, stream: TextIO | None = None, *, min_interval_s: float = 0.0, steps: Iterable[str] = ()
) -> Iterator[Callable[[str], None]]:
    """Yields update(message). On a TTY: one rich progress bar, updated in place and gone at the end: the latest
    message, done/total and the elapsed time, advancing once per message of `steps` seen (the grade's cases, as the
    pipeline names them: "triton: tiny_1x2/float32"); a spinner alone without steps. Elsewhere (CI logs,
    Gradescope, pipes): plain one-line messages, no ANSI codes, no bar, at most one per min_interval_s (repeats of
    the same message are dropped)."""
    stream = stream if stream is not None else sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty() and os.environ.get("TERM") != "dumb"
    t0 = time.monotonic()
    if tty:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        todo = set(steps)
        columns = [SpinnerColumn(), *([BarColumn(bar_width=24), MofNCompleteColumn()] if todo else [])]
        with Progress(
            *columns,
            TextColumn("{task.description}", markup=False),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=True,
        ) as bar:
            task = bar.add_task(f"{label}...", total=len(todo) or None)
            lock = threading.Lock()  # parts report progress from several threads

            def tick(msg: str) -> None:
                with lock:
                    done = msg in todo
                    todo.discard(msg)
                    bar.update(task, description=f"{label}: {' '.join(msg.split())}", advance=1 if done else 0)

            yield tick
        return
    state: dict[str, Any] = {"last": "", "at": -1e9}
    lock = threading.Lock()  # parts report progress from several threads

    def plain(msg: str) -> None:
        with lock:
            now = time.monotonic()
            if msg == state["last"] or now - state["at"] < min_interval_s:
                return
            state["last"], state["at"] = msg, now
            line = " ".join(f"{label}: {msg}".split())  # one line, whatever the message held
            line = "".join(ch for ch in ANSI_CSI.sub("", line) if ch.isprintable())  # and no escape codes
            print(f"[{now - t0:6.1f} s] {line}", file=stream, flush=True)

    yield plain  # nothing printed up front: an error before the first stage stays the only line on stderr


def make_console() -> Console:
    """The terminal's width on a TTY; a wide fixed width in CI logs, where rich would otherwise assume 80."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def overview(tests: list[TestResult], lost: list[Failure]) -> list[tuple[str, str, str, str]]:
    """(test, state, points, detail) rows: a part's passed correctness cases are one row, and so is each failure
    of several cases (naming them); anything else is its own row. In the order the grade ran them."""
    group_of = {t.name: i for i, f in enumerate(lost) if len(f.tests) > 1 for t in f.tests}  # names are unique
    rows: dict[Any, list[TestResult]] = {}
    for t in tests:
        if t.state == PASSED and t.stage == Stage.CORRECTNESS:
            key: Any = ("passed", t.part, t.stage)
        elif t.name in group_of:
            key = ("failure", group_of[t.name])
        else:
            key = ("test", t.name)
        rows.setdefault(key, []).append(t)
    out = []
    for ts in rows.values():
        t = ts[0]
        pts = f"{sum(x.score for x in ts):.3g}/{sum(x.max_score for x in ts):g}" if t.max_score else "-"
        first = t.output.splitlines()[0] if t.output else ""
        if len(ts) > 1 and all(x.pending for x in ts) and first == t.pending_line():
            # the row's points, not its first case's: "pending: 1 point" on a row of 0/2 was one case's share
            whole = copy.copy(t)
            whole.max_score = sum(x.max_score for x in ts)
            first = whole.pending_line()
        name = t.name
        if len(ts) > 1:
            name = f"{t.part} / {t.stage} ({len(ts)} cases)"
            if t.state == PASSED:
                first = "all passed"
            else:  # say which cases: a grouped failure must be findable
                cases = [x.case for x in ts]
                first += f" (cases: {', '.join(cases[:6])}{f', +{len(cases) - 6} more' if len(cases) > 6 else ''})"
        out.append((name, str(t.state), pts, first))
    return out


def print_summary(g: Grade, console: Console | None = None, verbose_failures: int = 6) -> None:
    """The grade's table, then the first failures' details (an error's own frames only: the full traceback is in
    report.md), the notes, the wall time and the score."""
    console = console or make_console()
    read = grade_of(g)  # what results.json says: the reports' words for it
    tests, lost = read.tests, failures(read)
    table = Table(title=f"{g.problem}: {g.submission} on {g.device}")
    for col, kw in (
        ("test", {"no_wrap": True}),
        ("result", {}),
        ("points", {"justify": "right"}),
        ("detail", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    for name, state, pts, detail in overview(tests, lost):
        table.add_row(escape(name), f"[{STYLE.get(state, 'red')}]{escape(state)}[/]", pts, escape(detail))
    console.print(table)
    for t in build_rows(tests):  # a build's output whole (capped): the errors are what the student fixes first
        console.print(f"{t.name}: {t.state}", style="bold red" if t.state == FAILED else "bold", markup=False)
        console.print(capped(t.output), markup=False, highlight=False)
    detailed = [f for f in lost if f.state == FAILED and "\n" in f.first.output and f.first.reason != Reason.FORFEIT]
    for f in detailed[:verbose_failures]:
        console.print(f.title, style="bold red", markup=False, highlight=False)
        console.print("\n".join(short_output(f.first)), markup=False, highlight=False)
    if len(detailed) > verbose_failures:
        console.print(
            f"... and {len(detailed) - verbose_failures} more failures with details: see report.md "
            "(or report.html) beside results.json",
            highlight=False,
        )
    for n in g.notes:
        console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
    if g.phases:
        perf = g.perf
        first_s = perf.first_call_s
        extra = f" (of which {first_s:.1f} s first calls: JIT / torch.compile)" if first_s else ""
        overlapped = perf.first_call_overlapped_s
        if overlapped:
            extra += f"; the baselines' first calls ({overlapped:.1f} s, torch.compile) ran during correctness"
        console.print("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in g.phases.items()) + extra, highlight=False)
    console.print(f"score: {headline(read)}", style="bold", markup=False, highlight=False)
    adv = student_advisory(bool(g.official), g.official_why)
    if adv:
        console.print(adv, style="yellow", markup=False, highlight=False)  # reasons may hold [brackets]


def print_bench(g: Grade, console: Console | None = None) -> None:
    """Lecture-style table per perf case: ms, GB/s, % of the measured copy roofline, speedup over eager."""
    console = console or make_console()
    perf = g.perf
    if not perf.cases:
        console.print("no performance data (performance is timed only on a CUDA GPU)")
        return
    bw = perf.copy_bytes_per_s
    console.print(
        f"{perf.device_name or '?'}: measured copy bandwidth {bw / 1e12:.2f} TB/s (read + write), torch {perf.torch}",
        highlight=False,
    )
    for name, c in perf.cases.items():
        console.print(_bench_table(name, c))
        th = c.thresholds
        if th is not None:
            console.print(
                f"  thresholds: zero at {th.zero_ms:.4g} ms, {th.partial_credit:g} at "
                f"{th.partial_ms:.4g} ms, full at {th.full_ms:.4g} ms; stop: {c.stop}",
                highlight=False,
            )


def _ms(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _bench_table(name: str, c: PerfCase) -> Table:
    t = Table(title=f"{name}: {c.shape} {c.dtype}, {c.bytes / 1e9:.2f} GB moved, floor {c.floor_ms:.4g} ms")
    for col in ("implementation", "ms (median)", "IQR", "n", "GB/s", "% roofline", "x eager", "credit"):
        t.add_column(col, justify="left" if col == "implementation" else "right")
    rows: list[tuple[str, TimingView, float | None]] = [(k, v, None) for k, v in c.baselines.items()]
    rows += [(k, v, v.credit) for k, v in c.impls.items()]
    for k, v, cr in rows:
        t.add_row(
            k,
            _ms(v.effective_ms, ".4f"),
            _ms(v.iqr_ms, ".4f"),
            str(v.n),
            _ms(v.gbps, ".0f"),
            _ms(v.pct_roofline, ".1f") + "%",
            _ms(v.speedup_vs_eager, ".2f"),
            "-" if cr is None else f"{100 * cr:.0f}%",
        )
    return t
