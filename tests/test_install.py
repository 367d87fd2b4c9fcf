"""The install as a course machine makes it, not as this one does.

- One source of truth for versions: pyproject's dependencies and requirements.txt are the same list (names,
  floors, environment markers), noxfile's TEST_DEPS is pyproject's `test` extra, and constraints.txt pins every
  one of them under the same marker, to a version its floor allows.
- The install resolves against PyPI for Linux x86_64 and aarch64, macOS arm64 and Windows x86_64 (`uv pip
  compile --python-platform`, which resolves for a platform other than its own). This machine's pip cannot tell:
  it finds a local CPU wheel of torch that requires no triton, so a pin that no registry install can satisfy
  passed here (triton 3.9.0 beside torch 2.13.0, whose Linux wheels require triton 3.7.1).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent

# Where Triton has wheels: where it is required (the marker pyproject and requirements.txt give it).
TRITON_MARKER = 'sys_platform == "linux"'
PLATFORMS = {  # uv's --python-platform -> does Triton install there
    "x86_64-manylinux_2_28": True,
    "aarch64-manylinux_2_28": True,
    "aarch64-apple-darwin": False,
    "x86_64-pc-windows-msvc": False,
}
PYTHONS = ("3.11", "3.12")


def _lines(path: Path) -> list[str]:
    """A requirements-format file's requirement lines (comments and blank lines dropped)."""
    out = []
    for line in path.read_text().splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(line)
    return out


def _by_name(reqs: list[str]) -> dict[str, Requirement]:
    out: dict[str, Requirement] = {}
    for s in reqs:
        r = Requirement(s)
        name = canonicalize_name(r.name)
        assert name not in out, f"{name} listed twice"
        out[name] = r
    return out


