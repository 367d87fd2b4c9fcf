"""How a message names a grader command the user should run next, so that it runs as written in a fresh shell.

Run from the checkout's nox environment (`nox -s report`, `nox -s similarity`, ...), the grader's Python is
.nox/env's, which a fresh shell does not have on PATH: there `python -m grader ...` finds a Python without torch,
so the message names the nox session instead. Anywhere else (the container, a `pip install`, `nox --no-venv`),
`python -m grader ...` is what ran. Imports nothing of the grader, so that any module may use it.
"""

from __future__ import annotations

import sys
from pathlib import Path

NOX_ENV = Path(__file__).resolve().parent.parent / ".nox" / "env"


def grader_command(command: str, args: str = "") -> str:
    """`nox -s COMMAND -- ARGS` when this process runs in the checkout's nox environment, else
    `python -m grader COMMAND ARGS`."""
    try:
        in_nox = Path(sys.prefix).resolve() == NOX_ENV.resolve()
    except OSError:
        in_nox = False
    if in_nox:
        return f"nox -s {command}" + (f" -- {args}" if args else "")
    return f"python -m grader {command}" + (f" {args}" if args else "")
