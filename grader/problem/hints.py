"""A problem's words for the student report: `reference/<problem>/hints.yaml` (see reference/glu/hints.yaml).

The report picks entries by what the grader found (grader/results.py: reasons, finding codes) and by the case's
own data (dtype, input distribution); a problem without the file, or without an entry, gets the grader's generic
words. A key the grader never looks up is text no student ever sees (a `dist: inf_nan` where the spec's cases say
`special` silently dropped the special-values advice), so the file is validated against this schema and against
its spec when the problem loads (grader/problem/spec.py calls `validate`; tests/test_hints_schema.py runs it on every
problem): an unknown section, a key that is not a real reason, finding code, case distribution or dtype of the
spec, pattern code or perf key, or a value that is not text, is a SpecError naming the file, the key and the
valid choices. The report side (`load`) only reads text and never fails a report over the file."""

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
_WORD = re.compile(r"[a-z][a-z0-9_]*")


class HintsError(ValueError):
    """hints.yaml does not fit the schema or its spec. str(err) is one line: file, key, what was expected."""


@lru_cache(maxsize=16)
def load(problem: str, root: Path = ROOT) -> dict[str, Any]:
    """{section: {key: text}} plus top-level texts (e.g. 'later_rows'), for a problem name ('' or unknown: {})."""
    if not problem or "/" in problem or "\\" in problem or problem.startswith("."):
        return {}
    return load_file(root / "reference" / problem / "hints.yaml")


@lru_cache(maxsize=16)
def load_file(path: Path) -> dict[str, Any]:
    """`load`, for a hints.yaml by its path (the grader reads the one beside a problem's spec.yaml). The problem's
    load has validated it (`validate`); a report never fails over it, so what does not read is left out here."""
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


def validate(path: Path, dists: Iterable[str], dtypes: Iterable[str], kinds: Iterable[str]) -> None:
    """Check the hints.yaml at `path` (absent: nothing to check) against the schema and the spec's cases (the
    distributions and dtypes they use) and parts (their kinds). Raises HintsError, one line, on the first fault."""
    dists, dtypes, kinds = tuple(dists), tuple(dtypes), tuple(kinds)
    if not path.is_file():
        return
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise HintsError(f"{path}: cannot read it ({e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise HintsError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise HintsError(f"{path}: expected a mapping of sections ({', '.join(SECTIONS + TOP_TEXTS)})")
    for key, value in raw.items():
        if key in TOP_TEXTS:
            _text(path, str(key), value)
            continue
        if key not in SECTIONS:
            raise HintsError(f"{path}: unknown key '{key}' (valid: {', '.join(SECTIONS + TOP_TEXTS)})")
        if not isinstance(value, dict):
            raise HintsError(f"{path}: key '{key}': expected a mapping of key to text, got {type(value).__name__}")
        allowed = valid_keys(str(key), dists, dtypes, kinds)
        for sub, words in value.items():
            where = f"{key}.{sub}"
            if allowed is None:
                if not (isinstance(sub, str) and (sub in FORMULA_OPERANDS or _WORD.fullmatch(sub))):
                    raise HintsError(
                        f"{path}: key '{where}': expected one of {', '.join(FORMULA_OPERANDS)} or the name of a "
                        "mistake the reference's mistakes(x) returns"
                    )
            elif str(sub) not in allowed:
                what = {
                    "dist": "a distribution that no case of the spec uses",
                    "dtype": "a dtype that no case of the spec uses",
                }.get(str(key), f"not a {key} key the grader reads")
                raise HintsError(f"{path}: key '{where}': {what} (valid: {', '.join(allowed)})")
            _text(path, where, words)


def _text(path: Path, where: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise HintsError(f"{path}: key '{where}': expected a non-empty text, got {value!r:.60}")


def text(hints: dict[str, Any], section: str, key: str | None = None) -> str | None:
    """hints[section][key], or the top-level hints[section] when key is None; None when absent."""
    if key is None:
        v = hints.get(section)
        return v if isinstance(v, str) else None
    v = hints.get(section, {})
    return v.get(key) if isinstance(v, dict) else None
