"""TA reports over a folder of graded submissions:
`python -m grader report DIR [--out OUT] [--secret-file F] [--roster CSV [--canvas-column NAME]]`.

Kept as the name the CLI and older callers import; the code is in grader/report/: validate.py (every file checked
before anything reads it), gsexport.py (Gradescope's export layout), classdata.py (the submissions, grades.csv),
roster.py (grades_canvas.csv), classstats.py (class statistics and charts), classsummary.py (class_summary.html,
write_ta_report). Every results.json is validated first; a file that fails is listed with what is wrong, never
fatal, and never breaks the CSV. With the key file (--secret-file) every file's signature is checked."""

from __future__ import annotations

from .report.classdata import Submission, collect, columns, render_csv, who
from .report.classstats import histogram, pass_rates, speedups
from .report.classsummary import build, write_ta_report
from .report.gsexport import read_gradescope_metadata
from .report.roster import (
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
    render_canvas_csv,
)
from .report.validate import NEEDS_JSONSCHEMA, BadResults, Unreadable, parse_results, validator

__all__ = [
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
    "render_canvas_csv",
    "render_csv",
    "speedups",
    "validator",
    "who",
    "write_ta_report",
]
