"""The grading key (grader/keyfile.py) and what is signed with it (grader/signing.py, report.write_results).

- keygen: 64 hex characters from secrets.token_bytes, a new file of mode 0600, never overwritten;
- the loader: refuses an integer seed, a short key, a file others can read or write, a file of another owner, and
  GRADER_SECRET_SEED in the environment, each with one line naming the fix;
- derivation: the signing key and the input secret are HMAC-SHA256 of distinct labels: stable, and independent;
- signing: only with the derived key bytes (an integer seed is refused), only an official grade;
- attack class 6: the old scheme (SHA-256 of an integer seed) falls to a brute force from one signed file.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path

import pytest

from grader import cli, keyfile, report, signing
from grader import results as gr
from grader.app import grade as app_grade
from grader.results import PASSED, Grade

HINT = "python -m grader keygen --out FILE"


def _write_key(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _grade(official: bool = True) -> Grade:
    g = Grade(problem="glu", submission="s", device="cpu", official=official)
    g.tests.append(gr.TestResult("triton / correctness / tiny", "triton", "correctness", 1.0, 1.0, PASSED, "ok", {"case": "tiny"}))
    return g


# ----------------------------------------------------------------------------------------------------------------
# keygen


def test_keygen_writes_64_hex_characters_to_a_new_0600_file(tmp_path):
    old = os.umask(0)  # a permissive umask must not widen the mode
    try:
        keyfile.keygen(tmp_path / "a")
    finally:
        os.umask(old)
    keyfile.keygen(tmp_path / "b")
    a, b = ((tmp_path / n).read_text() for n in "ab")
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o600
    assert len(a.strip()) == 64 and int(a, 16) >= 0 and a.endswith("\n")
    assert a != b, "two keys must differ"
    k = keyfile.load(tmp_path / "a")
    assert k == keyfile.derive(a.strip().encode(), str(tmp_path / "a"))


def test_keygen_refuses_to_overwrite(tmp_path, capsys):
    key = tmp_path / "grader_key"
    assert cli.main(["keygen", "--out", str(key)]) == 0
    first = key.read_text()
    assert "grade with --secret-file" in capsys.readouterr().out
    assert cli.main(["keygen", "--out", str(key)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grader error: ") and "already exists" in err and err.count("\n") == 1
    assert key.read_text() == first, "the existing key was changed"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    assert cli.main(["keygen", "--out", str(link)]) == 2  # a planted link is not followed
    assert not (tmp_path / "elsewhere").exists()
    capsys.readouterr()


# ----------------------------------------------------------------------------------------------------------------
# The loader


@pytest.mark.parametrize("content, says", [
    ("271828182845\n", "holds an integer"),
    ("0", "holds an integer"),
    ("9" * 80, "holds an integer"),
    ("abcdef0123", "fewer than 64"),
    ("ab" * 31 + "\n", "fewer than 64"),
    ("", "is empty"),
    ("not a key at all, just words" * 3, "does not hold a hex key"),
])
def test_the_loader_refuses_what_is_not_a_256_bit_key(tmp_path, content, says):
    path = _write_key(tmp_path / "k", content)
    with pytest.raises(keyfile.KeyFileError) as e:
        keyfile.load(path)
    msg = str(e.value)
    assert says in msg and HINT in msg and "\n" not in msg, msg


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o644, 0o660, 0o666])
def test_the_loader_refuses_a_key_others_can_read_or_write(tmp_path, mode):
    path = _write_key(tmp_path / "k", "ab" * 32, mode)
    with pytest.raises(keyfile.KeyFileError) as e:
        keyfile.load(path)
    assert f"chmod 600 {path}" in str(e.value) and f"{mode:04o}" in str(e.value)


def test_the_loader_refuses_a_key_of_another_owner(tmp_path):
    path = _write_key(tmp_path / "k", "ab" * 32)
    owner = path.stat().st_uid
    with pytest.raises(keyfile.KeyFileError) as e:
        keyfile.load(path, euid=owner + 1 if owner else 1000)  # as another, unprivileged user
    assert "chown" in str(e.value) and f"owned by uid {owner}" in str(e.value)
    # As root (the container, where the bind-mounted key keeps its owner from the host), another owner is fine,
    # unless it is the student user's.
    if owner == 0:
        os.chown(path, 12345, -1)  # we are root: give the file another owner
        owner = 12345
    assert keyfile.load(path, euid=0, student_uid=owner + 1).signing
    with pytest.raises(keyfile.KeyFileError, match="chown"):
        keyfile.load(path, euid=0, student_uid=owner)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
@pytest.mark.parametrize("configured", ["", "20000", "20000-20010"])
def test_as_root_a_key_owned_by_any_uid_submission_code_may_run_as_is_refused(tmp_path, monkeypatch, configured):
    """Grades take their uid from a pool (GRADER_STUDENT_UID's uid or range, else a random uid of
    identity.UID_RANGE): a key owned by any of them could be read by some grade's submission code."""
    from grader.identity import UID_RANGE

    monkeypatch.setenv("GRADER_STUDENT_UID", configured) if configured else monkeypatch.delenv(
        "GRADER_STUDENT_UID", raising=False
    )
    path = _write_key(tmp_path / "k", "ab" * 32)
    pooled = [UID_RANGE[0], UID_RANGE[1]] + ([20000, 20005 if "-" in configured else 20000] if configured else [])
    for uid in pooled:
        os.chown(path, uid, -1)
        with pytest.raises(keyfile.KeyFileError, match="chown"):
            keyfile.load(path, euid=0)
    os.chown(path, 12345, -1)  # a host user's key, bind-mounted: accepted
    assert keyfile.load(path, euid=0).signing


