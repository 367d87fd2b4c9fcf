"""Signed results: tell a results.json the grader wrote from one a submission wrote.

When grading runs with a secret seed (`--secret-file`, or GRADER_SECRET_SEED), results.json carries
`extra_data.signature`: an HMAC-SHA256 of the rest of the file, keyed by a hash of that secret. Student code never
holds the secret (it is taken out of the environment before any worker starts, and the grader is non-dumpable), so
a file it writes, or edits, does not verify. `python -m grader report DIR` checks every file when given the same
secret and flags the ones that fail.

Why this matters: when student code runs as the grader's own user (a course machine without the container), it can
kill the grader and leave its own results.json behind (tests/exploits/kill_grader). The grade is then lost either
way, but the TA report shows the file as not written by the grader instead of counting it.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from typing import Any

VALID, INVALID, UNSIGNED, NOT_CHECKED = "valid", "INVALID", "unsigned", "not checked"


def _key(secret: int) -> bytes:
    return hashlib.sha256(f"kernel-grader results v1:{int(secret)}".encode()).digest()


def _canonical(data: dict[str, Any]) -> bytes:
    """The bytes signed: the whole document less the signature, keys sorted, so that reading the file back and
    re-serializing it gives the same bytes (json floats round-trip exactly)."""
    body = copy.deepcopy(data)
    extra = body.get("extra_data")
    if isinstance(extra, dict):
        extra.pop("signature", None)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(data: dict[str, Any], secret: int) -> dict[str, Any]:
    """data with extra_data.signature set (a new dict; data is unchanged)."""
    out = copy.deepcopy(data)
    out.setdefault("extra_data", {})["signature"] = hmac.new(_key(secret), _canonical(out), hashlib.sha256).hexdigest()
    return out


def verify(data: dict[str, Any], secret: int) -> str:
    """VALID, INVALID (signed with another secret, or edited since) or UNSIGNED (no signature at all)."""
    extra = data.get("extra_data")
    got = extra.get("signature") if isinstance(extra, dict) else None
    if not isinstance(got, str) or not got:
        return UNSIGNED
    try:
        want = hmac.new(_key(secret), _canonical(data), hashlib.sha256).hexdigest()
    except (TypeError, ValueError):  # not serializable: not something the grader wrote
        return INVALID
    return VALID if hmac.compare_digest(want, got) else INVALID
