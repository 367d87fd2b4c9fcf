"""Untrusted text in the trusted parent (issue 28, class 4): every parser the parent runs over text a submission
influenced finishes on 1 MB+ adversarial inputs within a generous bound and never raises; files and child output
are capped before they are read; a grade with pathological sources still writes results.json.

Each parser runs in a child process (`bounded`), killed at the bound: a backtracking regex holds the GIL, so a
thread could not be abandoned, and a test of a broken defence must fail, not hang. The bound (10 s for 1 MB) is
far above what the scanners take (under 3 s on a loaded 2-core CPU; docs/SECURITY.md has the measured times) and
far below what the replaced code took (minutes to hours)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader import textscan
from grader.correctness import kernelcheck, static
from grader.correctness import sanitizer
from grader.cuda import build, cudacpu_source, cudainfo, runner

# Loose on purpose: a linear parse of 1 MB takes well under a second, a quadratic one hours; 30 s keeps that
# apart on a 2-core machine shared with other work (10 s flaked there under load), and is no timing claim.
BOUND_S = 30.0
MB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as e:  # noqa: BLE001 - reported to the test, which fails on it
        conn.send(("raised", f"{type(e).__name__}: {e}"))


def bounded(fn: Callable[..., Any], *args: Any, bound: float = BOUND_S) -> Any:
    """fn(*args) in a child process: its result; the test fails if it raises or takes longer than `bound`."""
    ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(child, fn, args), daemon=True)
    p.start()
    child.close()
    try:
        if not parent.poll(bound):
            pytest.fail(f"{getattr(fn, '__qualname__', fn)} took more than {bound:g} s")
        status, value = parent.recv()
    finally:
        p.kill()
        p.join()
    assert status == "ok", f"{getattr(fn, '__qualname__', fn)} raised {value}"
    return value


def _mb(unit: str, size: int = MB) -> str:
    """`unit` repeated to at least `size` characters."""
    return unit * (size // max(1, len(unit)) + 1)


# Inputs that made the replaced code backtrack or loop (each named by what it broke), and the C/CUDA-shaped ones
# the scanners have to get right. All at least 1 MB.
ADVERSARIAL = {
    "open comments": _mb("/*"),  # /\*.*?\*/ under DOTALL: each /* scanned to the end
    "escaped quotes": _mb('"\\'),
    "quotes": _mb("'"),
    "slashes": _mb("/"),
    "raw string openers": _mb('R"'),
    "multi-line raw string of /*": 'R"(' + _mb("/*\n") + ')"',
    "digit separators": _mb("1'"),
    "spliced line comments": _mb("//\\\n"),
    "launch openers": _mb("<<<"),
    "launches without parens": _mb("k<<<1,1>>> "),
    "launches": _mb("k<<<1,1>>>(a);\n"),
    "template closers": _mb("k>>>>>>>>><<<1,1>>>(a);"),
    "one long identifier": _mb("a") + "<<<1,1>>>(x)",
    "externs": '# 1 "glu_cuda.cu"\n' + _mb("extern "),
    "blank lines": _mb("\n"),
    "spaces": _mb(" "),
    "tmpxft paths": _mb("/") + "tmpxft_1",
    "a tmpxft path then slashes": "/tmpxft_x " + _mb("/"),
    "digits": _mb("0"),
    "digits and colons": _mb("1:"),
    "parens": _mb("("),
}


def _length_and_lines_kept(src: str) -> bool:
    out = textscan.strip_comments(src)
    return len(out) == len(src) and [i for i, c in enumerate(out) if c == "\n"] == [
        i for i, c in enumerate(src) if c == "\n"
    ]


# -- the scanner -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_the_comment_scanner_is_linear_and_keeps_every_line(name: str) -> None:
    assert bounded(_length_and_lines_kept, ADVERSARIAL[name])


@pytest.mark.parametrize(
    "src,code",
    [
        ('a /* x */ b // c\nd "e/*" f', "a         b     \nd       f"),
        ("// a \\\n b\nc", "      \n  \nc"),  # a backslash-newline continues a // comment (C's phase 2)
        ('R"x(/*)" y)x" z', "R" + " " * 12 + " z"),  # a raw string ends only at )x"
        ("int n = 1'000'000; char c = 'x';", "int n = 1'000'000; char c =    ;"),  # digit separators are code
        ('FOOR"c" u8R"(d)"', "FOOR" + " " * 3 + " u8R" + " " * 5),  # FOOR is an identifier, u8R a raw prefix
        ("/* never closed", "               "),
    ],
)
def test_the_scanner_follows_the_compiler(src: str, code: str) -> None:
    assert textscan.strip_comments(src) == code


def test_a_comment_marker_in_a_string_hides_no_shared_memory_from_racecheck() -> None:
    """The regex the sanitizer used stripped from a "/*" inside a string to the next "*/": the __shared__ between
    was not seen and racecheck did not run."""
    src = 'const char* a = "/*";\n__shared__ float s[32];\nconst char* b = "*/";\n'
    assert sanitizer.tools_for(src) == ["memcheck", "racecheck"]
    assert sanitizer.tools_for('// __shared__ float s[32];\nconst char* t = "__shared__";\n') == ["memcheck"]


# -- every parser, on every adversarial input -------------------------------------------------------------------------


def _every_parser(text: str) -> dict[str, float]:
    """Every parser the parent runs over submission-influenced text, on one input: the seconds each took."""
    runs: dict[str, Callable[[], object]] = {
        "textscan.code_mask": lambda: textscan.code_mask(text),
        "cudacpu_source.rewrite_launches": lambda: cudacpu_source.rewrite_launches(text),
        "cudacpu_source.unsupported": lambda: cudacpu_source.unsupported('# 1 "glu_cuda.cu"\n' + text, "glu_cuda.cu"),
        "sanitizer.tools_for": lambda: sanitizer.tools_for(text),
        "static.scan_cuda": lambda: static.scan_cuda(text),
        "static.scan_python": lambda: static.scan_python(text),
        "build._scrub": lambda: build._scrub(text, [("/tmp", "<tmp>/")]),
        "build.error_lines": lambda: build.error_lines(text),
        "cudainfo.parse_ptx": lambda: cudainfo.parse_ptx(".entry k(\n" + text),
        "cudainfo.parse_ptxas": lambda: cudainfo.parse_ptxas(
            "ptxas info    : Function properties for k\n" + text, {"k": cudainfo.KernelInfo("k")}
        ),
        "kernelcheck.classify": lambda: kernelcheck.classify("cuda", [], text.splitlines()[:100_000], []).text(),
    }
    seconds = {}
    for name, run in runs.items():
        t0 = time.monotonic()
        run()
        seconds[name] = time.monotonic() - t0
    return seconds


def _each_within_bound(text: str) -> None:
    seconds = bounded(_every_parser, text, bound=6 * BOUND_S)  # the child is killed if the sum runs past this
    assert len(seconds) == 11 and max(seconds.values()) < BOUND_S, seconds


@pytest.mark.slow  # 20 inputs x 11 parsers of 1 MB: about a minute on a 2-core CPU
@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_every_parser_finishes_on_adversarial_text(name: str) -> None:
    _each_within_bound(ADVERSARIAL[name])


_FRAGMENTS = st.sampled_from(
    [
        "/*",
        "*/",
        "//",
        "/",
        '"',
        "'",
        "\\",
        "\n",
        " ",
        'R"',
        "(",
        ")",
        "<<<",
        ">>>",
        "<",
        ">",
        "extern",
        "__shared__",
        "1",
        "a",
        ":",
        "::",
        "tmpxft_",
        ".",
        "ld.global",
        ".entry",
        "\r",
        "#",
        "é",
    ]
)


@pytest.mark.slow  # each example is 1 MB through every parser
@settings(max_examples=12, deadline=None, database=None)
@given(st.lists(_FRAGMENTS, min_size=1, max_size=12))
def test_every_parser_finishes_on_generated_megabytes(unit: list[str]) -> None:
    """Property: any 1 MB text made of a repeated mix of the characters and words the parsers look for (comment and
    string delimiters, launch brackets, path and PTX words) goes through every parser within the bound."""
    _each_within_bound(_mb("".join(unit)))


@settings(deadline=None, database=None)
@given(st.text(st.sampled_from("/tmpxft_a.- :\n\té"), max_size=40))
def test_the_linear_path_scrub_does_what_the_regex_did(text: str) -> None:
    """The scrub replaced a regex that backtracked on long runs of '/'; on short texts (where the regex is quick)
    both give the same result."""
    old = re.sub(r"(?<![\w.])/\S*/(tmpxft_[\w.-]+)", r"\1", text)
    assert build._scrub(text, []) == old


@pytest.mark.parametrize(
    "text",
    [_mb("/"), _mb("/") + "tmpxft", "/tmpxft_x " + _mb("/"), _mb("a/") + "/tmpxft_1", _mb("/x/tmpxft_a ")],
    ids=["slashes", "slashes then tmpxft", "a path then slashes", "words and slashes", "paths"],
)
def test_the_path_scrub_is_linear(text: str) -> None:
    """The replaced regex took 2.8 s on 20 kB of slashes (quadratic: about 5 minutes on 200 kB, a day on 1 MB)."""
    bounded(build._scrub, text, [("/tmp", "<tmp>/")])


@pytest.mark.parametrize("text", [_mb("\n"), _mb(" \n")], ids=["newlines", "blank lines"])
def test_ptx_of_blank_lines_is_linear(text: str) -> None:
    """An asm("\\n\\n...") puts blank lines in the PTX; the ^\\s* MULTILINE patterns were quadratic on them (6 s
    on 20k newlines)."""
    assert bounded(cudainfo.parse_ptx, ".entry k(\n" + text) == {"k": cudainfo.KernelInfo("k")}


def test_a_kernel_named_with_a_million_digits_costs_ptxas_parsing_nothing() -> None:
    name = "k" + "0" * MB
    log = f"ptxas info    : Function properties for {name}\n{'0' * MB} bytes spill\n    Used 1 registers"
    bounded(cudainfo.parse_ptxas, log, {name: cudainfo.KernelInfo(name)})


def _report_text(names: list[str]) -> str:
    return kernelcheck.classify("triton", [], names, ["j"], 1, [], True).text()


def test_many_kernel_launches_make_a_short_report_quickly() -> None:
    """A call that launches 20k differently named kernels, 1M times in all: the report (list.count and .index per
    name made it quadratic, and 600 MB long for 30k launches) lists 20 of them and counts the rest."""
    names = [f"k{i}" for i in range(20_000)] * 50
    text = bounded(_report_text, names)
    assert len(text) < 20_000 and "and 19980 more kernels" in text


@pytest.mark.parametrize("src", [_mb("extern "), _mb("extern a ") + "__shared__"], ids=["no shared", "shared"])
def test_extern_shared_scan_is_linear(src: str) -> None:
    found = bounded(cudacpu_source.unsupported, '# 1 "glu_cuda.cu"\n' + src, "glu_cuda.cu")
    assert bool(found) == src.endswith("__shared__")


# -- the static scan ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    ["-" * MB + "1", "a" + ".a" * (MB // 2), "not " * (MB // 4) + "1", "f" + "()" * (MB // 2), "lambda: " * (MB // 8)],
    ids=["unary", "attributes", "not", "calls", "lambdas"],
)
def test_too_deeply_nested_python_is_one_warning_not_a_crash(src: str) -> None:
    """ast.parse recurses over nesting: RecursionError or MemoryError. The scan says so and the grade goes on."""
    warnings = bounded(static.scan_python, src)
    assert [w.what for w in warnings] == [static.TOO_DEEP]
    assert warnings[0].text().startswith("could not scan: too deeply nested")


def test_python_attribute_chains_are_read_once() -> None:
    """1 MB of `x = a.a.a...` (400 deep, below the recursion limit): reading each chain again from every inner node
    took 13.7 s; with the sys.modules prefix every chain is one warning."""
    src = ("x = sys.modules" + ".a" * 400 + "\n") * 1200
    warnings = bounded(static.scan_python, src)
    assert len(warnings) == 1200 and {w.what for w in warnings} == {"uses sys.modules"}


def test_the_static_scan_of_a_deep_file_goes_on(tmp_path: Path) -> None:
    f = tmp_path / "glu_triton.py"
    f.write_text("import torch\n" + "x = " + "-" * 100_000 + "1\n")
    assert [w.what for w in static.scan(f, "triton")] == [static.TOO_DEEP]


# -- capped before read ------------------------------------------------------------------------------------------------


def test_read_capped_never_reads_past_its_cap(tmp_path: Path) -> None:
    """A 50 MB preprocessed unit (sparse: no disk) and an endless device cost the parent the cap, not their size."""
    unit = tmp_path / "unit.i"
    with open(unit, "wb") as f:
        f.truncate(50 * MB)
    tracemalloc.start()
    try:
        text, cut = textscan.read_capped(unit, MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cut and len(text) == MB
    assert peak < 6 * MB, f"reading 1 MiB of a 50 MB file allocated {peak >> 20} MiB"
    if os.path.exists("/dev/zero"):
        data, cut = bounded(textscan.read_capped_bytes, "/dev/zero", MB)
        assert cut and len(data) == MB
    small, cut = textscan.read_capped(unit, 100 * MB)
    assert not cut and len(small) == 50 * MB


def test_the_static_scan_reads_a_huge_source_only_up_to_its_cap(tmp_path: Path) -> None:
    src = tmp_path / "glu_cuda.cu"
    with open(src, "wb") as f:
        f.write(b"getenv(x);\n")
        f.truncate(static.MAX_SOURCE_BYTES * 4)  # NUL bytes past the cap
    found = bounded(static.scan, src, "cuda", bound=3 * BOUND_S)
    assert [w.what for w in found] == ["uses getenv(", "could not scan"]


def test_a_source_of_thousands_of_warnings_keeps_the_first_ones_and_a_count(tmp_path: Path) -> None:
    """12,000 `getenv(0);` lines gave 12,000 warnings in one row: a results.json over the schema's caps, which the
    TA report refuses. The row keeps MAX_WARNINGS and says how many more there were."""
    src = tmp_path / "glu_cuda.cu"
    src.write_text("getenv(0);\n" * 12_000)
    found = bounded(static.scan, src, "cuda", bound=3 * BOUND_S)
    assert len(found) == static.MAX_WARNINGS + 1
    assert found[-1].what == f"{12_000 - static.MAX_WARNINGS} more warnings"
    py = tmp_path / "glu_triton.py"
    py.write_text("".join(f"getattr(a, b{i})\n" for i in range(5_000)))
    assert len(bounded(static.scan, py, "triton", bound=3 * BOUND_S)) == static.MAX_WARNINGS + 1


def test_a_python_source_over_its_cap_is_not_parsed(tmp_path: Path) -> None:
    """Python's ast of a crafted list literal costs ~700 bytes of the grader's memory per byte of source (2.7 GB at
    4 MiB): a Triton file over MAX_PYTHON_BYTES is not scanned, and says so."""
    py = tmp_path / "glu_triton.py"
    py.write_text("x=[" + "a," * static.MAX_PYTHON_BYTES + "]\n")
    found = bounded(static.scan, py, "triton", bound=BOUND_S)
    assert [w.what for w in found] == ["could not scan"] and str(static.MAX_PYTHON_BYTES) in found[0].why


def _run_logged(cmd: list[str], cwd: Path, timeout_s: float) -> tuple[int | None, str]:
    ran = runner.run(cmd, cwd=cwd, timeout_s=timeout_s)
    return ran.returncode, ran.output


_BOMB = "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.buffer.write(chunk)\n"


def test_a_compiler_output_bomb_costs_the_parent_its_cap(tmp_path: Path) -> None:
    """A child writing 200 MB: drained to its end, the first MAX_LOG_BYTES kept, and a line that says it was cut."""
    rc, out = bounded(_run_logged, [sys.executable, "-c", _BOMB], tmp_path, 60, bound=6 * BOUND_S)
    assert rc == 0
    assert len(out.encode()) < build.MAX_LOG_BYTES + 100
    assert out.endswith(textscan.cut_note(build.MAX_LOG_BYTES))


def test_a_compiler_that_never_stops_talking_is_killed_at_its_timeout(tmp_path: Path) -> None:
    rc, out = bounded(
        _run_logged, [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('y' * 4096)"], tmp_path, 2
    )
    assert rc is None and out.endswith(textscan.cut_note(build.MAX_LOG_BYTES))


# -- a whole grade --------------------------------------------------------------------------------------------------


def _pathological(folder: Path) -> Path:
    """A submission whose kernels are the staff ones, each followed by what broke the parent: a multi-line raw
    string of 300k `/*` in the .cu (valid C++; the comment regex scanned from each to the end of the file), and a
    10_000-deep expression in the .py (RecursionError in ast.parse; the worker fails to import it too)."""
    folder.mkdir()
    cu = (ROOT / "reference" / "glu" / "solution_cuda.cu").read_text()
    (folder / "glu_cuda.cu").write_text(cu + '\nstatic const char* grader_bomb = R"(\n' + "/*\n" * 300_000 + ')";\n')
    py = (ROOT / "reference" / "glu" / "solution_triton.py").read_text()
    (folder / "glu_triton.py").write_text(py + "\nBOMB = " + "-" * 10_000 + "1\n")
    return folder


@pytest.mark.slow  # a CLI grade of both parts on the CPU: nvcc where there is one, the CPU layer, the interpreter
def test_a_grade_of_pathological_sources_writes_results(tmp_path: Path) -> None:
    sub = _pathological(tmp_path / "sub")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "GRADER_SECRET_SEED"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "grade",
            "--submission",
            str(sub),
            "--out",
            str(out),
            "--device",
            "cpu",
            "--no-perf",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert (out / "results.json").is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    outputs = {t["name"]: t["output"] for t in data["tests"]}
    static_rows = [o for n, o in outputs.items() if "static" in n]
    assert any(static.TOO_DEEP in o for o in static_rows), static_rows
    cuda_points = sum(t["score"] for t in data["tests"] if t["name"].startswith("cuda"))
    assert cuda_points > 0, "the CUDA part (the staff kernel) earned nothing: " + json.dumps(outputs)[:3000]


def _measure() -> None:
    """`python tests/test_untrusted_text.py`: each parser's seconds on each 1 MB adversarial input, for
    docs/SECURITY.md (the slowest input per parser)."""
    worst: dict[str, tuple[float, str]] = {}
    for name, text in ADVERSARIAL.items():
        for parser, s in _every_parser(text).items():
            if s > worst.get(parser, (0.0, ""))[0]:
                worst[parser] = (s, name)
    for parser, (s, name) in sorted(worst.items(), key=lambda kv: -kv[1][0]):
        print(f"{parser:26} {s:6.2f} s  ({name})")


if __name__ == "__main__":
    _measure()


def test_a_compiler_that_writes_a_huge_file_is_stopped_at_the_write_cap(tmp_path, monkeypatch):
    """A macro bomb's preprocessed unit goes to disk before any read cap applies: every compiler the grader runs is
    under a file-size limit, so the file stops at the cap and the build fails with a line that says why."""
    import os

    from grader.cuda import runner

    if os.name != "posix":
        pytest.skip("the write cap uses POSIX sh's ulimit")
    monkeypatch.setattr(runner, "MAX_WRITE_BYTES", 1 << 20)
    rc, log = _run_logged(["dd", "if=/dev/zero", "of=unit.i", "bs=1M", "count=8"], tmp_path, 60)
    assert rc != 0
    assert (tmp_path / "unit.i").stat().st_size <= 1 << 20
    assert "a file it wrote passed 1 MiB" in log, log
