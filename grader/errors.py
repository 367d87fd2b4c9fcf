"""The one usage-error type: the grader cannot run as asked (a bad argument, spec, course, roster, key file or folder).

Every such error of the command line subclasses UsageError (GraderError, SpecError, CourseError, RosterError,
KeyFileError, HandoutError, GradescopeError, SimilarityError); str(error) is one line naming what is wrong and how to
fix it. The CLI catches it in one place (grader/app/__init__.py `_usage_caught`): that line after "grader error: " on
stderr, and exit code 2. This module imports nothing, so that any module may raise one without an import cycle.
"""

from __future__ import annotations


class UsageError(Exception):
    """The grader cannot run as asked; str(error) is one line saying why (the CLI: exit 2, nothing written)."""
