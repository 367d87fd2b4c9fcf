"""Last stage: turn a Grade into results.json (Gradescope's shape, written atomically) and a terminal summary."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import signing
from .results import FAILED, PASSED, SKIPPED, Code, Grade, Kind, Reason

STYLE = {PASSED: "green", FAILED: "red", SKIPPED: "yellow"}
ANSI_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def write_json_atomic(path: Path, data: dict) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str))


def _clear_squatter(path: Path) -> None:
    """Something that is not a regular file where a result goes (a directory or a link a submission planted)
    would make the rename fail or write elsewhere: remove it first. The grader's results are never lost."""
    if path.is_symlink():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; results are for TAs and CI artifact uploads to read
        _clear_squatter(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def finite(obj: Any) -> Any:
    """A copy with every NaN/inf float replaced by None: Gradescope's parser (like every strict one) rejects NaN."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _untrusted_time(g: Grade, part: str, case: str, d: dict, floor_ms: float) -> bool:
    """Times that must not rank: outputs that failed verification, times under the physical floor, forfeit parts."""
    unreal = (Code.TIMED_WRONG, Code.BELOW_FLOOR)
    for t in g.tests:
        if t.kind == Kind.PERFORMANCE and t.part == part and t.extra.get("case") == case:
            if any(f.code in unreal for f in t.findings):
                return True
    eff = d.get("effective_ms")
    if not isinstance(eff, (int, float)) or not math.isfinite(eff) or eff <= 0 or (floor_ms and eff < floor_ms):
        return True
    return any(t.part == part and t.extra.get("forfeit") for t in g.tests)


def leaderboard(g: Grade) -> list[dict[str, Any]]:
    """Gradescope leaderboard columns from the perf data: per perf case and implementation, the kernel time
    (ms, lower is better) and the share of the measured copy roofline (%, higher is better). Times that were
    not real work (failed verification, under the physical floor, forfeit part) are left off."""
    board: list[dict[str, Any]] = []
    for case, c in (g.perf.get("cases") or {}).items():
        for impl, d in (c.get("impls") or {}).items():
            if _untrusted_time(g, impl, case, d, float(c.get("floor_ms") or 0.0)):
                continue
            board.append({"name": f"{impl} {case} (ms)", "value": round(float(d["effective_ms"]), 5), "order": "asc"})
            pct = d.get("pct_roofline")
            if isinstance(pct, (int, float)) and math.isfinite(pct):
                board.append(
                    {"name": f"{impl} {case} (% of copy roofline)", "value": round(float(pct), 2), "order": "desc"}
                )
    return board


def results_json(g: Grade) -> dict[str, Any]:
    """Gradescope's results.json: the Grade's own JSON, plus leaderboard entries when there is perf data."""
    data = g.to_json()
    if os.environ.get("GRADER_GRADESCOPE") == "1" and g.unearnable:  # set by the Gradescope zip's run_autograder
        data["output"] = (
            f"{g.unearnable:g} of {g.max_score:g} points need a GPU and are graded later by the course "
            "staff; this score is the CPU checks only.\n" + data["output"]
        ).rstrip("\n")
    board = leaderboard(g)
    if board:
        data["leaderboard"] = board
    return finite(data)


def write_results(g: Grade, out_dir: Path, key: bytes | None = None) -> Path:
    """results.json, atomically. Signed (grader/signing.py) only when a signing key is given (keyfile.Key.signing)
    *and* the grade is official (g.official, decided by the trusted side): an advisory grade is never signed."""
    path = out_dir / "results.json"
    data = results_json(g)
    write_json_atomic(path, signing.sign(data, key) if key is not None and g.official else data)
    return path


ADVISORY = "advisory: not an official grade (unsigned)"


def advisory_line(official: Any, why: Any) -> str | None:
    """The line that says a grade is advisory, with its reasons; None for an official grade, or for a results.json
    written before grades said either (no `official` field)."""
    if official is not False:
        return None
    reasons = [str(w) for w in why] if isinstance(why, list) else []
    return ADVISORY + (": " + "; ".join(reasons) if reasons else "")


@contextmanager
def progress(
    label: str, stream: TextIO | None = None, *, min_interval_s: float = 0.0
) -> Iterator[Callable[[str], None]]:
    """Yields update(message). On a TTY: a rich spinner line with the elapsed time, updated in place and gone
    at the end. Elsewhere (CI logs, pipes): plain one-line messages, no ANSI codes, no spinner, at most one per
    min_interval_s (repeats of the same message are dropped)."""
    stream = stream if stream is not None else sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty() and os.environ.get("TERM") != "dumb"
    t0 = time.monotonic()
    if tty:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=True,
        ) as bar:
            task = bar.add_task(f"{label}...", total=None)
            yield lambda msg: bar.update(task, description=f"{label}: {msg}")
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


def print_summary(g: Grade, console: Console | None = None, verbose_failures: int = 6) -> None:
    """Tests that say the same thing (all passed, all skipped or forfeit for one reason) share one row."""
    console = console or make_console()
    table = Table(title=f"{g.problem}: {g.submission} on {g.device}")
    for col, kw in (
        ("test", {"no_wrap": True}),
        ("result", {}),
        ("points", {"justify": "right"}),
        ("detail", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    # Fold runs of tests that say the same thing (all passed, or all skipped for one reason) into one row.
    groups: dict[tuple, list] = {}
    for t in g.tests:
        first = t.output.splitlines()[0] if t.output else ""
        ok_case = t.state == PASSED and t.stage == "correctness"
        foldable = ok_case or t.stage == "correctness" or t.state == SKIPPED
        key = (t.part, t.stage, t.state, "ok" if ok_case else first) if foldable else (t.name,)
        groups.setdefault(key, []).append(t)
    for ts in groups.values():
        t = ts[0]
        pts = f"{sum(x.score for x in ts):.3g}/{sum(x.max_score for x in ts):g}" if t.max_score else "-"
        first = t.output.splitlines()[0] if t.output else ""
        if len(ts) > 1:
            name = f"{t.part} / {t.stage} ({len(ts)} cases)"
            if t.state == PASSED:
                first = "all passed"
            elif t.state == FAILED:  # say which cases: a grouped failure must be findable
                cases = [str(x.extra.get("case") or x.name) for x in ts]
                first += f" (cases: {', '.join(cases[:6])}{f', +{len(cases) - 6} more' if len(cases) > 6 else ''})"
        else:
            name = t.name
        table.add_row(escape(name), f"[{STYLE[t.state]}]{t.state}[/]", pts, escape(first))  # text is not markup
    console.print(table)
    detailed = [t for t in g.tests if t.state == FAILED and "\n" in t.output and t.reason != Reason.FORFEIT]
    for t in detailed[:verbose_failures]:
        console.print(f"[bold red]{t.name}[/]")
        console.print(t.output, markup=False, highlight=False)
    if len(detailed) > verbose_failures:
        console.print(
            f"... and {len(detailed) - verbose_failures} more failed tests with details: see report.md "
            "(or report.html) beside results.json",
            highlight=False,
        )
    for n in g.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    if g.phases:
        first_s = g.perf.get("first_call_s")
        extra = f" (of which {first_s:.1f} s first calls: JIT / torch.compile)" if first_s else ""
        overlapped = g.perf.get("first_call_overlapped_s")
        if overlapped:
            extra += f"; the baselines' first calls ({overlapped:.1f} s, torch.compile) ran during correctness"
        console.print("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in g.phases.items()) + extra, highlight=False)
    console.print(f"[bold]score: {g.score:.4g} / {g.max_score:g}[/]", highlight=False)
    adv = advisory_line(bool(g.official), g.official_why)
    if adv:
        console.print(adv, style="yellow", markup=False, highlight=False)  # reasons may hold [brackets]


def print_bench(g: Grade, console: Console | None = None) -> None:
    """Lecture-style table per perf case: ms, GB/s, % of the measured copy roofline, speedup over eager."""
    console = console or make_console()
    perf = g.perf
    if not perf.get("cases"):
        console.print("no performance data (performance is timed only on a CUDA GPU)")
        return
    dev = perf.get("device", {})
    bw = perf.get("copy_bytes_per_s", 0.0)
    console.print(
        f"{dev.get('name', '?')}: measured copy bandwidth {bw / 1e12:.2f} TB/s (read + write), torch "
        f"{dev.get('torch')}",
        highlight=False,
    )
    for name, c in perf["cases"].items():
        t = Table(
            title=(
                f"{name}: {tuple(c['shape'])} {c['dtype']}, {c['bytes'] / 1e9:.2f} GB moved, floor "
                f"{c['floor_ms']:.4g} ms"
            )
        )
        for col in ("implementation", "ms (median)", "IQR", "n", "GB/s", "% roofline", "x eager", "credit"):
            t.add_column(col, justify="left" if col == "implementation" else "right")
        rows = [(k, v, None) for k, v in c["baselines"].items()] + [
            (k, v, v.get("credit")) for k, v in c["impls"].items()
        ]
        for k, v, cr in rows:
            t.add_row(
                k,
                f"{v['effective_ms']:.4f}",
                f"{v['event']['iqr']:.4f}",
                str(v["event"]["n"]),
                f"{v['gbps']:.0f}",
                f"{v['pct_roofline']:.1f}%",
                f"{v['speedup_vs_eager']:.2f}",
                "-" if cr is None else f"{100 * cr:.0f}%",
            )
        console.print(t)
        th = c["thresholds"]
        console.print(
            f"  thresholds: zero at {th['zero_ms']:.4g} ms, {th['partial_credit']:g} at "
            f"{th['partial_ms']:.4g} ms, full at {th['full_ms']:.4g} ms; stop: {c['stop']}",
            highlight=False,
        )
