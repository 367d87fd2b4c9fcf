"""The report stage: results.json and everything a person reads, from one model.

- output.py: results.json (Gradescope's shape, the leaderboard, signing), written atomically;
- records.py: a results.json read back into typed records (the form every report starts from);
- advice.py, failures.py: what to try next, and the lost points, one entry per distinct failure (typed fields only);
- blocks.py: the model's pieces (a Page of Sections of blocks); student.py builds the student's Page;
- markdown.py, html.py (jinja2, templates/): the two renderings of a Page; terminal.py: the terminal's;
- charts.py: the student charts (matplotlib, optional); perf.py: the lecture-style perf tables;
- validate.py, classdata.py, roster.py, gsexport.py, classsummary.py: the TA's reports over a class.

The names below are what the CLI and the pipeline call (`from grader import report; report.write_results(...)`)."""

from grader.report.output import (
    advisory_line,
    finite,
    leaderboard,
    results_json,
    write_json_atomic,
    write_results,
    write_text_atomic,
)
from grader.report.terminal import make_console, print_bench, print_summary, progress

__all__ = [
    "advisory_line",
    "finite",
    "leaderboard",
    "make_console",
    "print_bench",
    "print_summary",
    "progress",
    "results_json",
    "write_json_atomic",
    "write_results",
    "write_text_atomic",
]
