"""A Page (grader/report/blocks.py) as Markdown: report.md. Outputs are shown whole (fenced, so nothing in them
is read as Markdown); charts are in report.html, which the page says."""

from __future__ import annotations

import re

from grader.report.blocks import Block, Bullets, Cases, Chart, Output, Page, Pre, Section, Table, Text


def fence(text: str) -> str:
    """A fenced block that no run of backticks inside the text can close."""
    ticks = max([3] + [len(m) + 1 for m in re.findall(r"`+", text)])
    return f"{'`' * ticks}text\n{text}\n{'`' * ticks}"


def cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def table(t: Table) -> list[str]:
    return ["| " + " | ".join(cell(h) for h in t.head) + " |", "|" + "---|" * len(t.head)] + [
        "| " + " | ".join(cell(c.text if not c.items else "; ".join(c.items)) for c in r.cells) + " |" for r in t.rows
    ]


def block(b: Block) -> list[str]:
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Text):
        text = (f"**{b.lead}**" if b.lead else "") + b.text
        return [f"> {text}"] if b.style == "note" else [text]
    if isinstance(b, Chart):
        return []  # report.md says once that the charts are in report.html
    if isinstance(b, (Pre, Output)):
        return [fence(b.text)]
    if isinstance(b, Bullets):
        lead = [b.label, ""] if b.label else []
        keys = b.keys or [""] * len(b.items)
        return lead + [f"- {k + ': ' if k else ''}{cell(i)}" for k, i in zip(keys, b.items, strict=False)]
    if isinstance(b, Cases):
        return [f"- {cell(c.case)}: {cell(c.line)}" for c in b.cases]
    raise TypeError(f"no Markdown for {type(b).__name__}")


def section(s: Section) -> list[str]:
    out = [f"{'#' * s.level} {s.title}", ""]
    for b in s.blocks:
        lines = block(b)
        out += [*lines, ""] if lines else []
    for sub in s.sections:
        out += section(sub)
    return out


def render(page: Page) -> str:
    out = [f"# {page.title}", ""]
    for b in page.head:
        out += [*block(b), ""]
    if any(isinstance(b, Chart) for s in page.walk() for b in s.blocks):
        out += ["Charts of these numbers are in report.html, beside this file.", ""]
    for s in page.sections:
        out += section(s)
    return "\n".join(out)
