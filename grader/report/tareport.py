"""TA reports over a folder of graded submissions:
`python -m grader report DIR [--out OUT] [--secret-file F] [--problem NAME] [--roster CSV [--canvas-column NAME]]`.

Why: docs/architecture.md, "Modules: the why", grader/report/tareport.py.
"""

from __future__ import annotations

from grader.report.assignment import Assignment, from_argument
from grader.report.cells import csv_text, safe_cell
from grader.report.classdata import ClassData, Submission, collect, columns, read_class, render_csv, who
from grader.report.classstats import histogram, pass_rates, speedups
from grader.report.classsummary import ClassReport, build, write_class_report, write_ta_report
from grader.report.gsexport import read_gradescope_metadata
from grader.report.roster import (
    CANVAS_CSV,
    CANVAS_HEADER,
    CANVAS_ID_RE,
    Join,
    Roster,
    RosterError,
    canvas_column,
    join_roster,
    points_text,
    read_roster,
    refusal,
    render_canvas_csv,
)
from grader.report.validate import NEEDS_JSONSCHEMA, BadResults, Unreadable, parse_results, validator

__all__ = [
    "Assignment",
    "ClassData",
    "ClassReport",
    "from_argument",
    "csv_text",
    "read_class",
    "safe_cell",
    "write_class_report",
    "CANVAS_CSV",
    "CANVAS_HEADER",
    "CANVAS_ID_RE",
    "NEEDS_JSONSCHEMA",
    "BadResults",
    "Join",
    "Roster",
    "RosterError",
    "Submission",
    "Unreadable",
    "build",
    "canvas_column",
    "collect",
    "columns",
    "histogram",
    "join_roster",
    "parse_results",
    "pass_rates",
    "points_text",
    "read_gradescope_metadata",
    "read_roster",
    "refusal",
    "render_canvas_csv",
    "render_csv",
    "speedups",
    "validator",
    "who",
    "write_ta_report",
]
