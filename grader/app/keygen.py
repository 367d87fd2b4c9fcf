"""`keygen --out FILE`: a new grading key (grader/keyfile.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader import keyfile


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    k = sub.add_parser("keygen", help="write a new 256-bit grading key (64 hex characters) to a new file of mode 0600")
    k.add_argument("--out", type=Path, required=True, metavar="FILE", help="where the key goes (never overwritten)")
    k.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return _keygen(args.out)


def _keygen(out: Path) -> int:
    keyfile.keygen(out)
    print(f"wrote a new grading key to {out} (mode 0600): grade with --secret-file {out}; keep it from students")
    return 0
