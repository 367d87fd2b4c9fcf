"""A problem's words for the student report: `reference/<problem>/hints.yaml` (see reference/glu/hints.yaml).

Why: docs/architecture.md, "Modules: the why", grader/problem/hints.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from grader.results import Code, Reason

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("reason", "dist", "dtype", "finding", "perf", "pattern", "formula")
TOP_TEXTS = ("later_rows",)  # top-level texts: wrong values in a padded case whose first row is right
# perf keys the report reads (grader/report/advice.py): the roofline and one-pass advice, the part's kind (cuda,
# triton), and the performance findings' codes.
PERF_WORDS = ("roofline", "one_pass")
PERF_CODES = (Code.BELOW_FLOOR, Code.HIDDEN_WORK, Code.WALL_EXCESS, Code.TIMED_WRONG)
# formula keys (grader/correctness/patterns.py): the operands by position, and the names of the reference's mistakes(x).
FORMULA_OPERANDS = ("first operand", "second operand")
WORD = re.compile(r"[a-z][a-z0-9_]*")  # a formula key: a mistake's name


@lru_cache(maxsize=16)
def load(problem: str, root: Path = ROOT) -> dict[str, Any]:
    """{section: {key: text}} plus top-level texts (e.g. 'later_rows'), for a problem name ('' or unknown: {})."""
    if not problem or "/" in problem or "\\" in problem or problem.startswith("."):
        return {}
    return load_file(root / "reference" / problem / "hints.yaml")


@lru_cache(maxsize=16)
def load_file(path: Path) -> dict[str, Any]:
    """`load`, for a hints.yaml by its path (the grader reads the one beside a problem's spec.yaml). The problem's
    load has validated it (grader/problem/spec.py); a report never fails over it, so what does not read is left
    out here."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k in SECTIONS and isinstance(v, dict):
            out[k] = {str(a): " ".join(str(b).split()) for a, b in v.items() if isinstance(b, str)}
        elif isinstance(v, str):
            out[str(k)] = " ".join(v.split())
    return out


def valid_keys(
    section: str, dists: Iterable[str], dtypes: Iterable[str], kinds: Iterable[str]
) -> tuple[str, ...] | None:
    """The keys a section may have for a problem whose cases use `dists` and `dtypes` and whose parts are of
    `kinds`; None for `formula` (its keys are the reference's mistakes, checked by the tests)."""
    if section == "reason":
        return tuple(str(r) for r in Reason if r != Reason.OK)
    if section == "finding":
        return tuple(str(c) for c in Code)
    if section == "pattern":
        return tuple(str(c) for c in Code if str(c).startswith("hint-"))
    if section == "dist":
        return tuple(sorted(set(dists)))
    if section == "dtype":
        return tuple(sorted(set(dtypes)))
    if section == "perf":
        return (*PERF_WORDS, *sorted(set(kinds)), *(str(c) for c in PERF_CODES))
    return None


def text(hints: dict[str, Any], section: str, key: str | None = None) -> str | None:
    """hints[section][key], or the top-level hints[section] when key is None; None when absent."""
    if key is None:
        v = hints.get(section)
        return v if isinstance(v, str) else None
    v = hints.get(section, {})
    return v.get(key) if isinstance(v, dict) else None
