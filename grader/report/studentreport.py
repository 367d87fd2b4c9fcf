"""The student's report (report.md and report.html beside results.json): kept as the name the CLI and older
callers import. The report is built and rendered by grader/report/ (student.py builds one model; markdown.py and
html.py render it)."""

from __future__ import annotations

from typing import Any

from grader.report import html, markdown
from grader.report.records import as_results
from grader.report.student import build, write_student_report

__all__ = ["as_results", "build", "render_html", "render_md", "write_student_report"]


def render_md(data: dict[str, Any], imgs: dict[str, bytes] | None, note: str | None = None) -> str:
    return markdown.render(build(data, imgs, note))


def render_html(data: dict[str, Any], imgs: dict[str, bytes] | None, note: str | None = None) -> str:
    return html.render(build(data, imgs, note))
