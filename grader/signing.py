"""Signed results: tell a results.json the grader wrote from one a submission wrote.

An official grade (a key file given with `--secret-file`, and the grade marked official: Grade.official) carries
`extra_data.signature`: an HMAC-SHA256 of the rest of the file, keyed by the signing key derived from the grading
key (grader/keyfile.py: 256 random bits, so the key cannot be searched for from one's own signed results). Student
code never holds it, so a file it writes, or edits, does not verify. `python -m grader report DIR --secret-file KEY`
checks every file with the same key and flags the ones that fail. Local grades (no key file, or student code running
as the grader's own user, which can read the key file) are never signed: they are advisory.

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


def _key(key: bytes) -> bytes:
    """The signing key as given (grader/keyfile.py derives it); an integer seed is refused, not hashed."""
    if not isinstance(key, (bytes, bytearray)) or len(key) < 32:
        raise TypeError("signing needs the 32-byte signing key derived from a key file (grader/keyfile.py)")
    return bytes(key)


def _canonical(data: dict[str, Any]) -> bytes:
    """The bytes signed: the whole document less the signature, keys sorted, so that reading the file back and
    re-serializing it gives the same bytes (json floats round-trip exactly)."""
    body = copy.deepcopy(data)
    extra = body.get("extra_data")
    if isinstance(extra, dict):
        extra.pop("signature", None)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(data: dict[str, Any], key: bytes) -> dict[str, Any]:
    """data with extra_data.signature set (a new dict; data is unchanged). key: keyfile.Key.signing."""
    out = copy.deepcopy(data)
    out.setdefault("extra_data", {})["signature"] = hmac.new(_key(key), _canonical(out), hashlib.sha256).hexdigest()
    return out


def verify(data: dict[str, Any], key: bytes) -> str:
    """VALID, INVALID (signed with another key, or edited since) or UNSIGNED (no signature at all)."""
    extra = data.get("extra_data")
    got = extra.get("signature") if isinstance(extra, dict) else None
    if not isinstance(got, str) or not got:
        return UNSIGNED
    k = _key(key)  # outside the try: a wrong key type is the caller's bug, not an invalid file
    try:
        want = hmac.new(k, _canonical(data), hashlib.sha256).hexdigest()
    except (TypeError, ValueError, RecursionError):  # not serializable: not something the grader wrote
        return INVALID
    return VALID if hmac.compare_digest(want, got) else INVALID
