"""The report model's pieces: a page of sections, each a list of blocks (text, tables, charts, outputs, lists).

Every report (the student's report.md and report.html, the TA's class_summary.html) is built as one Page of these,
then rendered: grader/report/markdown.py and grader/report/html.py walk the same Page, so the two formats cannot
drift apart. Blocks hold plain text only; escaping is the renderer's job (jinja2's autoescape for HTML)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

NUMBER = re.compile(r"[-+]?\d[\d.,]*(e[-+]?\d+)?( ?(x|%|ms|s)| / [\d.]+)?( \(\d+/\d+\))?")


def is_number(s: Any) -> bool:
    """Cells aligned right: numbers, with an optional unit, ratio or count."""
    return isinstance(s, (int, float)) or bool(NUMBER.fullmatch(str(s).strip()))


@dataclass(frozen=True)
class Cell:
    text: str
    state: str = ""  # a test state (passed / failed / skipped) or "none": the HTML colours the cell
    href: str = ""  # a relative link (the class summary's student cells)
    items: tuple[str, ...] = ()  # a list inside the cell (the class summary's flags)

    @property
    def number(self) -> bool:
        return not self.state and not self.items and is_number(self.text)


@dataclass
class Row:
    cells: list[Cell]
    kind: str = ""  # "baseline" | "impl": a perf table's row class

    @classmethod
    def of(cls, values: list[Any], kind: str = "") -> Row:
        return cls([v if isinstance(v, Cell) else Cell(str(v)) for v in values], kind)

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.cells]


@dataclass
class Table:
    kind: ClassVar[str] = "table"
    head: list[str]
    rows: list[Row]


@dataclass
class Text:
    kind: ClassVar[str] = "text"
    text: str
    style: str = ""  # "" | "note" (a boxed note) | "facts" (greyed)
    lead: str = ""  # a bold lead-in before the text


@dataclass
class Chart:
    """A PNG, embedded in the HTML as a data URI (the page loads nothing); Markdown points at report.html."""

    kind: ClassVar[str] = "chart"
    alt: str
    png: bytes

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@dataclass
class Pre:
    """Preformatted text shown whole (a compiler's report, a compile error)."""

    kind: ClassVar[str] = "pre"
    text: str


@dataclass
class Output:
    """A test's output. report.md shows it whole; report.html and the terminal show the preview (its first lines),
    the HTML with the whole text one click away (<details>), the terminal with a pointer to report.md."""

    kind: ClassVar[str] = "output"
    text: str  # the whole output (capped at FULL_OUTPUT_MAX characters)
    preview: list[str]  # the first lines, ending in "... (N more lines)" when cut

    @property
    def cut(self) -> bool:
        return len(self.preview) < len([ln for ln in self.text.splitlines() if ln.strip()])


@dataclass
class Bullets:
    kind: ClassVar[str] = "bullets"
    items: list[str]
    label: str = ""  # a line before the list ("What to try:")
    keys: list[str] = field(default_factory=list)  # per item, a bold lead-in ("triton / static warnings")


@dataclass
class CaseOutput:
    case: str
    line: str  # its output's first line
    text: str  # its whole output (capped)


@dataclass
class Cases:
    """The cases a failure covers, each with its own first line; in HTML each expands to its whole output."""

    kind: ClassVar[str] = "cases"
    cases: list[CaseOutput]


Block = Table | Text | Chart | Pre | Output | Bullets | Cases


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    style: str = ""  # "failed" | "skipped": a lost-points entry's frame in HTML
    level: int = 2

    def walk(self) -> list[Section]:
        return [self, *(s for sub in self.sections for s in sub.walk())]


@dataclass
class Page:
    title: str
    head: list[Block] = field(default_factory=list)  # under the title: facts, the advisory line, notes
    sections: list[Section] = field(default_factory=list)

    def walk(self) -> list[Section]:
        return [s for top in self.sections for s in top.walk()]

    def fix_levels(self) -> Page:
        def down(s: Section, level: int) -> None:
            s.level = level
            for sub in s.sections:
                down(sub, min(level + 1, 6))

        for s in self.sections:
            down(s, 2)
        return self
