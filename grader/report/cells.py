"""Every CSV cell the grader writes (grades.csv, grades_canvas.csv), headers included, goes through safe_cell: a cell
that a spreadsheet would read as a formula (it starts with = + - @, a tab or a carriage return, as OWASP's "CSV
injection" advice lists) gets a leading apostrophe, which spreadsheets show as text. Numbers the report formats
itself ("-3", "1.5e-05") are left as they are: they are no formula, and an apostrophe would make them text."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")  # no nested quantifier: linear on any text


def safe_cell(value: object) -> str:
    """The cell's text, with an apostrophe in front when a spreadsheet would otherwise read it as a formula."""
    s = "" if value is None else str(value)
    return "'" + s if s[:1] in FORMULA_START and not _NUMBER.fullmatch(s) else s


def csv_text(rows: Iterable[Iterable[object]]) -> str:
    """The rows as CSV text, every cell through safe_cell: the one writer of the report's CSV files."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for row in rows:
        w.writerow([safe_cell(c) for c in row])
    return buf.getvalue()
