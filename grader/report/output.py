"""results.json: a Grade in Gradescope's shape (with the leaderboard), written atomically, signed when official.

Also the atomic text writes every report file uses, and the advisory line every report shows."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from grader import signing
from grader.report import validate
from grader.results import Code, Grade, Kind, TimingView


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str))


def _clear_squatter(path: Path) -> None:
    """Something that is not a regular file where a result goes (a directory or a link a submission planted)
    would make the rename fail or write elsewhere: remove it first. The grader's results are never lost."""
    if path.is_symlink():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; results are for TAs and CI artifact uploads to read
        _clear_squatter(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# The schema's bound on numbers other than points (grader/results.schema.json, $defs.number): a grade's own values
# beyond it (a wrong kernel's max relative error of 1e32, say) are written as the bound, so that the file the
# grader writes always passes the schema the TA report checks it against.
NUMBER_BOUND = 1e18


def finite(obj: Any) -> Any:
    """A copy with every NaN/inf float replaced by None (Gradescope's parser, like every strict one, rejects NaN)
    and every number clamped to +-NUMBER_BOUND."""
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, float):
        return max(-NUMBER_BOUND, min(NUMBER_BOUND, obj)) if math.isfinite(obj) else None
    if isinstance(obj, int):
        return obj if abs(obj) <= NUMBER_BOUND else int(math.copysign(NUMBER_BOUND, obj))
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _untrusted_time(g: Grade, part: str, case: str, floor_ms: float, t: TimingView) -> bool:
    """Times that must not rank: outputs that failed verification, times under the physical floor, forfeit parts."""
    unreal = (Code.TIMED_WRONG, Code.BELOW_FLOOR)
    for r in g.tests:
        if r.kind == Kind.PERFORMANCE and r.part == part and r.extra.get("case") == case:
            if any(f.code in unreal for f in r.findings):
                return True
    eff = t.effective_ms
    if eff is None or not math.isfinite(eff) or eff <= 0 or (floor_ms and eff < floor_ms):
        return True
    return part in g.forfeits


def leaderboard(g: Grade) -> list[dict[str, Any]]:
    """Gradescope leaderboard columns from the perf data: per perf case and implementation, the kernel time
    (ms, lower is better) and the share of the measured copy roofline (%, higher is better). Times that were
    not real work (failed verification, under the physical floor, forfeit part) are left off."""
    board: list[dict[str, Any]] = []
    for case, c in g.perf.cases.items():
        for impl, t in c.impls.items():
            if _untrusted_time(g, impl, case, c.floor_ms, t) or t.effective_ms is None:
                continue
            board.append({"name": f"{impl} {case} (ms)", "value": round(t.effective_ms, 5), "order": "asc"})
            pct = t.pct_roofline
            if pct is not None and math.isfinite(pct):
                board.append({"name": f"{impl} {case} (% of copy roofline)", "value": round(pct, 2), "order": "desc"})
    return board


def results_json(g: Grade) -> dict[str, Any]:
    """Gradescope's results.json: the Grade's own JSON, plus leaderboard entries when there is perf data."""
    data = g.to_json()
    if os.environ.get("GRADER_GRADESCOPE") == "1" and g.unearnable:  # set by the Gradescope zip's run_autograder
        pending = sum(1 for t in g.tests if t.pending)  # shown as passed, 0 of 0, "pending:" (TestResult.gradescope)
        data["output"] = (
            f"{g.unearnable:g} of {g.max_score:g} points need a GPU and are graded later by the course "
            f"staff; this score is the CPU checks only ({pending} tests pending).\n" + data["output"]
        ).rstrip("\n")
    board = leaderboard(g)
    if board:
        data["leaderboard"] = board
    out: dict[str, Any] = fit(finite(data))
    return out


CUT = " [cut to fit results.json's limits]"


