"""The student's loop (issue 18 items 3 and 4): `grade --case` (a partial grade, never official), `--watch`, and
`profile`, through the CLI and through nox's sessions."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from grader import cli
from grader.app import grade as app_grade
from grader.child import launches
from grader import profiling as profile
from grader.pipeline import GraderError, select_cases

ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRADER_SECRET_SEED")}


# ------------------------------------------------------------------------------------------------------------
# --case


def test_case_globs_select_correctness_and_performance_cases(problem):
    p = select_cases(problem, ("odd_h_1001/*", "lecture_16k"))
    assert [c.name for c in p.cases] == ["odd_h_1001/float32", "odd_h_1001/float16", "odd_h_1001/bfloat16"]
    assert p.performance is not None and [c.name for c in p.performance.cases] == ["lecture_16k"]
    assert select_cases(problem, ()) is problem
    with pytest.raises(GraderError, match=r"--case nope\*: matches no case \(cases: tiny_1x2, odd_h_1001"):
        select_cases(problem, ("nope*",))


@pytest.mark.slow  # ~8-22 s on 2 cores: the full tier (tests/conftest.py)
def test_a_partial_grade_says_so_and_is_never_signed(tmp_path, capsys, problem):
    key = tmp_path / "key"
    assert cli.main(["keygen", "--out", str(key)]) == 0
    out = tmp_path / "out"
    rc = cli.main(["grade", "--staff", "--only", "triton", "--device", "cpu", "--no-perf", "--case", "odd_h_1001/*",
                   "--case", "tiny_1x2/float32", "--secret-file", str(key), "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr()
    assert not (out / "results.json").exists()  # a partial grade has its own folder (tests/test_fast_loop.py)
    data = json.loads((out / "partial" / "results.json").read_text())
    # Off a terminal (captured): one plain line per message; the bar's steps are the case messages the grade sent.
    sent = [ln.split("] grading: ", 1)[1] for ln in printed.err.splitlines() if "] grading: " in ln]
    opts = app_grade.Options(submission=ROOT, out=out, only=("triton",), device="cpu",
                       cases=("odd_h_1001/*", "tiny_1x2/float32"))
    assert set(app_grade._progress_steps(problem, opts)) <= set(sent), sent
    cases = sorted(t["extra_data"]["case"] for t in data["tests"] if t["extra_data"]["kind"] == "correctness")
    assert cases == ["odd_h_1001/bfloat16", "odd_h_1001/float16", "odd_h_1001/float32", "tiny_1x2/float32"]
    assert data["score"] == 4
    extra = data["extra_data"]
    assert extra["partial_cases"] == ["odd_h_1001/*", "tiny_1x2/float32"]
    assert extra["official"] is False and "signature" not in extra
    assert any(w.startswith("partial: only the cases matching --case") for w in extra["not_official_because"])
    assert "partial grade: only the 4 correctness" in printed.out, printed.out


def test_an_unknown_case_is_one_line_and_exit_2(tmp_path, capsys):
    rc = cli.main(["grade", "--staff", "--device", "cpu", "--case", "odd_h_1001/float64", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("grader error: --case odd_h_1001/float64: matches no case")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "results.json").exists()


# ------------------------------------------------------------------------------------------------------------
# --watch


def test_watch_grades_again_when_a_file_changes_and_ctrl_c_stops_it(tmp_path, monkeypatch, capsys):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "glu_triton.py").write_text("v1")
    (sub / "__pycache__").mkdir()
    runs: list[int] = []
    monkeypatch.setattr(app_grade, "_run", lambda args: runs.append(1) or 0)
    polls = {"n": 0}

    def sleep(_s: float) -> None:
        polls["n"] += 1
        if polls["n"] == 1:
            (sub / "__pycache__" / "x.pyc").write_text("cache")  # ignored: not the student's edit
        elif polls["n"] == 2:
            (sub / "glu_triton.py").write_text("v2, longer")
        else:
            raise KeyboardInterrupt

    args = cli._parser().parse_args(["grade", "--watch", "--submission", str(sub)])
    assert app_grade._watch(args, poll_s=0.0, sleep=sleep) == 0
    assert len(runs) == 2 and polls["n"] == 3
    out = capsys.readouterr().out
    assert "changed: glu_triton.py; grading again" in out and "x.pyc" not in out and "stopped watching" in out


def test_watch_stops_on_bad_arguments(monkeypatch, tmp_path):
    monkeypatch.setattr(app_grade, "_run", lambda args: 2)
    args = cli._parser().parse_args(["grade", "--watch", "--submission", str(tmp_path)])
    assert app_grade._watch(args, poll_s=0.0, sleep=lambda s: pytest.fail("polled after a usage error")) == 2


@pytest.mark.slow  # two partial CLI grades in a subprocess: ~15 s
def test_watch_for_real_regrades_and_exits_cleanly_on_sigint(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    src = (ROOT / "reference" / "glu" / "solution_triton.py").read_text()
    (sub / "glu_triton.py").write_text(src)
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "grader", "grade", "--watch", "--submission", str(sub), "--only",
                          "triton", "--device", "cpu", "--no-perf", "--case", "tiny_1x2/float32", "--out", str(out)],
                         cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         # started with SIGINT ignored, as a non-interactive shell starts a background job (CI's
                         # runner, `nox ... &`): Ctrl-C must still end the watch
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    lines: list[str] = []

    def until(pattern: str, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            line = p.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
            if re.search(pattern, line):
                return
        pytest.fail(f"no {pattern!r} in:\n{''.join(lines)}")

    try:
        until(r"watching .* for changes")
        first = json.loads((out / "partial" / "results.json").read_text())  # --case: partial
        assert first["score"] == 1
        (sub / "glu_triton.py").write_text(src.replace("def glu_triton(", "def _unused():\n    pass\n\n\ndef glu_triton(", 1))
        until(r"changed: glu_triton.py; grading again")
        until(r"watching .* for changes")
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, "".join(lines) + rest
    assert "stopped watching" in rest and "Traceback" not in "".join(lines) + rest


# ------------------------------------------------------------------------------------------------------------
# profile


def test_profile_on_cpu_shows_the_launch_grid_and_the_compiler_report(capsys):
    rc = cli.main(["profile", "--staff", "--device", "cpu", "--case", "rows_127/float32"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "== triton (glu_triton.py) on rows_127/float32: shape [127, 256], float32, cpu ==" in out
    m = re.search(r"glu_kernel\[grid (\d+)\] \((\d+) programs\); BLOCK=(\d+)", out)
    assert m, out
    grid, programs, block = (int(g) for g in m.groups())
    n_out = 127 * 128
    assert grid == programs == -(-n_out // block), out  # the staff kernel's flat grid: cdiv(n_out, BLOCK)
    assert "== cuda (glu_cuda.cu)" in out
    assert "CUDA compiler report" in out and ("global loads 16 B" in out or "nvcc not found" in out), out


def test_describe_grid_calls_a_grid_function_with_the_launch_s_arguments():
    def kernel(x_ptr, n, BLOCK: tl.constexpr):  # noqa: F821 - the annotation Triton reads as text
        pass

    fn = types.SimpleNamespace(fn=kernel)
    d = launches.describe_grid(fn, ("x", 3000), {"BLOCK": 1024, "num_warps": 4,
                                                 "grid": lambda meta: (-(-meta["n"] // meta["BLOCK"]),)})
    assert d == {"kernel": "kernel", "grid": [3], "programs": 3, "constexprs": {"BLOCK": 1024},
                 "options": {"num_warps": 4}}
    bad = launches.describe_grid(fn, ("x", 1), {"BLOCK": 1, "grid": lambda meta: 1 / 0})
    assert bad["grid"] is None and bad["programs"] is None
    assert profile.launch_lines([d, d, bad]) == ["  kernel[grid 3] (3 programs); BLOCK=1024, num_warps=4",
                                                 "  kernel[grid (could not be worked out)] (None programs); BLOCK=1"]


NCU_CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Kernel Name","dram__throughput.avg.pct_of_peak_sustained_elapsed",\
"sm__warps_active.avg.pct_of_peak_sustained_active","smsp__inst_executed_op_global_ld.sum",\
"l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"
"","","","","%","%","inst","byte"
"0","123","python","glu_kernel","91.52","78.10","1,048,576","536,870,912"
'''


def test_ncu_csv_is_read_into_per_kernel_rows():
    (row,) = profile.parse_ncu_csv(NCU_CSV)
    assert row["Kernel Name"] == "glu_kernel" and row["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == "91.52"
    assert profile._bytes_per_thread(row, "ld") == 16.0
    assert profile._bytes_per_thread(row, "st") is None
    assert profile._base_name("void glu_kernel<float, Vec16<float>, 1, long>(const void*, long)") == "glu_kernel"
    named = "void (anonymous namespace)::glu_kernel<float, (anonymous namespace)::Vec16<float>, 1, unsigned int>(float)"
    assert profile._base_name(named) == "glu_kernel"  # as torch.profiler names the staff CUDA kernel on the H200
    assert profile._base_name("void ns::inner::k2<3>(int)") == "k2"


def test_ncu_missing_is_said_plainly(monkeypatch):
    monkeypatch.setattr(profile.shutil, "which", lambda name: None)
    (line,) = profile.ncu_summary([], ["glu_kernel"])
    assert "`ncu` is not on PATH" in line


def test_ncu_that_profiled_nothing_in_the_box_says_why(monkeypatch, tmp_path):
    """On the H100 host (root, bubblewrap) ncu's injection never reached the boxed worker: "No kernels were
    profiled". Boxed, the summary says that the box is why and what to do; unboxed, ncu's own last lines."""
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==PROF== Disconnected from process 1'\necho '==WARNING== No kernels were profiled.'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(profile.shutil, "which", lambda name: str(fake))
    (line,) = profile.ncu_summary([], ["glu_kernel"], boxed=True)
    assert "not available while the grader runs submission code in its box" in line and "without root" in line
    lines = profile.ncu_summary([], ["glu_kernel"], boxed=False)
    assert "reported no metrics" in lines[0] and "No kernels were profiled" in lines[-1], lines


