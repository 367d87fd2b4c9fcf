"""The batch's live count: done / running / failed / left, the rate and the ETA. On a terminal a rich status line
redrawn in place; elsewhere (a log, CI, Slurm's output file) a plain line when the counts change, at most one every
`every_s` seconds, and always the last."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass
class Counts:
    total: int
    done: int = 0  # graded now, this run
    skipped: int = 0  # already graded by an earlier run
    failed: int = 0  # not graded: infrastructure, or not gradable
    running: int = 0
    t0: float = field(default_factory=time.monotonic)

    @property
    def left(self) -> int:
        return self.total - self.done - self.skipped - self.failed - self.running

    def line(self) -> str:
        el = time.monotonic() - self.t0
        rate = self.done / el * 60 if el > 0 and self.done else 0.0
        todo = self.left + self.running
        eta = f"{_dur(todo / rate * 60)}" if rate else "-"
        skip = f" ({self.skipped} already graded)" if self.skipped else ""
        return (
            f"done {self.done + self.skipped}/{self.total}{skip} · running {self.running} · failed {self.failed} · "
            f"left {self.left} · {rate:.1f}/min · ETA {eta} · elapsed {_dur(el)}"
        )


def _dur(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    def __init__(self, counts: Counts, stream: TextIO | None = None, every_s: float = 10.0):
        self.c = counts
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last: tuple[int, ...] = ()
        self._at = -1e9
        self._live: Any = None

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._text = Text
            self._live = Live(Text(self.c.line()), console=Console(file=self.stream), refresh_per_second=2)
            self._live.__enter__()
        return self

    def event(self, msg: str) -> None:
        """One line about one submission (a fault, a retry): printed above the live line, or as a plain line."""
        if self._live is not None:
            self._live.console.print(msg, markup=False, highlight=False)
        else:
            print(msg, file=self.stream, flush=True)
        self.update()

    def update(self, force: bool = False) -> None:
        line = self.c.line()
        if self._live is not None:
            self._live.update(self._text(line))
            return
        c = self.c
        counts = (c.done, c.skipped, c.failed, c.running)  # a line when these change, not when only the clock does
        now = time.monotonic()
        if force or (counts != self._last and now - self._at >= self.every_s):
            self._last, self._at = counts, now
            print(f"batch: {line}", file=self.stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._text(self.c.line()))
            self._live.__exit__(None, None, None)
        else:
            self.update(force=True)
