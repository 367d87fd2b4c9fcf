"""Last stage: turn a Grade into results.json (Gradescope's shape, written atomically) and a terminal summary."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .results import FAILED, PASSED, SKIPPED, Grade

STYLE = {PASSED: "green", FAILED: "red", SKIPPED: "yellow"}


def write_json_atomic(path: Path, data: dict) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_results(g: Grade, out_dir: Path) -> Path:
    path = out_dir / "results.json"
    write_json_atomic(path, g.to_json())
    return path


def make_console() -> Console:
    """The terminal's width on a TTY; a wide fixed width in CI logs, where rich would otherwise assume 80."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def print_summary(g: Grade, console: Console | None = None, verbose_failures: int = 6) -> None:
    """Tests that say the same thing (all passed, all skipped or forfeit for one reason) share one row."""
    console = console or make_console()
    table = Table(title=f"{g.problem}: {g.submission} on {g.device}")
    for col, kw in (("test", {"no_wrap": True}), ("result", {}), ("points", {"justify": "right"}), ("detail", {"overflow": "fold"})):
        table.add_column(col, **kw)
    # Fold runs of tests that say the same thing (all passed, or all skipped for one reason) into one row.
    groups: dict[tuple, list] = {}
    for t in g.tests:
        first = t.output.splitlines()[0] if t.output else ""
        ok_case = t.state == PASSED and t.stage == "correctness"
        foldable = ok_case or t.stage == "correctness" or t.state == SKIPPED
        key = (t.part, t.stage, t.state, "ok" if ok_case else first) if foldable else (t.name,)
        groups.setdefault(key, []).append(t)
    for key, ts in groups.items():
        t = ts[0]
        pts = f"{sum(x.score for x in ts):.3g}/{sum(x.max_score for x in ts):g}" if t.max_score else "-"
        first = t.output.splitlines()[0] if t.output else ""
        if len(ts) > 1:
            name, first = f"{t.part} / {t.stage} ({len(ts)} cases)", ("all passed" if t.state == PASSED else first)
        else:
            name = t.name
        table.add_row(name, f"[{STYLE[t.state]}]{t.state}[/]", pts, first)
    console.print(table)
    shown = 0
    for t in g.tests:
        if t.state == FAILED and "\n" in t.output and shown < verbose_failures and not t.output.startswith("forfeit"):
            console.print(f"[bold red]{t.name}[/]")
            console.print(t.output, markup=False, highlight=False)
            shown += 1
    for n in g.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    if g.phases:
        console.print("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in g.phases.items()), highlight=False)
    console.print(f"[bold]score: {g.score:.4g} / {g.max_score:g}[/]", highlight=False)


def print_bench(g: Grade, console: Console | None = None) -> None:
    """Lecture-style table per perf case: ms, GB/s, % of the measured copy roofline, speedup over eager."""
    console = console or make_console()
    perf = g.perf
    if not perf.get("cases"):
        console.print("no performance data (performance is timed only on a CUDA GPU)")
        return
    dev = perf.get("device", {})
    bw = perf.get("copy_bytes_per_s", 0.0)
    console.print(f"{dev.get('name', '?')}: measured copy bandwidth {bw / 1e12:.2f} TB/s (read + write), torch {dev.get('torch')}", highlight=False)
    for name, c in perf["cases"].items():
        t = Table(title=f"{name}: {tuple(c['shape'])} {c['dtype']}, {c['bytes'] / 1e9:.2f} GB moved, floor {c['floor_ms']:.4g} ms")
        for col in ("implementation", "ms (median)", "IQR", "n", "GB/s", "% roofline", "x eager", "credit"):
            t.add_column(col, justify="left" if col == "implementation" else "right")
        rows = [(k, v, None) for k, v in c["baselines"].items()] + [(k, v, v.get("credit")) for k, v in c["impls"].items()]
        for k, v, cr in rows:
            t.add_row(
                k, f"{v['effective_ms']:.4f}", f"{v['event']['iqr']:.4f}", str(v["event"]["n"]), f"{v['gbps']:.0f}",
                f"{v['pct_roofline']:.1f}%", f"{v['speedup_vs_eager']:.2f}", "-" if cr is None else f"{100 * cr:.0f}%",
            )
        console.print(t)
        th = c["thresholds"]
        console.print(
            f"  thresholds: zero at {th['zero_ms']:.4g} ms, {th['partial_credit']:g} at {th['partial_ms']:.4g} ms, full at {th['full_ms']:.4g} ms; stop: {c['stop']}",
            highlight=False,
        )