def test_the_loader_refuses_a_missing_file_or_a_directory(tmp_path):
    with pytest.raises(keyfile.KeyFileError, match="does not exist"):
        keyfile.load(tmp_path / "nope")
    d = tmp_path / "dir"
    d.mkdir(mode=0o700)
    with pytest.raises(keyfile.KeyFileError, match="not a regular file"):
        keyfile.load(d)


def test_the_secret_seed_variable_is_removed_and_refused(monkeypatch):
    monkeypatch.setenv("GRADER_SECRET_SEED", "12345")
    with pytest.raises(keyfile.KeyFileError) as e:
        keyfile.refuse_environment()
    assert "--secret-file" in str(e.value) and HINT in str(e.value)
    assert "GRADER_SECRET_SEED" not in os.environ
    keyfile.refuse_environment()  # unset: nothing to say


# ----------------------------------------------------------------------------------------------------------------
# Derivation


def test_the_two_derived_values_are_stable_and_independent():
    material = ("00112233445566778899aabbccddeeff" * 2).encode()
    k = keyfile.derive(material)
    # Known answers: a change here makes every signed results.json and every input of past grades unreproducible.
    assert k.signing.hex() == "7ad85c70617ebf417bcd9ff5b3991110cb88cb46aee51722ba94d215ff31f8e2"
    assert k.inputs == 363219969456164564
    assert k == keyfile.derive(material)
    assert k.signing == hmac.new(material, keyfile.SIGNING_LABEL, hashlib.sha256).digest()
    assert keyfile.SIGNING_LABEL != keyfile.INPUT_LABEL
    assert len(k.signing) == 32 and 0 <= k.inputs < 2**63
    assert k.inputs != int.from_bytes(k.signing[:8], "little") & (2**63 - 1)
    assert k.signing.hex() not in repr(k) and str(k.inputs) not in repr(k)
    other = keyfile.derive(material[:-1] + b"0")
    assert other.signing != k.signing and other.inputs != k.inputs
    with pytest.raises(keyfile.KeyFileError):
        keyfile.derive(b"12345")