@pytest.mark.gpu
def test_profile_on_a_gpu_shows_the_profiler_table_and_bandwidth(capsys):
    rc = cli.main(["profile", "--staff", "--device", "cuda", "--case", "fp16_8k"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "copy ceiling on this GPU:" in out and "torch.profiler, 10 calls" in out, out
    for part in ("triton", "cuda"):
        assert f"== {part} (" in out
    assert len(re.findall(r"% of the copy ceiling", out)) == 2, out
    assert re.search(r"glu\w*: 10 launch\(es\) in 10 calls", out), out
    assert "Nsight Compute summary:" in out
    if profile.shutil.which("ncu"):
        # In the grader's box (root with bubblewrap) ncu cannot reach the worker: the summary says so instead.
        boxed = "not available while the grader runs submission code in its box" in out
        assert boxed or ("DRAM throughput, % of peak" in out and "bytes per thread per instruction" in out), out


# ------------------------------------------------------------------------------------------------------------
# nox passes the options through


def _fake_nox() -> types.ModuleType:
    nox = types.ModuleType("nox")
    nox.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    nox.session = lambda f=None, **kw: f if f is not None else (lambda g: g)  # type: ignore[attr-defined]
    nox.Session = object  # type: ignore[attr-defined]
    return nox


@pytest.mark.parametrize("session, posargs", [
    ("grade", ["--case", "odd_h_1001/*", "--only", "triton", "--watch"]),
    ("profile", ["--only", "cuda", "--case", "fp16_8k"]),
])
def test_nox_sessions_pass_the_options_through(monkeypatch, session, posargs):
    monkeypatch.setitem(sys.modules, "nox", _fake_nox())
    monkeypatch.setattr(sys, "argv", ["nox", "--no-venv", "-s", session])
    spec = importlib.util.spec_from_file_location("noxfile_loop", ROOT / "noxfile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    runs: list[tuple] = []
    s = types.SimpleNamespace(posargs=posargs, run=lambda *a, **k: runs.append(a), env={})
    getattr(mod, session)(s)
    assert runs == [("python", "-m", "grader", session, *posargs)]
    args = cli._parser().parse_args([session, *posargs])  # and the CLI takes them
    assert args.cases == [p for i, p in enumerate(posargs) if i and posargs[i - 1] == "--case"]
