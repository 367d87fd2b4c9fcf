"""The commands of `python -m grader`, one module per command group; grader/cli.py assembles them. Each module's
`register(subparsers)` adds its subparser(s) with their arguments and sets `func` (set_defaults) to the handler that
runs the command, `run(args) -> int`.

Why: docs/architecture.md, "Modules: the why", grader/app/__init__.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from grader import keyfile
from grader.errors import UsageError
from grader.pipeline import GraderError

ROOT = Path(__file__).resolve().parent.parent.parent
EXIT_OK, EXIT_USAGE, EXIT_GRADER_FAULT = 0, 2, 3  # 0: graded (whatever the score); 2: cannot run; 3: grader fault


def _key(path: Path | None, *, missing_ok: bool = False) -> keyfile.Key | None:
    """The grading key's derived values, read once from a staff-only file before any child is spawned; None
    without a file (a local grade). GRADER_SECRET_SEED is refused (grader/keyfile.py says why).

    missing_ok: a file that is not there means no key (autograde's default path), not an error."""
    keyfile.refuse_environment()
    if path is None or (missing_ok and not path.exists()):
        return None
    return keyfile.load(path)


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise GraderError(f"cannot write results to {out}: {e.strerror or e} (pass --out DIR)") from None


def _usage_caught(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """The one place a usage error (grader/errors.py) becomes its exit code: one line on stderr, exit 2. A course
    grades each problem through here too, so that one problem's bad spec or folder does not stop the others."""
    try:
        return command(args)
    except UsageError as e:
        print(f"grader error: {e}", file=sys.stderr)  # one line, never wrapped (rich would wrap at 80 in CI)
        return EXIT_USAGE
