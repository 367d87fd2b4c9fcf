"""Signed results: tell a results.json the grader wrote from one a submission wrote.

An official grade (a key file given with `--secret-file`, and the grade marked official: Grade.official) carries
`extra_data.signature`: an HMAC-SHA256 of the rest of the file, keyed by the signing key derived from the grading
key (grader/keyfile.py: 256 random bits, so the key cannot be searched for from one's own signed results). Student
code never holds it, so a file it writes, or edits, does not verify. `python -m grader report DIR --secret-file KEY`
checks every file with the same key and flags the ones that fail. Local grades (no key file, or student code running
as the grader's own user, which can read the key file) are never signed: they are advisory.

Why: docs/SECURITY.md, "Modules: the why", grader/signing.py.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VALID, INVALID, UNSIGNED, NOT_CHECKED = "valid", "INVALID", "unsigned", "not checked"
# The TA report's verdicts on a file whose HMAC verifies (grader/report/classdata.py): its signed identity is another
# row's (or its signature is in several rows), or it has no signed student id at all (an old file, a laptop grade).
REPLAYED, NO_IDENTITY = "replayed", "identity not signed"
IDENTITY = "identity"  # the key of the identity block in extra_data
MAX_ID_CHARS = 200  # a student id, an email, a Gradescope id: what the schema allows too (results.schema.json)
MAX_USERS = 50  # members of one Gradescope group submission


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


# ----------------------------------------------------------------------------------------------------------------
# Whose grade it is


def files_digest(folder: Path) -> str:
    """SHA-256 over the graded files: every regular file directly in folder (the grade's own read-only copy of the
    submission, grader/identity.py), sorted by name, each as its name's and its bytes' lengths and values, so that
    no two different sets of files hash alike by moving bytes between a name and a content."""
    h = hashlib.sha256(b"graded-files-v1\0")
    for p in sorted(folder.iterdir(), key=lambda q: q.name):
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode):
            continue
        name = p.name.encode("utf-8", "surrogateescape")
        h.update(len(name).to_bytes(8, "big") + name + st.st_size.to_bytes(8, "big"))
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _code_digest() -> str:
    """A short hash of the grader's own code (its .py files and the results schema), so that two installs of the
    same version number that differ are told apart."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted([*root.rglob("*.py"), root / "results.schema.json"]):
        if "__pycache__" in p.parts or not p.is_file():
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def grader_version() -> str:
    """'<package version>+<code hash>': the package's version when it is installed, else 'source'."""
    from importlib import metadata

    try:
        version = metadata.version("kernel-grader")
    except metadata.PackageNotFoundError:
        version = "source"
    return f"{version}+{_code_digest()}"


def clean_id(v: Any) -> str | None:
    """A student id, email or Gradescope id as one bounded line; None when there is none. Not a validator for a
    person's input (grader/app/grade.py refuses a bad --student-id): this bounds what comes from a file."""
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        return None
    text = " ".join(str(v).split())[:MAX_ID_CHARS]
    return text or None


def new_identity(
    *,
    student_id: str | None,
    files_sha256: str | None,
    problem: str,
    spec_sha256: str,
    submission_id: str | None = None,
    users: list[dict[str, str]] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The identity block a grade signs (extra_data.identity). student_id None: the grade was made without one (a
    laptop, a plain `grade`): the TA report then says "identity not signed" and does not import it. submission_id
    and users: Gradescope's (its submission_metadata.json: the submission's id, each member's sid and email)."""
    ident: dict[str, Any] = {
        "student_id": clean_id(student_id),
        "files_sha256": files_sha256,
        "problem": problem,
        "spec_sha256": spec_sha256,
        "grader_version": grader_version(),
        "graded_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nonce": secrets.token_hex(16),
    }
    if submission_id is not None:
        ident["submission_id"] = clean_id(submission_id)
    if users:
        ident["users"] = [
            {k: clean_id(u.get(k)) or "" for k in ("sid", "email")} for u in users[:MAX_USERS] if isinstance(u, dict)
        ]
    return ident


@dataclass(frozen=True)
class Identity:
    """A file's identity block, read back (every field bounded; a malformed one is None)."""

    student_id: str | None
    files_sha256: str | None
    problem: str | None
    graded_at: str | None
    nonce: str | None
    submission_id: str | None
    users: tuple[tuple[str, str], ...]  # (sid, email)
    spec_sha256: str | None = None  # the graded problem's spec.yaml, as the grade read it

    def keys(self) -> set[str]:
        """Every id this grade was signed for, casefolded: the student id, each Gradescope member's sid and email,
        and the Gradescope export's folder name for its submission (submission_<id>)."""
        out = {self.student_id or ""} | {k for u in self.users for k in u}
        if self.submission_id:
            out |= {self.submission_id, f"submission_{self.submission_id}"}
        return {k.casefold() for k in out if k}

    @property
    def who(self) -> str:
        """For people: the student id, else the Gradescope members, else the submission."""
        members = ", ".join(sid or email for sid, email in self.users if sid or email)
        return self.student_id or members or (f"submission_{self.submission_id}" if self.submission_id else "nobody")


def identity_of(data: dict[str, Any]) -> Identity | None:
    """The identity block of a results.json (None when it has none: a file from before identities were signed)."""
    extra = data.get("extra_data")
    raw = extra.get(IDENTITY) if isinstance(extra, dict) else None
    if not isinstance(raw, dict):
        return None
    users = raw.get("users")
    pairs = tuple(
        (clean_id(u.get("sid")) or "", clean_id(u.get("email")) or "")
        for u in (users[:MAX_USERS] if isinstance(users, list) else [])
        if isinstance(u, dict)
    )
    return Identity(
        student_id=clean_id(raw.get("student_id")),
        files_sha256=clean_id(raw.get("files_sha256")),
        problem=clean_id(raw.get("problem")),
        graded_at=clean_id(raw.get("graded_at")),
        nonce=clean_id(raw.get("nonce")),
        submission_id=clean_id(raw.get("submission_id")),
        users=pairs,
        spec_sha256=clean_id(raw.get("spec_sha256")),
    )