def fit(data: dict[str, Any]) -> dict[str, Any]:
    """The grade as its own schema (grader/results.schema.json) and the TA report's size cap take it: a string, list
    or object over its cap is cut there, with a mark. Text a submission influenced reaches a grade (a worker's error
    line, its frames, its prints); without this, a forged 64 KiB error reply made a results.json that the TA
    report refuses, the student's row lost with it."""
    try:
        v = validate.validator()
    except ImportError:  # jsonschema missing: the TA report says so; the grade is written as it is
        return data
    for _ in range(4):  # a cut can only shorten; a few passes settle nested caps
        errors = [e for e in v.iter_errors(data) if e.validator in ("maxLength", "maxItems", "maxProperties")]
        if not errors:
            break
        for e in errors:
            try:
                _cut(data, list(e.absolute_path), e.validator, int(e.validator_value), e.instance)
            except (KeyError, IndexError, TypeError):  # under a part an earlier cut removed: the next pass sees
                pass
    for limit in (20_000, 2_000, 200):  # still over the file's cap (many long texts): cut every long string
        if len(json.dumps(data)) <= validate.MAX_FILE_BYTES * 0.9:
            break
        _cut_strings(data, limit)
    return data


def _cut_strings(data: Any, limit: int) -> None:
    """Every string value longer than limit, anywhere in data, cut to it with the mark (walked with a stack)."""
    stack = [data]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in list(items):
            if isinstance(v, str) and len(v) > limit:
                node[k] = v[: limit - len(CUT)] + CUT
            elif isinstance(v, (dict, list)):
                stack.append(v)


def _cut(data: Any, path: list[Any], what: str, limit: int, instance: Any) -> None:
    parent: Any = None
    node = data
    for k in path:
        parent, node = node, node[k]
    if what == "maxLength" and isinstance(node, dict) and isinstance(instance, str) and instance in node:
        node[instance[: max(0, limit - 3)] + "..."] = node.pop(instance)  # a key (propertyNames) too long
    elif what == "maxLength" and isinstance(node, str) and parent is not None:
        parent[path[-1]] = node[: max(0, limit - len(CUT))] + CUT
    elif what == "maxItems" and isinstance(node, list):
        del node[limit:]
    elif what == "maxProperties" and isinstance(node, dict):
        for k in list(node)[limit:]:
            del node[k]


def write_results(g: Grade, out_dir: Path, key: bytes | None = None) -> Path:
    """results.json, atomically. Signed (grader/signing.py) only when a signing key is given (keyfile.Key.signing)
    *and* the grade is official (g.official, decided by the trusted side): an advisory grade is never signed."""
    path = out_dir / "results.json"
    data = results_json(g)
    write_json_atomic(path, signing.sign(data, key) if key is not None and g.official else data)
    return path


ADVISORY = "advisory: not an official grade (unsigned)"


def advisory_line(official: Any, why: Any) -> str | None:
    """The line that says a grade is advisory, with its reasons; None for an official grade, or for a results.json
    written before grades said either (no `official` field)."""
    if official is not False:
        return None
    reasons = [str(w) for w in why] if isinstance(why, list) else []
    return ADVISORY + (": " + "; ".join(reasons) if reasons else "")


# grader/pipeline.py's (and grader/app/'s) reason for a grade made without --secret-file: a student's local grade.
NO_KEY = "no key file (--secret-file)"
PRACTICE = "practice grade: graded here without the course's key, so not an official grade (the autograder's is)"


def student_advisory(official: Any, why: Any) -> str | None:
    """What a student's terminal and report say of officialness. A local grade (no key) says once that it is a
    practice grade, and nothing of what else an official grade on this machine would need (a separate uid,
    unreadable staff files, the staff probe's answer): those are for the staff, in results.json, and their number
    depended on this machine and on timing (the probe's), so it differed between identical runs. Any other
    advisory grade keeps its reasons (a staff member grading with a key must see them)."""
    reasons = [str(w) for w in why] if isinstance(why, list) else []
    if official is False and any(w.startswith(NO_KEY) for w in reasons):
        return PRACTICE
    return advisory_line(official, why)


def advisory_of(g: Grade) -> str | None:
    """advisory_line for a grade read from a file: None when the file does not say official or advisory."""
    said = g.stated is None or g.stated.says_official
    return advisory_line(bool(g.official) if said else None, g.official_why)
