"""The trust boundary (docs/SECURITY.md): what runs beside student code, as whom, and what it can reach.

- grader/child/ (what runs in a worker) imports nothing from the trusted side;
- the kernel check fails closed, outputs must be plain memory, and a hang costs one case (any machine);
- in an official grade's conditions (root, submission code as another uid: the `separated` fixture), submission
  code cannot reach the staff solutions, the key, the grader's Python or caches, or another uid's processes.

Grades run in subprocesses through tests/exploits/_grade_job.py (grade() reaps every child of its caller).
"""

from __future__ import annotations

import ast
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import yaml

from grader.results import FAILED, PASSED

ROOT = Path(__file__).resolve().parent.parent
EXPLOITS = ROOT / "tests" / "exploits"
SPEC = ROOT / "reference" / "glu" / "spec.yaml"
KEY_PATH = Path("/tmp/glu-exploit-grading.key")  # where tests/exploits/nvcc_include_key looks


def _grade(tmp: Path, submission: Path, only: str, problem: Path = SPEC, env: dict[str, str] | None = None):
    out = tmp / f"out-{submission.name}-{only}"
    out.mkdir(parents=True, exist_ok=True)
    pkl = out / "grade.pkl"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "EXPLOIT_"))}
    e["PYTHONPATH"] = str(ROOT)
    e["GRADER_PASS_ENV"] = "EXPLOIT_OUT"
    e["EXPLOIT_OUT"] = str(out)
    e.update(env or {})
    r = subprocess.run([sys.executable, str(EXPLOITS / "_grade_job.py"), "--submission", str(submission), "--pickle",
                        str(pkl), "--only", only, "--device", "cpu", "--no-perf", "--problem", str(problem)],
                       env=e, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    with open(pkl, "rb") as f:
        return pickle.load(f)


def _correctness(g, part: str = "triton"):
    rows = [t for t in g.tests if t.part == part and t.stage == "correctness"]
    return sum(t.score for t in rows), rows


def _text(g) -> str:
    return "\n".join(f"{t.name}: {t.state}: {t.output}" for t in g.tests) + "\n" + "\n".join(g.notes)


# ------------------------------------------------------------------------------------------------------------
# the package boundary
# ------------------------------------------------------------------------------------------------------------


def test_the_child_package_imports_nothing_from_the_trusted_side():
    """Everything in grader/child runs beside student code: it must not pull the truth, the key handling or the
    scoring into a worker's interpreter. Relative imports must stay inside the package; absolute ones must not
    name `grader` outside `grader.child`."""
    bad = []
    for path in sorted((ROOT / "grader" / "child").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level >= 2 or (node.level == 0 and (node.module or "").startswith("grader") and
                                       not (node.module or "").startswith("grader.child")):
                    bad.append(f"{path.name}: from {'.' * node.level}{node.module or ''} import ...")
            elif isinstance(node, ast.Import):
                bad += [f"{path.name}: import {a.name}" for a in node.names
                        if a.name.startswith("grader") and not a.name.startswith("grader.child")]
    assert not bad, bad


def test_a_worker_gets_a_fresh_environment_without_the_grader_s_variables(monkeypatch, tmp_path):
    from grader import identity

    monkeypatch.setenv("GRADER_SECRET_SEED", "123")
    monkeypatch.setenv("SOME_TOKEN", "x")
    monkeypatch.setenv("GRADER_PASS_ENV", "SOME_TOKEN,GRADER_SECRET_SEED")
    env = identity.worker_env(tmp_path, tmp_path / "lib")
    assert env["SOME_TOKEN"] == "x"  # passed on request
    assert "GRADER_SECRET_SEED" not in env  # never, even when asked
    assert env["HOME"] == str(tmp_path) and env["TRITON_CACHE_DIR"].startswith(str(tmp_path))
    assert env["PYTHONPATH"] == str(tmp_path / "lib")


# ------------------------------------------------------------------------------------------------------------
# any machine (same uid or not)
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_error_in_the_profiled_call_forfeits_the_part(tmp_path):
    """Class 1: the kernel check fails closed. kernelcheck_raise answers the correctness calls (with F.glu after a
    real launch) and raises in the kernel check's calls: before, 'could not profile', no forfeit."""
    g = _grade(tmp_path, EXPLOITS / "kernelcheck_raise", "triton")
    check = next(t for t in g.tests if t.name == "triton / kernel check")
    assert check.state == FAILED and check.extra.get("forfeit"), check.output
    assert "raised" in check.output or "PyTorch computed" in check.output
    assert sum(t.score for t in g.tests if t.part == "triton") == 0


@pytest.mark.slow
@pytest.mark.parametrize("exploit", ["lazy_subclass", "late_thread"])
def test_outputs_computed_after_the_call_earn_nothing(tmp_path, exploit):
    """Class 2: an output must be a plain tensor, copied while the call's profiler is on."""
    g = _grade(tmp_path, EXPLOITS / exploit, "triton")
    _, rows = _correctness(g)
    earned = [t.name for t in rows if t.score and "zero_rows" not in t.name]  # 0 rows: nothing to compute
    assert not earned, _text(g)
    if exploit == "lazy_subclass":
        assert all("subclass of torch.Tensor" in t.output for t in rows if t.state == FAILED and "zero_rows" not in t.name)


@pytest.mark.slow
def test_a_hang_costs_its_case_and_a_fresh_worker_grades_the_rest(tmp_path):
    """Item 8: hang_one_case loops forever on the 127-row case only. That case times out, within a limit that
    scales with the passed cases (not the spec's 120 s), and every later case still passes."""
    g = _grade(tmp_path, EXPLOITS / "hang_one_case", "triton")
    _, rows = _correctness(g)
    hung = [t for t in rows if "rows_127" in t.name]
    assert hung and all(t.state == FAILED and "timed out" in t.output for t in hung), _text(g)
    later = [t for t in rows if t.state != "skipped" and "rows_127" not in t.name]
    assert later and all(t.state == PASSED for t in later), _text(g)
    secs = int(hung[0].output.split("timed out after ")[1].split()[0])
    assert secs < 120


def test_a_worker_that_dies_before_the_submission_runs_is_a_grader_fault(tmp_path):
    """Item 9: no results.json that blames the student, and a distinct exit code (3)."""
    script = textwrap.dedent(f"""
        import subprocess, sys
        sys.path.insert(0, {str(ROOT)!r})
        from grader import cli, sandbox
        def broken(fd, device, flags, trusted):
            return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(1)"], pass_fds=(fd,))
        sandbox._start_child = broken
        sys.exit(cli.main(["grade", "--staff", "--only", "triton", "--device", "cpu", "--no-perf",
                           "--out", {str(tmp_path / "out")!r}]))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={k: v for k, v in os.environ.items() if not k.startswith("GRADER_")})
    assert r.returncode == 3, r.stderr[-3000:]
    assert "grader fault" in r.stderr and "before any submission code ran" in r.stderr
    assert not (tmp_path / "out" / "results.json").exists()


# ------------------------------------------------------------------------------------------------------------
# an official grade's conditions: submission code as its own uid
# ------------------------------------------------------------------------------------------------------------


@pytest.fixture()
def locked_problem(tmp_path):
    """A copy of the GLU problem whose staff solutions only the grader's user can read (as in a deployment that
    keeps them on the grading machine at all; the container has none)."""
    dest = tmp_path / "problem"
    shutil.copytree(SPEC.parent, dest)
    raw = yaml.safe_load(SPEC.read_text())
    raw["handout"] = str(ROOT / raw["handout"])
    (dest / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    for name in ("solution_triton.py", "solution_cuda.cu"):
        os.chmod(dest / name, 0o600)
    os.chmod(tmp_path, 0o755)
    # This checkout's own staff files too, for the test's duration: anything on the machine counts.
    own = {p: os.stat(p).st_mode for p in SPEC.parent.glob("solution_*")}
    for p in own:
        os.chmod(p, 0o600)
    try:
        yield dest / "spec.yaml"
    finally:
        for p, mode in own.items():
            os.chmod(p, mode)


@pytest.mark.slow
def test_separated_grade_runs_a_correct_kernel_as_another_uid(separated, tmp_path, locked_problem):
    g = _grade(tmp_path, ROOT / "tests/data/problems/glu/correct/rows_2d_grid", "triton", problem=locked_problem)
    score, rows = _correctness(g)
    assert score == sum(t.max_score for t in rows if t.state != "skipped") > 0, _text(g)
    assert not any("uid" in w for w in g.official_why), g.official_why  # separated, and nothing readable
    assert not any("staff solution" in w for w in g.official_why), g.official_why


@pytest.mark.slow
def test_separated_submission_cannot_reach_the_staff_solutions(separated, tmp_path, locked_problem):
    """Class 3: reach_staff imports reference.glu or globs the disk for solution_triton.py; it gets zeros."""
    g = _grade(tmp_path, EXPLOITS / "reach_staff", "triton", problem=locked_problem)
    _, rows = _correctness(g)
    earned = [t.name for t in rows if t.score and "zero_rows" not in t.name]  # 0 rows: zeros are right there
    forfeit = [t.name for t in g.tests if t.extra.get("forfeit")]
    assert not earned and not forfeit, _text(g)  # its own zeros, not a staff kernel that was caught


@pytest.mark.slow
def test_separated_build_cannot_include_the_key_or_the_staff_source(separated, tmp_path, locked_problem):
    """Class 4: nvcc runs as the grade's uid: the #include of a 0600 key fails, and the key is nowhere."""
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("needs nvcc")
    secret = os.urandom(32).hex()
    KEY_PATH.write_text(secret + "\n")
    os.chmod(KEY_PATH, 0o600)
    try:
        g = _grade(tmp_path, EXPLOITS / "nvcc_include_key", "cuda", problem=locked_problem)
    finally:
        KEY_PATH.unlink()
    build = next(t for t in g.tests if t.name == "cuda / build")
    assert build.state == FAILED, build.output
    assert secret not in _text(g) and secret[:16] not in pickle.dumps(g).hex()


@pytest.mark.slow
def test_separated_submission_cannot_write_the_grader_s_python(separated, tmp_path, locked_problem):
    """Class 7: reach_site_packages tries to plant a .pth in every sys.path directory it can."""
    name = "zz_glu_exploit.pth"
    candidates = {Path(p) / name for p in [*sys.path, sysconfig.get_paths()["purelib"]] if p}
    try:
        g = _grade(tmp_path, EXPLOITS / "reach_site_packages", "triton", problem=locked_problem)
        planted = [str(p) for p in candidates if p.exists()]
    finally:
        for p in candidates:
            if p.exists():
                p.unlink()
    assert not planted, planted
    assert "BREACH" not in _text(g), _text(g)
    score, rows = _correctness(g)
    assert score == sum(t.max_score for t in rows if t.state != "skipped")


@pytest.mark.slow
def test_separated_submission_cannot_reach_trusted_caches_or_processes(separated, tmp_path, locked_problem):
    """Class 8: reach_trusted tries to write the trusted caches and to signal any process of another uid."""
    g = _grade(tmp_path, EXPLOITS / "reach_trusted", "triton", problem=locked_problem)
    assert "BREACH" not in _text(g), _text(g)
    score, rows = _correctness(g)
    assert score == sum(t.max_score for t in rows if t.state != "skipped")


@pytest.mark.slow
def test_an_official_grade_end_to_end_is_signed_and_verifies(separated, tmp_path, locked_problem):
    """Root, a key file, submission code as its own uid, no staff file readable by it: the CLI writes an official,
    signed results.json, and the TA report verifies its signature with the same key."""
    key = tmp_path / "key"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    run = [sys.executable, "-m", "grader"]
    r = subprocess.run([*run, "keygen", "--out", str(key)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    sub = ROOT / "tests/data/problems/glu/correct/rows_2d_grid"
    r = subprocess.run([*run, "grade", "--problem", str(locked_problem), "--submission", str(sub),
                        "--only", "triton", "--device", "cpu", "--no-perf", "--secret-file", str(key), "--out", str(out),
                        "--student-id", "out"],  # the folder the TA report finds it in: its row
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    import json

    data = json.loads((out / "results.json").read_text())
    assert data["extra_data"]["official"] is True, data["extra_data"].get("not_official_because")
    assert data["extra_data"].get("signature")
    r = subprocess.run([*run, "report", str(out), "--secret-file", str(key), "--out", str(tmp_path / "ta")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "1 valid" in r.stdout, r.stdout + r.stderr


def test_every_profiled_call_on_a_gpu_is_checked_not_only_the_kernel_check_s():
    """Class 1/6, per call: a CUDA part whose calls on a GPU each launch its own kernel is clean; a call that moved
    the data through the host, or answered with no kernel of its own (a device copy of an earlier answer), is a
    violation naming the case and the call, whichever call the kernel check later profiles. (The records are what
    Worker.run sends from a GPU; tests/test_exploits.py runs the real thing there.)"""
    from grader.correctness.verdict import call_violations, malformed_run_reply
    from grader.problem.spec import Case
    from grader.results import VIOLATION, Code

    case = Case("medium/float32", (64, 512), "float32")
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(...)"
    honest = {"ops": ["fill_"], "triton_launches": None, "call_kernels": [[fill, "glu_kernel(...)"]] * 2,
              "runtime": ["cudaLaunchKernel"]}
    assert call_violations("cuda", case, honest, True, 64 * 256) == []
    host = {**honest, "call_kernels": [[fill, "Memcpy DtoH (Device -> Pageable)", "Memcpy HtoD (Pageable -> Device)",
                                         "alibi(...)"], [fill, "glu_kernel(...)"]]}
    (v,) = call_violations("cuda", case, host, True, 64 * 256)
    assert v.code == Code.HOST_TRANSFER and v.severity == VIOLATION and v.text.endswith("(case medium/float32, call 1)")
    cached = {**honest, "call_kernels": [[fill, "glu_kernel(...)"], [fill, "Memcpy DtoD (Device -> Device)"]]}
    (v,) = call_violations("cuda", case, cached, True, 64 * 256)
    assert v.code == Code.NO_OWN_KERNEL and v.text.endswith("call 2)")
    assert call_violations("cuda", case, cached, False, 64 * 256) == []  # a wrong answer earns nothing anyway
    assert call_violations("cuda", case, {**cached, "call_kernels": None}, True, 64 * 256) == []  # CPU: no device record
    import torch

    three_calls = {"outs": [torch.zeros(1)] * 2, "meta": {}, "x_after": torch.zeros(1), "call_kernels": [["k"]] * 3}
    assert malformed_run_reply(three_calls) == "'call_kernels' is not a list of kernel names per call"


def test_error_categories_are_spelled_once_in_the_child_wire():
    """The parent decides a failure's reason by the category a worker's error reply names (grader/sandbox.py), never
    by its text. The words are defined once, in grader/child/wire.py, which both sides import; every category the
    child code writes as a literal (an error's second argument or `category=`, a sanitizer explanation's second
    field, `category_of`'s answer) must be one of them, or the parent would read it as an ordinary raised call."""
    import grader.child.worker as worker
    from grader import sandbox
    from grader.child import wire
    from grader.correctness import verdict

    assert sandbox.ERROR_CATEGORIES is wire.ERROR_CATEGORIES
    assert verdict.ERROR_CATEGORIES is wire.ERROR_CATEGORIES
    assert not hasattr(worker, "CATEGORIES")  # no second copy on the child side

    def literal(node: ast.AST | None) -> str | None:
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    used: dict[str, str] = {}
    for path in sorted((ROOT / "grader" / "child").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.endswith("Error"):
                args = [node.args[1]] if len(node.args) > 1 else []
                args += [k.value for k in node.keywords if k.arg == "category"]
                for a in args:
                    if (word := literal(a)) is not None:
                        used[word] = f"{path.name}:{node.lineno}"
            if isinstance(node, ast.FunctionDef) and (node.name.startswith("explain") or node.name == "category_of"):
                for ret in ast.walk(node):
                    if not isinstance(ret, ast.Return) or ret.value is None:
                        continue
                    value = ret.value.body if isinstance(ret.value, ast.IfExp) else ret.value
                    field = value.elts[1] if isinstance(value, ast.Tuple) and len(value.elts) == 2 else value
                    if (word := literal(field)) is not None and word:
                        used[word] = f"{path.name}:{ret.lineno}"
    assert {"load", "not-implemented", "cuda-fault", "out-of-bounds", "misaligned", "race"} <= set(used), used
    unknown = {w: at for w, at in used.items() if w not in wire.ERROR_CATEGORIES}
    assert not unknown, unknown
