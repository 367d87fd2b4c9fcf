"""Every results.json a TA report reads is validated before anything reads it: strict JSON (no NaN or Infinity, no
number too big for a float, no integer of more than 30 digits), at most 8 MiB and 32 levels deep, then
grader/results.schema.json (points within [-1e6, 1e6], strings, arrays and objects capped, the fields the report
reads typed). A file that fails is an Unreadable with one bounded line saying what is wrong, never an exception
that costs the class its report."""

from __future__ import annotations

import itertools
import json
import math
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "results.schema.json"
# A real results.json is well under 1 MiB (the H200 staff grade: 57 KB). The schema check costs ~12 s per MiB of a
# crafted file on 2 cores: 8 MiB made one student's uploaded file cost the TA report ~100 s.
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_TESTS = 5000  # the schema's maxItems for tests, checked first
MAX_DEPTH = 32  # the grader writes 8 levels
MAX_INT_DIGITS = 30


@dataclass
class Unreadable:
    path: str  # relative to DIR
    reason: str


def rel(p: Path, root: Path) -> str:
    try:
        return p.relative_to(root).as_posix() or "."
    except ValueError:
        return p.name


class BadResults(ValueError):
    """A results.json that cannot be used; the message says what is wrong (one line, bounded)."""


def _short(v: Any) -> str:
    r = reprlib.Repr()
    r.maxstring, r.maxother, r.maxlist, r.maxdict, r.maxlevel = 40, 40, 3, 3, 2
    return r.repr(v)


def _json_type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(v), "null"
    )


def _no_constant(name: str) -> Any:
    raise BadResults(f"{name} is not JSON (no NaN or Infinity in a results.json)")


def _bounded_int(s: str) -> int:
    digits = len(s.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise BadResults(f"an integer with {digits} digits (at most {MAX_INT_DIGITS})")
    return int(s)


def _finite_float(s: str) -> float:
    f = float(s)
    if not math.isfinite(f):
        raise BadResults(f"the number {s[:40]} is too big for a float")
    return f


def _depth_over(data: Any, limit: int) -> bool:
    """Whether data nests more than limit levels of arrays/objects (iterative: no recursion on hostile input)."""
    stack = [(data, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d >= limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


_VALIDATOR: Any = None
# What validator() needs, in the words every command that reaches it without jsonschema says.
NEEDS_JSONSCHEMA = "the TA report needs the jsonschema package (pip install -c constraints.txt -r requirements.txt)"


def validator() -> Any:
    """The Draft 2020-12 validator of grader/results.schema.json (built once). Needs the jsonschema package."""
    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema

        schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATOR = jsonschema.Draft202012Validator(schema)
    return _VALIDATOR


def _where(path: Any) -> str:
    out = "$"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{_short(str(p))[1:-1]}"
    return out


def _schema_reason(err: Any) -> str:
    """One short line for a jsonschema ValidationError; never the whole offending value."""
    kw, want, inst = err.validator, err.validator_value, err.instance
    if kw in ("minimum", "maximum"):
        what = f"{_short(inst)} is {'under' if kw == 'minimum' else 'over'} the {kw} {want:g}"
    elif kw == "maxLength":
        what = f"a string of {len(inst)} characters (at most {want})"
    elif kw in ("maxItems", "maxProperties"):
        what = f"{len(inst)} {'items' if kw == 'maxItems' else 'keys'} (at most {want})"
    elif kw == "type":
        what = f"{_json_type(inst)} {_short(inst)} is not {want if isinstance(want, str) else ' or '.join(want)}"
    elif kw == "required":
        what = f"missing {', '.join(repr(k) for k in want if isinstance(inst, dict) and k not in inst)}"
    elif kw == "additionalProperties" and isinstance(inst, dict):
        allowed = set((err.schema or {}).get("properties") or {})
        what = "unexpected key(s) " + ", ".join(_short(k) for k in [k for k in inst if k not in allowed][:5])
    elif kw == "enum":
        what = f"{_short(inst)} is not one of {', '.join(map(str, want))}"
    else:
        what = f"fails '{kw}' ({_short(want)})"
    return f"{_where(err.absolute_path)}: {what}"


def parse_results(raw: bytes, size: int | None = None) -> dict[str, Any]:
    """A results.json's bytes -> its dict, or BadResults naming what is wrong. Never anything else: strict JSON,
    bounded size, depth, numbers and strings, then grader/results.schema.json. size: the file's, when raw is only
    its first MAX_FILE_BYTES + 1 bytes."""
    size = max(size or 0, len(raw))
    if size > MAX_FILE_BYTES:
        raise BadResults(f"{size / 2**20:.1f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB a results.json may be")
    if not raw.strip():
        raise BadResults("empty file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadResults("not UTF-8 text") from None
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int, parse_float=_finite_float)
    except BadResults as e:
        raise BadResults(f"corrupt JSON: {e}") from None
    except json.JSONDecodeError as e:
        raise BadResults(f"corrupt JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise BadResults("corrupt JSON: nested too deeply") from None
    except ValueError as e:  # int() limits and the like
        raise BadResults(f"corrupt JSON: {' '.join(str(e).split())[:120]}") from None
    if not isinstance(data, dict):
        raise BadResults(f"not a grader results.json (a JSON {_json_type(data)}, not an object)")
    if not isinstance(data.get("tests"), list):
        raise BadResults("not a grader results.json (no 'tests' list)")
    if _depth_over(data, MAX_DEPTH):
        raise BadResults(f"nested more than {MAX_DEPTH} levels deep")
    if len(data["tests"]) > MAX_TESTS:  # before the schema: it checks every item of an over-long list first
        raise BadResults(f"{len(data['tests'])} tests, over the {MAX_TESTS} a results.json may have")
    try:
        from jsonschema.exceptions import best_match

        # The most relevant of the first errors, not of all: a crafted file can hold a million (each costs time).
        err = best_match(itertools.islice(validator().iter_errors(data), 100))
    except RecursionError:
        raise BadResults("could not be checked (nested too deeply)") from None
    if err is not None:
        raise BadResults(f"fails grader/results.schema.json: {_schema_reason(err)}"[:400])
    return data
