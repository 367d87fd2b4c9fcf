"""Gradescope's autograder zip (grader/publish/gradescope.py): what is in it, and run_autograder end to end on CPU with
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

from grader import cli, keyfile, signing
from grader.app import publish
from grader.publish import gradescope
from grader.report.output import results_json
from grader.report.records import part_scores
from grader.report.records import tests_of as read_tests  # not "test*": pytest would collect it
from grader.results import FAILED, PASSED, SKIPPED, Grade, Kind, Reason
from grader.results import TestResult as Result

ROOT = Path(__file__).resolve().parent.parent


def _build(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "autograder.zip"
    assert cli.main(["gradescope", "--out", str(out), *extra]) == 0
    return out


def _modes(z: zipfile.ZipFile) -> dict[str, int]:
    return {i.filename: (i.external_attr >> 16) & 0o7777 for i in z.infolist()}


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_zip_holds_the_grader_and_no_staff_material(tmp_path):
    with zipfile.ZipFile(_build(tmp_path)) as z:
        names = set(z.namelist())
        modes = _modes(z)
        run = z.read("run_autograder").decode()
        setup = z.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "constraints.txt", "pyproject.toml",
            "reference/glu/spec.yaml", "reference/glu/reference.py", "assignment/glu/glu_triton.py",
            "assignment/glu/glu_cuda.cu", "grader/results.schema.json", "grader/child/worker.py"} <= names
    assert {f"grader/{p.name}" for p in (ROOT / "grader").glob("*.py")} <= names
    assert modes["run_autograder"] & 0o111 == 0o111 and modes["setup.sh"] & 0o111 == 0o111, modes
    assert not [n for n in names if "solution_" in n or n.startswith(("tests/", "docs/", "scripts/", ".github/"))
                or n in ("Dockerfile", "grader_key")], sorted(names)
    assert run.startswith("#!/usr/bin/env bash\n") and 'exec "$PY" -m grader "${args[@]}"' in run
    assert 'ROOT="${AUTOGRADER_ROOT:-/autograder}"' in run and '"$SRC/grader_key"' in run
    assert "/opt/" in run and "/opt/" in setup  # a venv the grade's unprivileged uid can start
    assert "/opt/kernel-grader/venv" in setup and "glu" not in setup  # named for the product, not a problem
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
    with zipfile.ZipFile(_build(tmp_path, "--secret-file", str(key))) as z:
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
    correct = ROOT / "tests/data/problems/glu/correct"
    (sub / "glu_triton.py").write_bytes((correct / "rows_2d_grid/glu_triton.py").read_bytes())
    (sub / "glu_cuda.cu").write_bytes((correct / "cuda_pairs/glu_cuda.cu").read_bytes())
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
    # a perfect submission: nothing red, and the score is every point this machine can grade (issue 29 item 1)
    failed = [t["name"] for t in res["tests"] if t["status"] != "passed"]
    assert not failed, failed
    assert res["score"] == sum(t["max_score"] for t in res["tests"]) > 0, res["score"]
    pending = [t for t in res["tests"] if t["extra_data"].get("pending_max_score")]
    assert pending and all(t["output"].startswith("pending: ") and t["max_score"] == 0 for t in pending)
    assert res["score"] + sum(t["extra_data"]["pending_max_score"] for t in pending) == 76
    first = res["output"].splitlines()[0]
    assert f"({len(pending)} tests pending)" in first, first
    assert "points need a GPU and are graded later by the course staff" in first, res["output"]
    assert first.startswith(f"{res['extra_data']['points_not_earnable_here']:g} of 76 points"), first
    assert not any("no key file" in w for w in res["extra_data"]["not_official_because"]), res["extra_data"]
    assert stat.S_IMODE((src / "grader_key").stat().st_mode) == 0o600
    ident = res["extra_data"]["identity"]
    assert (ident["student_id"], ident["submission_id"], ident["problem"]) == ("S1001", "4242", "glu"), ident
    assert ident["users"] == [{"sid": "S1001", "email": "ada@uni.edu"}]
    assert ident["files_sha256"] == signing.files_digest(sub)  # what was graded: the submission's two files


def _grade() -> Grade:
    def t(name: str, stage: str, score: float, top: float, state: str, out: str, reason: Reason = Reason.OK,
          kind: Kind = Kind.CORRECTNESS) -> Result:
        return Result(name, "triton", stage, score, top, state, out, kind=kind, reason=reason)

    g = Grade("glu", "sub", "cpu")
    g.tests = [
        t("triton / correctness / a", "correctness", 2.0, 2.0, PASSED, "ok"),
        t("triton / correctness / b", "correctness", 0.0, 2.0, FAILED, "wrong values", Reason.WRONG_VALUES),
        t("triton / performance / big", "performance", 0.0, 4.0, SKIPPED,
          "skipped: performance is timed only on a CUDA GPU", Reason.NEEDS_GPU, Kind.PERFORMANCE),
        t("triton / compiler report", "checks", 0.0, 0.0, SKIPPED, "no report", Reason.NEEDS_GPU, Kind.COMPILER_REPORT),
    ]
    return g


def test_a_gpu_only_test_is_pending_not_failed(monkeypatch):
    """Issue 29 item 1: on a CPU a GPU-only test is Gradescope's passed with 0 of 0 and an output that says it is
    graded on a GPU later (nothing red, the total shown is the CPU points); a skipped test is never failed; its
    points stay in extra_data, and the staff's report reads them back."""
    monkeypatch.setenv("GRADER_GRADESCOPE", "1")
    res = results_json(_grade())
    by = {t["name"]: t for t in res["tests"]}
    perf = by["triton / performance / big"]
    assert (perf["status"], perf["score"], perf["max_score"]) == ("passed", 0.0, 0.0), perf
    assert perf["output"].startswith("pending: 4 points, graded on a GPU later"), perf["output"]
    assert perf["extra_data"]["state"] == SKIPPED and perf["extra_data"]["reason"] == "needs a GPU"
    assert perf["extra_data"]["pending_max_score"] == 4.0
    report = by["triton / compiler report"]  # skipped with nothing at stake: not failed, not pending
    assert report["status"] == "passed" and "pending_max_score" not in report["extra_data"]
    assert by["triton / correctness / b"]["status"] == FAILED  # a real failure stays red
    assert [t["name"] for t in res["tests"] if t["status"] == FAILED] == ["triton / correctness / b"]
    assert "(1 tests pending)" in res["output"].splitlines()[0], res["output"]
    # the staff's side: the pending test still counts its 4 points in the part's maximum, and is skipped
    back = {t.name: t for t in read_tests(res)}
    assert back["triton / performance / big"].max_score == 4.0 and back["triton / performance / big"].state == SKIPPED
    assert part_scores(Grade.from_json(res))["triton"]["performance"] == (0.0, 4.0)


