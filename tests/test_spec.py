"""The problem spec loader (grader/problem/spec.py) and the CLI's exit-2 path for problems the grader cannot run.

Bad specs are built by loading the real YAML, breaking one thing, and writing it next to copies of the files it
names (reference.py and the staff solutions resolve relative to the spec). Each must give one SpecError line
that names the file and the offending key.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader.problem.spec import DTYPES, SpecError, load_problem

SIBLINGS = ("reference.py", "solution_triton.py", "solution_cuda.cu")

# The CLI promises "one line on stderr" for exit 2. rich wraps at the console width, which off a terminal is 80
# columns (or $COLUMNS): the line breaks inside long messages such as tmp paths. Strict, so a fix shows up.

@pytest.fixture(scope="module")
def raw_spec(repo_root) -> dict:
    return yaml.safe_load((repo_root / "reference" / "glu" / "spec.yaml").read_text())


@pytest.fixture
def spec_dir(tmp_path, repo_root) -> Path:
    for name in SIBLINGS:
        shutil.copy(repo_root / "reference" / "glu" / name, tmp_path / name)
    return tmp_path


def write_spec(spec_dir: Path, raw: dict) -> Path:
    path = spec_dir / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ------------------------------------------------------------------------------------------------------------
# the real spec


def test_real_spec_loads(problem, raw_spec):
    names = [c.name for c in problem.cases]
    assert len(names) == len(set(names)), "case names must be unique"
    assert problem.out_cols == "half"
    assert set(problem.implementations) == {"triton", "cuda"}
    for impl in problem.implementations.values():
        assert impl.staff.is_file()
    assert set(problem.tolerances) == set(DTYPES)
    assert problem.performance is not None and problem.performance.cases


def test_dtypes_expand_into_one_case_per_dtype(problem, raw_spec):
    raw_cases = raw_spec["correctness"]["cases"]
    assert len(problem.cases) == sum(len(rc["dtypes"]) for rc in raw_cases)
    by_name = {c.name: c for c in problem.cases}
    for rc in raw_cases:
        for dt in rc["dtypes"]:
            c = by_name[f"{rc['name']}/{dt}"]
            assert c.dtype == dt
            assert c.shape == tuple(rc["shape"])
            assert c.pad == rc.get("pad", 0)
            assert c.gpu_only == rc.get("gpu_only", False)
    seeds = [c.seed for c in problem.cases]
    assert len(seeds) == len(set(seeds)), "every expanded case gets its own input seed"


def test_out_shape_halves_the_last_dim(problem):
    assert problem.out_shape((3, 7, 66)) == (3, 7, 33)
    assert problem.out_shape((0, 64)) == (0, 32)


def test_copied_spec_loads(spec_dir, raw_spec):
    """The harness the bad-spec tests use: an unmodified round-trip must load."""
    p = load_problem(write_spec(spec_dir, raw_spec))
    assert p.path == spec_dir / "spec.yaml"


# ------------------------------------------------------------------------------------------------------------
# bad specs: one SpecError line naming the file and the key


def _unknown_top(raw):
    raw["colour"] = "blue"
    return "colour"


def _unknown_case_key(raw):
    case = raw["correctness"]["cases"][0]
    case["dtpyes"] = case.pop("dtypes")
    return "correctness.cases[0].dtpyes"


def _wrong_dtype(raw):
    raw["correctness"]["cases"][1]["dtypes"] = ["float32", "fp16"]
    return "correctness.cases[1].dtypes[1]"


def _odd_last_dim(raw):
    raw["correctness"]["cases"][1]["shape"] = [3, 2001]
    return "correctness.cases[1].shape"


def _missing_top_key(raw):
    del raw["title"]
    return "title"


def _missing_case_key(raw):
    del raw["correctness"]["cases"][2]["name"]
    return "correctness.cases[2].name"


def _rtol_and_eager_factor(raw):
    raw["tolerances"]["float16"]["rtol"] = 1.0e-3
    return "tolerances.float16"


def _neither_rtol_nor_eager_factor(raw):
    del raw["tolerances"]["float32"]["rtol"]
    return "tolerances.float32"


def _missing_tolerance_dtype(raw):
    del raw["tolerances"]["bfloat16"]
    return "tolerances.bfloat16"


def _unknown_perf_baseline(raw):
    raw["performance"]["curve"]["zero_at"] = "manul"
    return "performance.curve.zero_at"


def _negative_pad(raw):
    raw["correctness"]["cases"][0]["pad"] = -4
    return "correctness.cases[0].pad"


def _duplicate_case_name(raw):
    raw["correctness"]["cases"][1]["name"] = raw["correctness"]["cases"][0]["name"]
    return "correctness.cases"


def _setups_on_a_correctness_case(raw):
    raw["correctness"]["cases"][0]["setups"] = 3  # pooled timing setups mean nothing for a correctness case
    return "correctness.cases[0].setups"


def _zero_setups(raw):
    raw["performance"]["cases"][2]["setups"] = 0
    return "performance.cases[2].setups"


def _too_many_setups(raw):
    raw["performance"]["cases"][2]["setups"] = 50
    return "performance.cases[2].setups"


BAD_SPECS = {
    f.__name__.lstrip("_"): f
    for f in (
        _unknown_top, _unknown_case_key, _wrong_dtype, _odd_last_dim, _missing_top_key, _missing_case_key,
        _rtol_and_eager_factor, _neither_rtol_nor_eager_factor, _missing_tolerance_dtype, _unknown_perf_baseline,
        _negative_pad, _duplicate_case_name, _setups_on_a_correctness_case, _zero_setups, _too_many_setups,
    )
}


def test_a_performance_case_may_pool_several_setups(spec_dir, raw_spec):
    raw = copy.deepcopy(raw_spec)
    raw["performance"]["cases"][2]["setups"] = 3
    problem = load_problem(write_spec(spec_dir, raw))
    assert [c.setups for c in problem.performance.cases] == [1, 1, 3]
    assert all(c.setups == 1 for c in problem.cases)


def assert_one_line_naming(err: SpecError, path: Path, *needles: str) -> None:
    msg = str(err)
    assert "\n" not in msg, f"not one line:\n{msg}"
    assert str(path) in msg, f"does not name the file: {msg}"
    for n in needles:
        assert n in msg, f"{n!r} not in: {msg}"


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_spec_is_one_line_naming_file_and_key(name, spec_dir, raw_spec):
    raw = copy.deepcopy(raw_spec)
    key = BAD_SPECS[name](raw)
    path = write_spec(spec_dir, raw)
    with pytest.raises(SpecError) as ei:
        load_problem(path)
    assert_one_line_naming(ei.value, path, f"'{key}")


def test_wrong_dtype_names_the_choices(spec_dir, raw_spec):
    raw = copy.deepcopy(raw_spec)
    _wrong_dtype(raw)
    path = write_spec(spec_dir, raw)
    with pytest.raises(SpecError) as ei:
        load_problem(path)
    assert_one_line_naming(ei.value, path, "fp16", *DTYPES)


def test_implementations_as_a_list_is_a_spec_error(spec_dir, raw_spec):
    raw = copy.deepcopy(raw_spec)
    raw["implementations"] = [{k: v} for k, v in raw["implementations"].items()]  # "- triton: {...}"
    path = write_spec(spec_dir, raw)
    with pytest.raises(SpecError) as ei:
        load_problem(path)
    assert_one_line_naming(ei.value, path, "'implementations'")


def test_invalid_yaml_names_the_line(spec_dir):
    path = spec_dir / "spec.yaml"
    path.write_text("name: glu\ntitle: GLU\ncorrectness:\n  cases: [{name: a, shape: [1, 2]\n")
    with pytest.raises(SpecError) as ei:
        load_problem(path)
    assert_one_line_naming(ei.value, path, "not valid YAML", "at line ")


def test_missing_spec_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as ei:
        load_problem(path)
    assert_one_line_naming(ei.value, path, "cannot read")


def test_missing_reference_file(spec_dir, raw_spec):
    (spec_dir / "reference.py").unlink()
    path = write_spec(spec_dir, raw_spec)
    with pytest.raises(SpecError) as ei:
        load_problem(path)
    assert_one_line_naming(ei.value, path, "'reference'", "reference.py")


# ------------------------------------------------------------------------------------------------------------
# the CLI: exit 2 with "grader error: ..." on stderr, no traceback


def run_cli(repo_root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "GRADER_SECRET_SEED")}
    return subprocess.run(
        [sys.executable, "-m", "grader", "grade", *args],
        cwd=repo_root, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.fixture(scope="module")
def cli_errors(repo_root, raw_spec, tmp_path_factory) -> dict:
    """Each way the CLI cannot run, run once: name -> (CompletedProcess, what the message must contain)."""
    d = tmp_path_factory.mktemp("cli")
    spec_dir = d / "bad-spec"
    spec_dir.mkdir()
    for name in SIBLINGS:
        shutil.copy(repo_root / "reference" / "glu" / name, spec_dir / name)
    raw = copy.deepcopy(raw_spec)
    key = _unknown_case_key(raw)
    bad = write_spec(spec_dir, raw)
    empty = d / "empty-submission"
    empty.mkdir()
    missing = d / "no-such-submission"
    out = str(d / "out")
    return {
        "bad_spec": (run_cli(repo_root, "--problem", str(bad), "--device", "cpu", "--out", out), (str(bad), key)),
        "missing_submission": (run_cli(repo_root, "--submission", str(missing), "--device", "cpu", "--out", out), (str(missing), "does not exist")),
        "empty_submission": (run_cli(repo_root, "--submission", str(empty), "--device", "cpu", "--out", out), (str(empty), "is empty", "glu_triton.py")),
    }


@pytest.mark.parametrize("name", ["bad_spec", "missing_submission", "empty_submission"])
def test_cli_exits_2_with_a_grader_error(name, cli_errors):
    proc, needles = cli_errors[name]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("grader error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert not proc.stdout.strip(), proc.stdout
    # Undo rich's soft wrapping (it keeps the space at each break) before looking for the file and key.
    msg = "".join(proc.stderr.splitlines())
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"


@pytest.mark.parametrize("name", ["bad_spec", "missing_submission", "empty_submission"])
def test_cli_error_is_one_line(name, cli_errors):
    proc, _ = cli_errors[name]
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_relative_spec_path_gives_absolute_file_paths(monkeypatch, repo_root):
    """Workers run from other folders (the trusted one from its cache, untrusted ones from their scratch): a spec
    loaded by a relative path must still name its reference and staff files absolutely. (A relative path made the
    baselines' worker fail on the H200: FileNotFoundError for <cache>/trusted/reference/glu/reference.py.)"""
    monkeypatch.chdir(repo_root)
    p = load_problem(Path("reference") / "glu" / "spec.yaml")
    assert p.path.is_absolute() and p.reference.is_absolute() and p.reference.is_file()
    assert all(i.staff.is_absolute() for i in p.implementations.values())


@pytest.mark.parametrize("name", ["spare:0", "baselines", "my part", "2fast", ""])
def test_an_implementation_name_must_be_a_plain_word(spec_dir, raw_spec, name):
    raw = copy.deepcopy(raw_spec)
    raw["implementations"][name] = raw["implementations"].pop("triton")
    with pytest.raises(SpecError, match="implementation name of letters"):
        load_problem(write_spec(spec_dir, raw))


def test_sibling_folders_are_the_other_problems_folders_in_a_submission(repo_root):
    from grader.problem.spec import sibling_folders

    glu = load_problem(repo_root / "reference" / "glu" / "spec.yaml")
    # each problem's stubs are assignment/<name>, so gelu/ in a submission laid out like assignment/
    assert sibling_folders(glu) == {"gelu", "swiglu", "geglu", "glu_backward"}
    gelu = load_problem(repo_root / "reference" / "gelu" / "spec.yaml")
    assert "gelu" not in sibling_folders(gelu) and "swiglu" in sibling_folders(gelu)
