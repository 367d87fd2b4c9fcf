"""Issue 28, class 8: "official" follows what the untrusted uid can reach, asked of it (grader/staffprobe.py).

The case seen: a grade run from a copy of the checkout whose staff solutions are mode 0600 was called official,
but the grading Python had the project installed in editable mode from another checkout whose staff files were
readable, and `import reference.glu.solution_triton` in the submission loaded one (24/24, signed). Here the grading
Python is a venv of the test's own interpreter (torch through a .pth of the test environment's site-packages) into
which a second checkout is installed the way `pip install -e` does it (setuptools' own finder template, a
meta-path finder that no sys.path entry shows), or through a .pth path, or an include variable. Needs root (CI
runs as root): only then does submission code run as another uid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from grader import pipeline, staffprobe
from grader.problem.spec import load_problem

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "reference" / "glu" / "spec.yaml"


def _open_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o444)


@pytest.fixture
def world(separated, no_box, monkeypatch):
    """A folder every uid can enter, holding: `checkout`, a second checkout (reference/ with its staff files,
    readable, and a grader/ of grader.child and a stand-in trusted module); `venv`, a grading Python; `problem`, a
    copy of GLU's spec whose own staff files are 0600 (so only what the probe finds can make the grade unofficial)."""
    base = Path(tempfile.mkdtemp(prefix="staffprobe-"))
    try:
        checkout = base / "checkout"
        shutil.copytree(ROOT / "reference", checkout / "reference", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(
            ROOT / "grader" / "child", checkout / "grader" / "child", ignore=shutil.ignore_patterns("__pycache__")
        )
        (checkout / "grader" / "__init__.py").write_text("")
        (checkout / "grader" / "pipeline.py").write_text("# the trusted side\n")
        venv = base / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        site = Path(
            subprocess.run(
                [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.strip()
        )
        (site / "zz_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # torch, numpy, yaml
        problem = base / "problem"
        shutil.copytree(SPEC.parent, problem, ignore=shutil.ignore_patterns("__pycache__"))
        raw = yaml.safe_load(SPEC.read_text())
        raw["handout"] = str(ROOT / raw["handout"])
        (problem / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        _open_tree(base)
        for p in problem.glob("solution_*"):
            os.chmod(p, 0o600)
        monkeypatch.delenv("GRADER_SAME_UID", raising=False)
        yield {"base": base, "checkout": checkout, "venv": venv, "site": site, "problem": problem / "spec.yaml"}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _editable_install(site: Path, mapping: dict[str, str]) -> None:
    """What `pip install -e` of this project writes into site-packages: setuptools' finder module and the .pth
    that installs it on sys.meta_path at start-up."""
    try:
        from setuptools.command.editable_wheel import _finder_template
    except ImportError:
        pytest.skip("needs setuptools (its editable finder template)")
    name = "__editable___kernel_grader_0_1_0_finder"
    (site / f"{name}.py").write_text(_finder_template("kernel_grader-0.1.0", mapping, {}))
    (site / "__editable__.kernel_grader-0.1.0.pth").write_text(f"import {name}; {name}.install()\n")
    _open_tree(site)


def _reasons(world: dict, monkeypatch) -> list[str]:
    """official_reasons for a grade of world's problem, as the grading Python `world['venv']` would decide them."""
    monkeypatch.setattr(sys, "executable", str(world["venv"] / "bin" / "python"))
    problem = load_problem(world["problem"])
    with pipeline.open_scratch() as scratch:
        assert scratch.identity.separated, scratch.identity.why_not
        return pipeline.official_reasons(problem, scratch)


def test_a_staff_solution_importable_through_an_editable_install_is_not_official(world, monkeypatch):
    checkout = world["checkout"]
    _editable_install(world["site"], {"reference": str(checkout / "reference"), "grader": str(checkout / "grader")})
    why = _reasons(world, monkeypatch)
    hits = [w for w in why if "reference.glu.solution_triton" in w]
    assert hits, why
    assert str(checkout / "reference") in hits[0] and "editable install" in hits[0] and "chmod 600" in hits[0]
    # grader/ of that checkout is mapped too: the worker's `grader` is the scratch's (first on sys.path), but
    # setuptools' finder also maps the children of a mapped package, so `import grader.pipeline` loads that
    # checkout's trusted module as a submodule of it. The probe sees that as well.
    assert any("trusted code (grader.pipeline)" in w and str(checkout / "grader") in w for w in why), why


def test_the_same_install_with_unreadable_staff_files_is_official(world, monkeypatch):
    """What counts is what the uid can read, not what it can find: 0600 staff files in that checkout are fine."""
    checkout = world["checkout"]
    _editable_install(world["site"], {"reference": str(checkout / "reference")})
    for p in (checkout / "reference").glob("*/solution_*"):
        os.chmod(p, 0o600)
    assert _reasons(world, monkeypatch) == []


def test_nothing_reachable_is_official_as_before(world, monkeypatch):
    assert _reasons(world, monkeypatch) == []


def test_a_sys_path_entry_to_another_checkout_is_not_official(world, monkeypatch):
    """A .pth line (a path on the grading Python's sys.path) reaches the staff files the same way."""
    (world["site"] / "other_checkout.pth").write_text(str(world["checkout"]) + "\n")
    _open_tree(world["site"])
    why = _reasons(world, monkeypatch)
    assert any("reference.glu.solution_triton" in w and str(world["checkout"]) in w for w in why), why


def test_the_grader_s_trusted_code_importable_by_the_student_is_not_official(world, monkeypatch):
    """A .pth that puts another checkout first on sys.path: `grader` is then that checkout's, trusted modules and
    all (and not the scratch's grader.child)."""
    (world["site"] / "first.pth").write_text(f"import sys; sys.path.insert(0, {str(world['checkout'])!r})\n")
    _open_tree(world["site"])
    why = _reasons(world, monkeypatch)
    assert any("trusted code (grader.pipeline)" in w and "only grader.child may be" in w for w in why), why


def test_a_staff_file_on_an_include_path_is_not_official(world, monkeypatch):
    """A course that passes CPATH to workers (GRADER_PASS_ENV) pointing into a checkout: `#include
    "solution_cuda.cu"` in a student's .cu would compile the staff kernel."""
    monkeypatch.setenv("GRADER_PASS_ENV", "CPATH")
    monkeypatch.setenv("CPATH", str(world["checkout"] / "reference" / "glu"))
    why = _reasons(world, monkeypatch)
    assert any("solution_cuda.cu" in w and "CPATH" in w for w in why), why
    monkeypatch.setenv("CPATH", str(world["checkout"]))  # reference/<problem>/ under an include folder too
    why = _reasons(world, monkeypatch)
    assert any("solution_cuda.cu" in w and "CPATH" in w for w in why), why


def test_a_probe_that_cannot_answer_fails_closed(world, monkeypatch):
    """A probe that dies or answers something else is no proof that nothing is reachable: not official."""
    monkeypatch.setattr(sys, "executable", str(world["venv"] / "bin" / "python"))
    with pipeline.open_scratch() as scratch:
        monkeypatch.setattr(staffprobe, "_SCRIPT", "print('nothing to see')")
        assert "not JSON" in staffprobe.probe(scratch, ["solution_triton.py"], ["glu"])
        monkeypatch.setattr(staffprobe, "_SCRIPT", "import json; print(json.dumps([[1, 2]]))")
        assert "wrong shape" in staffprobe.probe(scratch, ["solution_triton.py"], ["glu"])
        monkeypatch.setattr(staffprobe, "_SCRIPT", "raise SystemExit(4)")
        (why,) = staffprobe.reasons(staffprobe.probe(scratch, ["solution_triton.py"], ["glu"]))
        assert "could not check" in why


def test_the_probe_costs_about_one_interpreter_start(world, monkeypatch):
    """It imports no torch: a few tenths of a second at most (printed; the bound is loose on a shared CPU)."""
    _editable_install(world["site"], {"reference": str(world["checkout"] / "reference")})
    monkeypatch.setattr(sys, "executable", str(world["venv"] / "bin" / "python"))
    with pipeline.open_scratch() as scratch:
        t0 = time.monotonic()
        found = staffprobe.probe(scratch, ["solution_triton.py", "solution_cuda.cu"], ["glu"])
        took = time.monotonic() - t0
    assert isinstance(found, list) and found
    print(f"staff probe: {took * 1000:.0f} ms, {len(found)} reachable")
    assert took < 10


@pytest.mark.slow
@pytest.mark.parametrize("containment", ["container", "box"])
def test_a_submission_that_imports_the_staff_kernel_of_an_editable_install_gets_no_official_grade(
    world, tmp_path, containment
):
    """End to end, the attack itself (tests/exploits/reach_staff imports reference.glu.solution_triton) with the
    grading Python of the report. Without a box (a container): a keyed grade as root is written, but not official
    and not signed, and says why. In a box, the other checkout is not in its view: the import fails, the grade is
    official, and the exploit earns no correctness point."""
    checkout = world["checkout"]
    _editable_install(world["site"], {"reference": str(checkout / "reference"), "grader": str(checkout / "grader")})
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    if containment == "container":
        env.update({"GRADER_BWRAP": "/nonexistent/bwrap", "GRADER_CONTAINMENT": "container"})
    py = str(world["venv"] / "bin" / "python")
    key, out = tmp_path / "key", tmp_path / "out"
    r = subprocess.run(
        [py, "-m", "grader", "keygen", "--out", str(key)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [
            py,
            "-m",
            "grader",
            "grade",
            "--problem",
            str(world["problem"]),
            "--submission",
            str(ROOT / "tests" / "exploits" / "reach_staff"),
            "--only",
            "triton",
            "--device",
            "cpu",
            "--no-perf",
            "--secret-file",
            str(key),
            "--allow-advisory",  # it is written, advisory (without it, grader/preflight.py stops it first)
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    extra = data["extra_data"]
    assert extra["containment"] == containment, extra
    if containment == "box":
        assert extra["official"] is True and extra.get("signature"), extra["not_official_because"]
        # its own zeros pass the zero_rows cases only (tests/exploits/audit.yaml allows it those 2 points)
        assert data["score"] <= 2, [(t["name"], t["score"]) for t in data["tests"]]
        return
    assert extra["official"] is False and not extra.get("signature"), extra
    assert any("reference.glu.solution_triton" in w and str(checkout) in w for w in extra["not_official_because"])
