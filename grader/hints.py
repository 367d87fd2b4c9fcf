"""A problem's words for the student report: `reference/<problem>/hints.yaml` (see reference/glu/hints.yaml).

The report picks entries by what the grader found (grader/results.py: reasons, finding codes) and by the case's
own data (dtype, input distribution); a problem without the file, or without an entry, gets the grader's generic
words. Only text is read here: a malformed file is the same as none, so a report is never lost to it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("reason", "dist", "dtype", "finding", "perf", "pattern", "formula")


@lru_cache(maxsize=16)
def load(problem: str, root: Path = ROOT) -> dict[str, Any]:
    """{section: {key: text}} plus top-level texts (e.g. 'later_rows'), for a problem name ('' or unknown: {})."""
    if not problem or "/" in problem or "\\" in problem or problem.startswith("."):
        return {}
    return load_file(root / "reference" / problem / "hints.yaml")


@lru_cache(maxsize=16)
def load_file(path: Path) -> dict[str, Any]:
    """`load`, for a hints.yaml by its path (the grader reads the one beside a problem's spec.yaml)."""
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


def text(hints: dict[str, Any], section: str, key: str | None = None) -> str | None:
    """hints[section][key], or the top-level hints[section] when key is None; None when absent."""
    if key is None:
        v = hints.get(section)
        return v if isinstance(v, str) else None
    v = hints.get(section, {})
    return v.get(key) if isinstance(v, dict) else None
