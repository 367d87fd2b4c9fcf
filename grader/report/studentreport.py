"""The student's report (report.md and report.html beside results.json): kept as the name the CLI and older
callers import. The report is built and rendered by grader/report/ (student.py builds one model; markdown.py and
html.py render it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grader.report import html, markdown
from grader.report.records import as_results, grade_of
from grader.report.student import build, write_student_report
from grader.results import Grade

__all__ = ["as_results", "build", "grade_of", "render_html", "render_md", "write_student_report"]


def render_md(data: Grade | Mapping[str, Any], imgs: dict[str, bytes] | None, note: str | None = None) -> str:
    return markdown.render(build(data, imgs, note))


def render_html(data: Grade | Mapping[str, Any], imgs: dict[str, bytes] | None, note: str | None = None) -> str:
    return html.render(build(data, imgs, note))