@pytest.mark.slow  # over ~5 s on 2 cores: the full tier (tests/conftest.py)
def test_run_autograder_grades_the_problem_it_is_built_for(tmp_path):
    names = gradescope.build(tmp_path / "gelu.zip", root=ROOT, ref=None, problem="gelu")
    with zipfile.ZipFile(tmp_path / "gelu.zip") as z:
        run = z.read("run_autograder").decode()
    assert "args=(autograde --problem gelu --submission" in run, run
    assert {f"reference/{p.parent.name}/hints.yaml" for p in ROOT.glob("reference/*/spec.yaml")} <= set(names)
    with pytest.raises(gradescope.GradescopeError, match=r"--problem nope: no such problem \(choose from .*gelu"):
        gradescope.build(tmp_path / "x.zip", root=ROOT, ref=None, problem="nope")
    with pytest.raises(gradescope.GradescopeError, match=r"not a problem name"):
        gradescope.build(tmp_path / "y.zip", root=ROOT, ref=None, problem="glu; rm -rf /")
    with pytest.raises(gradescope.GradescopeError, match=r"--problem: name the problem"):  # no default problem
        gradescope.build(tmp_path / "z.zip", root=ROOT, ref=None)
    assert not any((tmp_path / n).exists() for n in ("x.zip", "y.zip", "z.zip"))


def test_gradescope_takes_secret_file_like_every_command_and_key_with_a_deprecation_line(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(publish, "_gradescope", lambda out, key, ref, problem: seen.append(key) or 0)
    assert cli.main(["gradescope", "--out", "z.zip", "--secret-file", "k1"]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert cli.main(["gradescope", "--out", "z.zip", "--key", "k2"]) == 0
    err = capsys.readouterr().err
    assert seen == [Path("k1"), Path("k2")] and err.count("--key is deprecated: say --secret-file KEY") == 1, err
