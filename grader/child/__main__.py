"""`python -m grader.child FD DEVICE [--timing] [--compile-only]`: one worker, talking over the inherited socket FD.

Started by the trusted parent (grader/sandbox.py) with a fresh environment, in its own session, and, for
untrusted work in an official grade, already as the grade's unprivileged uid (grader/identity.py).
"""

from __future__ import annotations

import sys


def _main(argv: list[str]) -> None:
    from multiprocessing.connection import Connection

    from .worker import main

    fd, device, *flags = argv
    main(Connection(int(fd)), device, timing="--timing" in flags, compile_only="--compile-only" in flags)


if __name__ == "__main__":
    _main(sys.argv[1:])