def _key(r: Requirement) -> tuple[str, str, str]:
    return (canonicalize_name(r.name), str(r.specifier), str(r.marker or ""))


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _test_deps() -> list[str]:
    """noxfile.py's TEST_DEPS, read without importing nox."""
    for node in ast.parse((ROOT / "noxfile.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "TEST_DEPS":
            return list(ast.literal_eval(node.value))
    raise AssertionError("noxfile.py defines no TEST_DEPS")


def _pins() -> dict[str, Requirement]:
    pins = _by_name(_lines(ROOT / "constraints.txt"))
    for r in pins.values():
        specs = list(r.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"constraints.txt: {r} is not an exact pin"
    return pins


def test_pyproject_and_requirements_are_the_same_list():
    deps = _by_name(_pyproject()["project"]["dependencies"])
    reqs = _by_name(_lines(ROOT / "requirements.txt"))
    assert sorted(map(_key, deps.values())) == sorted(map(_key, reqs.values()))


def test_test_extra_is_noxs_test_deps():
    extra = _by_name(_pyproject()["project"]["optional-dependencies"]["test"])
    nox_deps = _by_name(_test_deps())
    assert sorted(map(_key, extra.values())) == sorted(map(_key, nox_deps.values()))


def test_constraints_pin_every_dependency_under_the_same_marker():
    pins = _pins()
    wanted = [*_pyproject()["project"]["dependencies"], *_test_deps()]
    for s in wanted:
        r = Requirement(s)
        name = canonicalize_name(r.name)
        assert name in pins, f"constraints.txt does not pin {name}"
        pin = pins[name]
        assert str(pin.marker or "") == str(r.marker or ""), f"{name}: pinned under '{pin.marker}', required under '{r.marker}'"
        version = next(iter(pin.specifier)).version
        assert r.specifier.contains(version, prereleases=True), f"{name}: the pin {version} is outside the floor {r.specifier}"


def test_triton_only_where_it_has_wheels():
    deps = _by_name(_pyproject()["project"]["dependencies"])
    assert str(deps["triton"].marker) == TRITON_MARKER
    assert deps["torch"].marker is None
    for name, r in deps.items():
        if name != "triton":
            assert r.marker is None or "win32" not in str(r.marker), name


def _uv() -> str:
    exe = shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if exe is None:
        try:
            from uv import find_uv_bin  # the uv wheel's own locator
        except ImportError:
            pytest.skip("uv not installed (nox -s tests installs it: noxfile.py TEST_DEPS)")
        exe = find_uv_bin()
    return exe


def _compile(uv: str, platform: str, python: str, tmp: Path) -> subprocess.CompletedProcess:
    # nox: what the README's `python -m pip install nox` brings, pinned in constraints.txt too.
    test_reqs = tmp / "test-requirements.txt"
    test_reqs.write_text("\n".join([*_test_deps(), "nox"]) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k == "UV_CACHE_DIR"}
    # torch 2.13.0's macOS wheels are macosx_14_0_arm64: a Mac needs macOS 14 (uv assumes an older one).
    env["MACOSX_DEPLOYMENT_TARGET"] = "14.0"
    cmd = [uv, "pip", "compile", "--no-config", "--no-python-downloads", "--default-index", "https://pypi.org/simple",
           "--python-platform", platform, "--python-version", python, "--no-header", "--no-annotate", "--quiet",
           "-c", str(ROOT / "constraints.txt"), str(ROOT / "requirements.txt"), str(test_reqs)]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=240, cwd=tmp)


@pytest.mark.slow  # uv resolves for every platform from PyPI: ~8 s
@pytest.mark.network
def test_install_resolves_for_every_platform(tmp_path):
    """`uv pip compile` against PyPI (not this machine's local wheels) for each target platform and Python: the
    pins resolve, torch is the pinned one, and Triton comes in, at its pin, exactly where it has wheels."""
    uv = _uv()
    pins = _pins()
    jobs = [(p, v) for p in PLATFORMS for v in PYTHONS]
    dirs = {job: tmp_path / f"{job[0]}-{job[1]}" for job in jobs}
    for d in dirs.values():
        d.mkdir()
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        results = dict(zip(jobs, pool.map(lambda job: _compile(uv, *job, dirs[job]), jobs)))
    failures = {f"{p} / Python {v}": r.stderr.strip()[-1500:] for (p, v), r in results.items() if r.returncode != 0}
    assert not failures, "the install does not resolve:\n" + "\n\n".join(f"{k}:\n{e}" for k, e in failures.items())
    for (platform, python), r in results.items():
        resolved = dict(line.split("==", 1) for line in r.stdout.split() if "==" in line)
        resolved = {canonicalize_name(k): v for k, v in resolved.items()}
        where = f"{platform} / Python {python}"
        assert resolved.get("torch") == str(next(iter(pins["torch"].specifier)).version), where
        if PLATFORMS[platform]:
            assert resolved.get("triton") == str(next(iter(pins["triton"].specifier)).version), where
        else:
            assert "triton" not in resolved, where


# -- where Triton cannot install (macOS, Windows) ----------------------------------------------------------------


def test_a_grade_without_triton_skips_that_part_and_says_how_to_grade_it(problem, tmp_path, monkeypatch):
    """Where the grader decides that Triton cannot run, the Triton part is skipped (its points not earnable here,
    not failed), no worker is asked to run it, and the grade says why in one line with the container command."""
    from grader import availability, pipeline
    from grader.results import SKIPPED

    why = "Triton does not install on macOS (it has wheels for Linux only)"
    monkeypatch.setattr(availability, "triton_missing", lambda: why)

    def no_worker(*a, **k):
        raise AssertionError("a worker was started for a part that cannot run here")

    monkeypatch.setattr(pipeline, "run_correctness", no_worker)
    out = tmp_path / "out"
    g = pipeline.grade(
        problem, pipeline.Options(submission=ROOT / "assignment" / "glu", out=out, only=("triton",), device="cpu")
    )
    rows = [t for t in g.tests if t.part == "triton"]
    graded = [t for t in rows if t.max_score]
    assert graded and all(t.state == SKIPPED and t.score == 0 for t in graded), [(t.name, t.state) for t in graded]
    assert g.unearnable == g.max_score > 0
    assert any(t.name.endswith("static warnings") for t in rows), "what needs no Triton is still checked"
    (line,) = [n for n in g.notes if n.startswith("triton: not graded on this machine")]
    assert "\n" not in line and why in line
    assert availability.container_command(ROOT / "assignment" / "glu", out) in line
    assert f'-v "{(ROOT / "assignment" / "glu").resolve()}:/submission:ro"' in line


def test_the_container_command_is_the_readmes():
    from grader import availability

    readme = re.sub(r"\\\n\s*", "", (ROOT / "README.md").read_text())
    assert " ".join(availability.DOCKER_RUN) in readme
    assert f"docker build -t {availability.IMAGE} ." in readme


def test_the_grader_runs_where_triton_cannot_be_imported(tmp_path):
    """The parent's own import path, in a fresh process where `import triton` fails (as on macOS or Windows): a
    grade of the stubs exits 0, writes results.json, and says in one line why the Triton part was not graded."""
    out = tmp_path / "out"
    code = ("import sys; sys.modules['triton'] = None\n"  # every `import triton` now raises ImportError
            "from grader.cli import main\n"
            "raise SystemExit(main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", code, "grade", "--device", "cpu", "--no-perf", "--only", "triton",
                        "--submission", str(ROOT / "assignment" / "glu"), "--out", str(out)],
                       check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((out / "results.json").read_text())
    lines = results["output"].splitlines()
    assert any(ln.startswith("triton: not graded on this machine: Triton is not installed") and "docker run" in ln
               for ln in lines), results["output"]
    tests = [t for t in results["tests"] if "/ correctness /" in t["name"]]
    assert tests and all(t["score"] == 0 for t in tests)


# -- pip install . -----------------------------------------------------------------------------------------------

_NOT_SOURCE = shutil.ignore_patterns(".git", ".nox", ".venv", "venv", "__pycache__", "*.pyc", "*.so", "build", "dist",
                                     "*.egg-info", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache",
                                     "grade-results", "out")


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The wheel and the sdist, built by `python -m build` (isolated: setuptools from PyPI) from a copy of the
    tree, so that the build leaves nothing in the checkout."""
    pytest.importorskip("build", reason="build not installed (nox -s tests installs it: noxfile.py TEST_DEPS)")
    tmp = tmp_path_factory.mktemp("dist")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCE)
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(tmp / "dist"), str(src)],
                       check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("*.whl")
    (sdist,) = (tmp / "dist").glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _names(dists: dict[str, Path]) -> dict[str, list[str]]:
    import tarfile
    import zipfile

    with zipfile.ZipFile(dists["wheel"]) as z:
        wheel = z.namelist()
    with tarfile.open(dists["sdist"]) as t:
        sdist = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]  # without the kernel_grader-X.Y/ prefix
    return {"wheel": wheel, "sdist": sdist}


@pytest.mark.slow
@pytest.mark.network
def test_no_staff_solution_in_any_distribution_and_the_problem_is(dists):
    for kind, names in _names(dists).items():
        assert not [n for n in names if Path(n).name.startswith("solution_")], f"a staff solution in the {kind}"
        for f in ("reference/glu/spec.yaml", "reference/glu/reference.py", "assignment/glu/glu_triton.py",
                  "assignment/glu/glu_cuda.cu", "assignment/README.md", "grader/results.schema.json", "grader/child/worker.py",
                  "grader/report/templates/page.html.j2", "grader/report/templates/blocks.html.j2",
                  "grader/report/templates/style.css"):
            assert f in names, f"{f} missing from the {kind}"
        assert not [n for n in names if n.startswith(("tests/", "docs/", "scripts/"))], f"staff material in the {kind}"
        # Every problem, not only GLU: its spec and words, and its stubs with their handout (the spec's `stubs:`).
        for spec in sorted(ROOT.glob("reference/*/spec.yaml")):
            name = spec.parent.name
            want = [f"reference/{name}/spec.yaml", f"reference/{name}/hints.yaml", f"reference/{name}/reference.py"]
            if name != "glu":
                want += [f"assignment/{name}/README.md", f"assignment/{name}/{name}_triton.py",
                         f"assignment/{name}/{name}_cuda.cu"]
            assert not [f for f in want if f not in names], f"{name}: {[f for f in want if f not in names]} missing from the {kind}"
    entry_points = [n for n in _names(dists)["wheel"] if n.endswith(".dist-info/entry_points.txt")]
    assert entry_points


@pytest.mark.slow
@pytest.mark.network
def test_the_installed_wheel_grades_the_stubs(dists, tmp_path):
    """`pip install` of the wheel, then `kernel-grader grade` from elsewhere: the console script, the spec, the
    reference and the stubs all come from the install (not from this checkout), and the grade completes."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    py = bindir / ("python.exe" if os.name == "nt" else "python")
    site_dir = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    # torch, triton and the rest from this test's own environment, after the new venv's own packages. (venv's
    # --system-site-packages would give the base interpreter's, not this environment's, when this is a venv.)
    import sysconfig

    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site_dir / "zz_test_parent_env.pth").write_text("\n".join(ours) + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                        "--disable-pip-version-check", "--quiet", str(dists["wheel"])],
                       check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    where = subprocess.run([str(py), "-c", "import grader, reference; print(grader.__file__); print(reference.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(Path(w).resolve().is_relative_to(site_dir.resolve()) for w in where), where
    # A student's directory: the installed stubs, copied. An installed grader grades ./assignment by default (not
    # the stubs installed beside it).
    work = tmp_path / "work"
    shutil.copytree(site_dir / "assignment", work / "assignment", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    exe = bindir / ("kernel-grader.exe" if os.name == "nt" else "kernel-grader")
    assert (bindir / ("glu-grade.exe" if os.name == "nt" else "glu-grade")).is_file()  # the old name, this term
    r = subprocess.run([str(exe), "grade", "--device", "cpu", "--no-perf", "--only", "triton", "--out", str(out)],
                       check=False, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["extra_data"]["submission"] == "assignment/glu"
    assert results["max_score"] > 0 and any("/ correctness /" in t["name"] for t in results["tests"])
    # report.html is rendered from the installed package data (the jinja2 templates), not this checkout.
    assert (out / "report.html").is_file() and "<h2>Lost points</h2>" in (out / "report.html").read_text(), r.stderr[-2000:]


def test_a_torch_without_bytecode_where_python_may_not_write_it_is_named_with_the_fix(monkeypatch, tmp_path):
    """Each grade's parent and workers import torch: with no .pyc and PYTHONDONTWRITEBYTECODE set, every one of them
    compiles it from source (seconds each on a GPU host). The batch says so before grading, with the command."""
    import importlib.machinery
    import importlib.util

    from grader import availability

    init = tmp_path / "site" / "torch" / "__init__.py"
    init.parent.mkdir(parents=True)
    init.write_text("")
    spec = importlib.machinery.ModuleSpec("torch", None, origin=str(init))
    monkeypatch.setattr(availability.importlib.util, "find_spec", lambda name: spec if name == "torch" else None)
    monkeypatch.setattr(availability.sys, "dont_write_bytecode", True)
    why = availability.torch_compiled_each_start()
    assert why and "PYTHONDONTWRITEBYTECODE" in why and f"python -m compileall -q {tmp_path / 'site'}" in why
    # Python may write bytecode: the first process does, the rest read it.
    monkeypatch.setattr(availability.sys, "dont_write_bytecode", False)
    assert availability.torch_compiled_each_start() is None
    # ... unless this user cannot write torch's folder (a system install, graded from a TA's account): the workers
    # never write it (PYTHONDONTWRITEBYTECODE, other users), so each of them compiles torch too.
    monkeypatch.setattr(availability.os, "access", lambda path, mode: Path(path) != init.parent)
    why = availability.torch_compiled_each_start()
    assert why and f"cannot write it into {init.parent}" in why and "python -m compileall -q" in why
    monkeypatch.setattr(availability.os, "access", lambda path, mode: True)
    # The bytecode is there.
    monkeypatch.setattr(availability.sys, "dont_write_bytecode", True)
    cached = Path(importlib.util.cache_from_source(str(init)))
    cached.parent.mkdir()
    cached.write_bytes(b"")
    assert availability.torch_compiled_each_start() is None


def test_a_single_grade_says_once_that_torch_will_be_compiled_by_each_process(monkeypatch, capsys):
    """Not only a batch: one grade starts a parent and several workers too, so `grade` says it before grading."""
    import argparse

    from grader import availability
    from grader.app import grade as grade_app

    monkeypatch.setattr(availability, "torch_compiled_each_start", lambda: "torch has no compiled bytecode (x)")
    graded = []
    monkeypatch.setattr(grade_app, "_run", lambda args: graded.append(args) or 0)
    assert grade_app.run(argparse.Namespace(course=None, watch=False)) == 0
    assert graded and capsys.readouterr().err.count("warning: torch has no compiled bytecode (x)") == 1
    monkeypatch.setattr(availability, "torch_compiled_each_start", lambda: None)
    grade_app.run(argparse.Namespace(course=None, watch=False))
    assert "warning" not in capsys.readouterr().err
