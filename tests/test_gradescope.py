"""Gradescope's autograder zip (grader/gradescope.py): what is in it, and run_autograder end to end on CPU with
Gradescope's folders rebased onto a temporary root (AUTOGRADER_ROOT) and this Python (GRADER_PYTHON)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import signing, cli, keyfile

ROOT = Path(__file__).resolve().parent.parent


def _build(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "autograder.zip"
    assert cli.main(["gradescope", "--out", str(out), *extra]) == 0
    return out


def _modes(z: zipfile.ZipFile) -> dict[str, int]:
    return {i.filename: (i.external_attr >> 16) & 0o7777 for i in z.infolist()}


def test_zip_holds_the_grader_and_no_staff_material(tmp_path):
    with zipfile.ZipFile(_build(tmp_path)) as z:
        names = set(z.namelist())
        modes = _modes(z)
        run = z.read("run_autograder").decode()
        setup = z.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "constraints.txt", "pyproject.toml",
            "reference/glu/spec.yaml", "reference/glu/reference.py", "assignment/glu_triton.py",
            "assignment/glu_cuda.cu", "grader/results.schema.json", "grader/child/worker.py"} <= names
    assert {f"grader/{p.name}" for p in (ROOT / "grader").glob("*.py")} <= names
    assert modes["run_autograder"] & 0o111 == 0o111 and modes["setup.sh"] & 0o111 == 0o111, modes
    assert not [n for n in names if "solution_" in n or n.startswith(("tests/", "docs/", "scripts/", ".github/"))
                or n in ("Dockerfile", "grader_key")], sorted(names)
    assert run.startswith("#!/usr/bin/env bash\n") and 'exec "$PY" -m grader "${args[@]}"' in run
    assert 'ROOT="${AUTOGRADER_ROOT:-/autograder}"' in run and '"$SRC/grader_key"' in run
    assert "/opt/" in run and "/opt/" in setup  # a venv the grade's unprivileged uid can start
    assert "--index-url https://download.pytorch.org/whl/cpu" in setup
    assert "pip install -c constraints.txt -r requirements.txt" in setup
    assert "apt-get install -y python3 python3-pip python3-venv g++" in setup
    assert str(ROOT) not in run + setup


def test_an_existing_zip_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "autograder.zip"
    out.write_bytes(b"keep")
    capsys.readouterr()
    assert cli.main(["gradescope", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "already exists" in err, err
    assert out.read_bytes() == b"keep"


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_key_goes_in_as_grader_key_mode_0600_with_a_warning(tmp_path, capsys):
    key = tmp_path / "key"
    keyfile.keygen(key)
    capsys.readouterr()
    with zipfile.ZipFile(_build(tmp_path, "--key", str(key))) as z:
        assert z.read("grader_key") == key.read_bytes()
        assert _modes(z)["grader_key"] == 0o600
    assert "anyone with the zip has the key" in capsys.readouterr().err
    assert stat.S_IMODE((tmp_path / "autograder.zip").stat().st_mode) == 0o600


@pytest.mark.slow
def test_run_autograder_end_to_end_on_cpu(tmp_path):
    key = tmp_path / "key"
    keyfile.keygen(key)
    ag = tmp_path / "autograder"
    src, sub = ag / "source", ag / "submission"
    with zipfile.ZipFile(_build(tmp_path, "--key", str(key))) as z:
        for info in z.infolist():  # as unzip does: the modes from the zip
            dst = src / info.filename
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(z.read(info))
            dst.chmod((info.external_attr >> 16) & 0o777)
    (src / "grader_key").chmod(0o644)  # run_autograder makes it 0600 again (an unzip may not keep the mode)
    sub.mkdir(parents=True)
    (sub / "glu_triton.py").write_bytes((ROOT / "tests/correct/rows_2d_grid/glu_triton.py").read_bytes())
    (sub / "glu_cuda.cu").write_bytes((ROOT / "assignment/glu_cuda.cu").read_bytes())
    # Gradescope's own record of whose submission this is: signed into results.json (grader/signing.py identity)
    (ag / "submission_metadata.json").write_text(json.dumps(
        {"id": 4242, "users": [{"email": "ada@uni.edu", "id": 7, "name": "Ada", "sid": "S1001"}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "AUTOGRADER_"))}
    # GRADER_SAME_UID: this test grades as its own user (as root it would otherwise pick a separate uid, which
    # cannot start this Python when it lives under a private home).
    env.update(AUTOGRADER_ROOT=str(ag), GRADER_PYTHON=sys.executable, GRADER_SAME_UID="1", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([str(ag / "source" / "run_autograder")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=240, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((ag / "results" / "results.json").read_text())
    assert res["max_score"] == 76 and res["score"] > 0, res["score"]
    first = res["output"].splitlines()[0]
    assert "points need a GPU and are graded later by the course staff" in first, res["output"]
    assert first.startswith(f"{res['extra_data']['points_not_earnable_here']:g} of 76 points"), first
    assert not any("no key file" in w for w in res["extra_data"]["not_official_because"]), res["extra_data"]
    assert stat.S_IMODE((src / "grader_key").stat().st_mode) == 0o600
    ident = res["extra_data"]["identity"]
    assert (ident["student_id"], ident["submission_id"], ident["problem"]) == ("S1001", "4242", "glu"), ident
    assert ident["users"] == [{"sid": "S1001", "email": "ada@uni.edu"}]
    assert ident["files_sha256"] == signing.files_digest(sub)  # what was graded: the submission's two files
