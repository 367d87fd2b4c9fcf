"""Reading results.json's values tolerantly: a member of an enum or None, a finite number or a default, an object or
{}. Shared by grader/results.py and grader/perfsummary.py (the results layer: it imports nothing of the grader)."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, TypeVar

_E = TypeVar("_E", bound=StrEnum)


def member(cls: type[_E], v: Any) -> _E | None:
    """v as a member of cls, or None (an unknown or malformed value read from a file)."""
    try:
        return cls(v)
    except (ValueError, TypeError):
        return None


def number(v: Any, default: float = 0.0) -> float:
    """v as a finite float, else default (results.json numbers may be null, strings or absent)."""
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return default
    return f if math.isfinite(f) else default


def obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def float_or_none(v: Any) -> float | None:
    """A number as a float (NaN and inf kept: a grade's own data before results.json is written), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)
