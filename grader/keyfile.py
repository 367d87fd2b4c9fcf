"""The grading key: 256 random bits in a staff-only file, made once by `python -m grader keygen --out FILE`.

It is read only from a file, never from the environment, and the file must be private. The key file is read
once, by the CLI, before any worker is spawned; the raw key is not kept.

Why: docs/SECURITY.md, "Modules: the why", grader/keyfile.py.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import UsageError

KEY_BYTES = 32  # what keygen writes: 64 hex characters
MIN_HEX = 2 * KEY_BYTES  # what a key file must hold at least (256 bits)
MAX_FILE_BYTES = 4096  # a key file is a line of hex; anything this big is not one
ENV_VAR = "GRADER_SECRET_SEED"  # the old, refused way
KEYGEN = "python -m grader keygen --out FILE"
SIGNING_LABEL = b"kernel-grader v2 / results.json signing key"
INPUT_LABEL = b"kernel-grader v2 / input secret"
_HEX = re.compile(r"[0-9a-fA-F]+")


class KeyFileError(UsageError):
    """The key file cannot be used. One line, naming the fix."""


@dataclass(frozen=True)
class Key:
    """What the grader keeps of the key: the two derived values. repr never shows them."""

    signing: bytes = field(repr=False)  # HMAC key for results.json (grader/signing.py)
    inputs: int = field(repr=False)  # mixed into every input seed (grader/problem/inputs.py mix_seed)
    path: str = ""


def derive(material: bytes, path: str = "") -> Key:
    """The signing key and the input secret, each an HMAC-SHA256 of its own label under the key material."""
    if len(material) < MIN_HEX:
        raise KeyFileError(f"a key needs at least {MIN_HEX} hex characters; run `{KEYGEN}`")
    signing = hmac.new(material, SIGNING_LABEL, hashlib.sha256).digest()
    inputs = int.from_bytes(hmac.new(material, INPUT_LABEL, hashlib.sha256).digest()[:8], "little") & ((1 << 63) - 1)
    return Key(signing=signing, inputs=inputs, path=path)


def local_input_secret() -> int:
    """Without a key (a local grade), a fresh secret per run: nothing about the inputs can be precomputed."""
    return secrets.randbits(63)


def refuse_environment() -> None:
    """GRADER_SECRET_SEED is no longer read. If it is set, take it out of this process's environment (so no worker
    inherits it) and refuse to go on: the caller meant to grade with a secret, and would get none."""
    if os.environ.pop(ENV_VAR, None) is not None:
        raise KeyFileError(
            f"{ENV_VAR} is set, but the grader no longer reads a secret from the environment (other processes of "
            f"your user can read it); unset it, make a key with `{KEYGEN}` and pass --secret-file FILE"
        )


def keygen(path: Path) -> None:
    """Write 32 bytes from secrets.token_bytes as 64 hex characters to a new file of mode 0600. Never overwrites."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise KeyFileError(
            f"{path} already exists: keygen never overwrites a key (grades signed with it would stop verifying); "
            "choose another path"
        ) from None
    except OSError as e:
        raise KeyFileError(f"cannot create the key file {path}: {e.strerror or e}") from None
    try:
        os.fchmod(fd, 0o600)  # the umask may only have removed bits; make the mode exact
        os.write(fd, (_new_key_hex() + "\n").encode())
        os.fsync(fd)
    except OSError as e:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise KeyFileError(f"cannot write the key file {path}: {e.strerror or e}") from None
    os.close(fd)


def _new_key_hex() -> str:
    """64 hex characters from secrets.token_bytes; never all decimal digits (odds 1e-13), which load() refuses
    as an integer seed."""
    while True:
        h = secrets.token_bytes(KEY_BYTES).hex()
        if not h.isdigit():
            return h


def _is_student_uid(uid: int) -> bool:
    """Whether submission code may run as `uid`: one of GRADER_STUDENT_UID's (one uid or a range A-B) or of the
    pool's random range (grader/identity.py), from which every grade takes a uid of its own."""
    from grader.identity import UID_RANGE, configured_uids

    if UID_RANGE[0] <= uid <= UID_RANGE[1]:
        return True
    raw = os.environ.get("GRADER_STUDENT_UID")
    try:
        return bool(raw) and uid in configured_uids(raw or "")
    except ValueError:
        return False


def load(path: Path, *, euid: int | None = None, student_uid: int | None = None) -> Key:
    """Read and check a key file; return its derived values. euid and student_uid default to this process's
    effective uid and any uid submission code may run as (GRADER_STUDENT_UID's, or the pool's range; tests pass
    them to play another user)."""
    euid = os.geteuid() if euid is None else euid
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise KeyFileError(f"the key file {path} does not exist; make one with `{KEYGEN}`") from None
    except OSError as e:
        raise KeyFileError(f"cannot read the key file {path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)  # the checks are on the file actually opened, whatever links led to it
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"the key file {path} is not a regular file; make one with `{KEYGEN}`")
        student = st.st_uid == student_uid if student_uid is not None else _is_student_uid(st.st_uid)
        owner_ok = st.st_uid == euid or (euid == 0 and not student)
        if not owner_ok:
            raise KeyFileError(
                f"the key file {path} is owned by uid {st.st_uid}, not by this user (uid {euid}): "
                f"`chown {euid} {path}`, or make a new key with `{KEYGEN}`"
            )
        if st.st_mode & 0o077:
            raise KeyFileError(
                f"the key file {path} is readable or writable by others (mode {stat.S_IMODE(st.st_mode):04o}): "
                f"run `chmod 600 {path}` and make a new key with `{KEYGEN}` if anyone else could have read it"
            )
        raw = os.read(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        raise KeyFileError(f"the key file {path} is over {MAX_FILE_BYTES} bytes: not a key; make one with `{KEYGEN}`")
    text = raw.decode("ascii", errors="replace").strip()
    if not text:
        raise KeyFileError(f"the key file {path} is empty; make a key with `{KEYGEN}`")
    if re.fullmatch(r"[+-]?[0-9]+", text):
        raise KeyFileError(
            f"the key file {path} holds an integer (an old secret seed, which can be guessed); "
            f"make a 256-bit key with `{KEYGEN}`"
        )
    if not _HEX.fullmatch(text):
        raise KeyFileError(f"the key file {path} does not hold a hex key; make one with `{KEYGEN}`")
    if len(text) < MIN_HEX:
        raise KeyFileError(
            f"the key file {path} holds {len(text)} hex characters, fewer than {MIN_HEX} (256 bits); "
            f"make a key with `{KEYGEN}`"
        )
    return derive(text.lower().encode("ascii"), str(path))