def test_a_local_grade_gets_a_fresh_input_secret_and_a_keyed_one_the_derived_one(tmp_path, monkeypatch, capsys):
    seen = []

    def fake_grade(problem, opts, progress, beside=None):
        seen.append(opts)
        return _grade(official=opts.keyed)

    monkeypatch.setattr(app_grade, "grade", fake_grade)
    monkeypatch.delenv("GRADER_SECRET_SEED", raising=False)
    sub = tmp_path / "sub"
    sub.mkdir()
    key = tmp_path / "grader_key"
    keyfile.keygen(key)
    for extra in ([], [], ["--secret-file", str(key), "--allow-advisory"]):  # advisory here: grader/preflight.py
        assert cli.main(["grade", "--submission", str(sub), "--out", str(tmp_path / "out"), "--device", "cpu", *extra]) == 0
    out = capsys.readouterr().out
    assert seen[0].secret != seen[1].secret, "a local grade must not reuse an input secret"
    assert not seen[0].keyed and seen[2].keyed and seen[2].secret == keyfile.load(key).inputs
    assert "practice grade: graded here without the course's key" in out  # the keyless grades (output.PRACTICE)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())  # the keyed (and here official) grade
    assert signing.verify(doc, keyfile.load(key).signing) == signing.VALID


@pytest.mark.parametrize("setup, says", [
    (lambda p, mp: _write_key(p, "4242\n"), "holds an integer"),
    (lambda p, mp: _write_key(p, "ab" * 32, 0o644), "chmod 600"),
    (lambda p, mp: mp.setenv("GRADER_SECRET_SEED", "4242") or keyfile.keygen(p), "GRADER_SECRET_SEED"),
])
def test_grading_with_a_bad_key_stops_with_one_line(tmp_path, monkeypatch, capsys, setup, says):
    monkeypatch.setattr(app_grade, "grade", lambda *a, **k: pytest.fail("graded with a bad key"))
    monkeypatch.delenv("GRADER_SECRET_SEED", raising=False)
    key = tmp_path / "k"
    setup(key, monkeypatch)
    sub = tmp_path / "sub"
    sub.mkdir()
    for cmd in ("grade", "autograde"):
        assert cli.main([cmd, "--submission", str(sub), "--out", str(tmp_path / "out"), "--secret-file", str(key)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("grader error: ") and says in err and err.count("\n") == 1, err
        monkeypatch.delenv("GRADER_SECRET_SEED", raising=False)
        if says == "GRADER_SECRET_SEED":
            monkeypatch.setenv("GRADER_SECRET_SEED", "4242")


# ----------------------------------------------------------------------------------------------------------------
# Signing


K = keyfile.derive(("c0ffee" * 11).encode())
K2 = keyfile.derive(("decade" * 11).encode())


def test_signing_with_the_derived_key(tmp_path):
    g = _grade(official=True)
    d = json.loads(report.write_results(g, tmp_path, key=K.signing).read_text())
    assert signing.verify(d, K.signing) == signing.VALID
    assert signing.verify(d, K2.signing) == signing.INVALID  # another key
    e = copy.deepcopy(d)
    e["tests"][0]["score"] = 2.0
    assert signing.verify(e, K.signing) == signing.INVALID  # edited
    e = copy.deepcopy(d)
    e["extra_data"]["official"] = False
    assert signing.verify(e, K.signing) == signing.INVALID  # the official flag is signed too
    resigned = signing.sign(d, K2.signing)  # signed under another key: not this grader's
    assert signing.verify(resigned, K.signing) == signing.INVALID
    del e["extra_data"]["signature"]
    assert signing.verify(e, K.signing) == signing.UNSIGNED
    for bad in (12345, "c0ffee" * 11, b"short"):
        with pytest.raises(TypeError):
            signing.sign(d, bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            signing.verify(d, bad)  # type: ignore[arg-type]


def test_a_grade_that_is_not_official_is_never_signed(tmp_path):
    g = _grade(official=False)
    g.official_why = ["student code ran as the grader's own user"]
    d = json.loads(report.write_results(g, tmp_path, key=K.signing).read_text())
    assert "signature" not in d["extra_data"]
    assert d["extra_data"]["official"] is False
    assert d["extra_data"]["not_official_because"] == ["student code ran as the grader's own user"]
    g.official = True
    d = json.loads(report.write_results(g, tmp_path).read_text())  # official, but no key: nothing to sign with
    assert "signature" not in d["extra_data"]


# ----------------------------------------------------------------------------------------------------------------
# Attack class 6: forging a signature


def _old_sign(data: dict, seed: int) -> str:
    """The scheme before grader/keyfile.py: HMAC keyed by SHA-256 of an integer seed."""
    key = hashlib.sha256(f"kernel-grader results v1:{seed}".encode()).digest()
    return hmac.new(key, signing._canonical(data), hashlib.sha256).hexdigest()


def test_the_old_integer_seed_falls_to_a_brute_force_and_the_new_key_has_no_seed_to_search():
    """A student holding one signed results.json of their own searched the seeds offline, found the one that
    reproduces its signature, and signed a forged 76/76 that the TA report called valid. Here: a 5-digit seed,
    found in well under a second; a course's seed (a date, a course number) is no harder."""
    mine = {"score": 12.0, "tests": [], "extra_data": {"student_id": "me"}}
    seed = 31337
    sig = _old_sign(mine, seed)
    body = signing._canonical(mine)
    found = next(s for s in range(100_000)
                 if hmac.compare_digest(hmac.new(hashlib.sha256(f"kernel-grader results v1:{s}".encode()).digest(), body,
                                                 hashlib.sha256).hexdigest(), sig))
    assert found == seed
    forged = {"score": 76.0, "tests": [], "extra_data": {"student_id": "me"}}
    forged["extra_data"]["signature"] = _old_sign(forged, found)
    assert forged["extra_data"]["signature"] == _old_sign(forged, seed), "the forgery would have verified"
    # Now: no integer is accepted anywhere a key goes; the key is 256 random bits and the signing key an HMAC of it.
    with pytest.raises(TypeError):
        signing.sign(mine, seed)  # type: ignore[arg-type]
    with pytest.raises(keyfile.KeyFileError):
        keyfile.derive(str(seed).encode())


def test_the_ta_report_and_the_student_report_say_a_grade_is_advisory(tmp_path):
    from grader.report import studentreport, tareport

    g = _grade(official=False)
    g.official_why = ["the grader is not root, so submission code runs as the grader's own user"]
    report.write_results(g, tmp_path / "class" / "local")
    official = _grade(official=True)  # graded for the student whose folder it is in (grader/signing.py identity)
    spec = (Path(__file__).resolve().parent.parent / "reference" / "glu" / "spec.yaml").read_bytes()
    official.identity = signing.new_identity(student_id="official", files_sha256="ab" * 32, problem="glu",
                                             spec_sha256=hashlib.sha256(spec).hexdigest())  # this class's spec
    report.write_results(official, tmp_path / "class" / "official", key=K.signing)
    _, _, subs, bad = tareport.write_ta_report(tmp_path / "class", tmp_path / "ta", key=K.signing)
    flags = {s.student: s.flags for s in subs}
    assert not bad and flags["official"] == [], flags
    assert flags["local"][0].startswith("NOT WRITTEN BY THE GRADER"), flags["local"]
    assert "advisory: not an official grade (unsigned): the grader is not root" in flags["local"][1], flags["local"]
    md, page = studentreport.write_student_report(tmp_path / "class" / "local" / "results.json", tmp_path / "sr")
    assert "advisory: not an official grade (unsigned): the grader is not root" in md.read_text()
    assert "advisory: not an official grade (unsigned)" in page.read_text()
    md, _ = studentreport.write_student_report(tmp_path / "class" / "official" / "results.json", tmp_path / "sr2")
    assert "advisory" not in md.read_text()
