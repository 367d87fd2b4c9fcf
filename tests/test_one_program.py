"""One program (issue 28, class 3): what the CUDA-on-CPU layer grades is what nvcc builds.

The layer compiles a student's .cu with a host compiler against its own headers; nvcc compiles it with its own
headers and macros, in a host and a device pass. A source whose preprocessor can tell the two apart (the layer's
own macros, a compiler's identity macros, __CUDA_ARCH__, __has_include, a shim-only header, a header macro such as
CUDART_VERSION, a stringified qualifier) would let the layer grade one program while nvcc builds another: a file
whose nvcc build was a stub got 24/24 CUDA correctness, signed. grader/cuda/cudacpu_program.py's one_program refuses
such a file before anything is built: the CPU layer grants it nothing, says which line, and leaves it to the GPU grade.

Each attack below is a real two-program source: `_two_programs` shows that the layer's preprocessor and an
nvcc-like one (nvcc's identification macros, __CUDA_ARCH__ for its device pass, CUDART_VERSION from its runtime
header) pick different code from it, so the test is not about text that merely looks suspicious."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.cuda import cudacpu, cudacpu_program
from grader.results import PASSED, Kind, Reason

ROOT = Path(__file__).resolve().parent.parent
SCALAR = (ROOT / "tests" / "data" / "problems" / "glu" / "cuda_cpu" / "scalar" / "glu_cuda.cu").read_text()
EXPLOIT = ROOT / "tests" / "exploits" / "cpu_layer_macro_switch"
LEGIT = sorted(
    [
        *(ROOT / "reference").glob("*/solution*_cuda.cu"),
        *(ROOT / "tests" / "data" / "problems" / "glu" / "correct").glob("*/*.cu"),
        *(ROOT / "tests" / "data" / "problems" / "glu" / "cuda_cpu").glob("*/*.cu"),
    ]
)
CXX = cudacpu.find_compiler()
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++ or clang++)")

GLU1 = "__device__ __forceinline__ float glu1(float a, float b) { return a * (1.0f / (1.0f + __expf(-b))); }\n"
REAL = "    return a * (1.0f / (1.0f + __expf(-b)));\n"
STUB = "    return 0.0f;\n"


def _switched(condition: str, prelude: str = "") -> str:
    """The scalar kernel, whose glu1 is the real one when `condition` holds and a stub of zeros otherwise."""
    assert GLU1 in SCALAR
    body = (
        f"{prelude}__device__ __forceinline__ float glu1(float a, float b) {{\n"
        f"{condition}\n{REAL}#else\n{STUB}#endif\n}}\n"
    )
    return SCALAR.replace(GLU1, body)


def _line_of(source: str, needle: str) -> int:
    return source[: source.index(needle)].count("\n") + 1


# Each: a source the layer would grade as the real GLU while nvcc builds the stub, and the line the refusal names.
ATTACKS: dict[str, tuple[str, str]] = {
    # the layer's own macros (__CUDACPU__ in its header, CUDACPU_ENTRY on its command line, before this change)
    "layer_macro": (_switched("#ifdef CUDACPU_ENTRY"), "#ifdef CUDACPU_ENTRY"),
    "layer_identity_macro": (_switched("#ifdef __CUDACPU__"), "#ifdef __CUDACPU__"),
    # a compiler-identity macro nvcc's own build does not have, and one through a #define alias
    "not_nvcc": (_switched("#ifndef __NVCC__"), "#ifndef __NVCC__"),
    "gnuc_alias": (
        _switched("#if HOSTY", "#define HOSTY (__GNUC__ && !__NVCC__)\n"),
        "#define HOSTY",
    ),
    # nvcc's device pass defines __CUDA_ARCH__; the layer compiles device code as host code
    "cuda_arch_in_device_code": (_switched("#ifndef __CUDA_ARCH__"), "#ifndef __CUDA_ARCH__"),
    # a header only one build has
    "has_include": (_switched("#if __has_include(<cudacpu.h>)"), "#if __has_include"),
    "shim_only_header": (_switched("#ifndef CUDART_VERSION", "#include <cudacpu.h>\n"), "#include <cudacpu.h>"),
    "header_macro": (_switched("#ifndef CUDART_VERSION"), "#ifndef CUDART_VERSION"),
    # the directive hidden from a line-by-line reader: a line continuation (with blanks after the backslash, which
    # g++ and clang accept), a comment inside the directive, a comment over two lines, the %: digraph; each tests
    # CUDART_VERSION, which only the condition rule refuses (read as code, it would pass)
    "line_continuation": (_switched("#if \\   \n!defined(CUDART_VERSION)"), "#if \\"),
    "comment_in_directive": (_switched("# /**/ ifndef CUDART_VERSION"), "# /**/ ifndef"),
    "comment_over_lines": (_switched("#if /* a note\n   over two lines */ !defined(CUDART_VERSION)"), "#if /* a note"),
    "digraph": (_switched("%:ifndef CUDART_VERSION"), "%:ifndef"),
    # a macro name pasted together from pieces none of which is reserved
    "pasted_name": (_switched("#if !CAT(_, _, NVCC__)", "#define CAT(a, b, c) a##b##c\n"), "#define CAT"),
    # a qualifier's expansion (empty in the layer, __attribute__((global)) under nvcc) turned into data
    "stringified_qualifier": (
        SCALAR.replace(
            GLU1,
            "#define STR(x) #x\n#define XSTR(x) STR(x)\n"
            "__device__ __forceinline__ float glu1(float a, float b) {\n"
            "    return sizeof(XSTR(__global__)) == 1 ? a * (1.0f / (1.0f + __expf(-b))) : 0.0f;\n}\n",
        ),
        "#define XSTR",
    ),
}
# The layer's own macros are also gone before the student's first line, so these two are one program again (the
# stub in both builds) and the scan refuses them as well: two defences, each tested.
HIDDEN = {"layer_macro", "layer_identity_macro"}


def _layer_cpp(source: str, tmp: Path) -> str:
    """`source` preprocessed as the layer preprocesses it (its headers, its flags, its unit's prefix)."""
    assert CXX is not None
    bdir = tmp / "layer"
    bdir.mkdir(exist_ok=True)
    unit = cudacpu._stage(bdir, "glu_cuda.cu", source)
    out = subprocess.run(
        [
            CXX,
            *cudacpu.BASE,
            "-Iinclude",
            "-I.",
            "-include",
            "cudacpu.h",
            "-DCUDACPU_ENTRY=glu_cuda_forward",
            "-E",
            "-P",
            unit.name,
        ],
        cwd=bdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout if out.returncode == 0 else "error: " + out.stderr


def _nvcc_like_cpp(source: str, tmp: Path) -> str:
    """`source` preprocessed with what nvcc's device pass defines and the layer does not (no nvcc here): nvcc's
    identification macros, __CUDA_ARCH__, its runtime header's CUDART_VERSION, and none of the layer's files."""
    d = tmp / "nvcc"
    d.mkdir(exist_ok=True)
    for h in ("cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h"):
        (d / h).write_text("")
    (d / "glu_cuda.cu").write_text(source)
    defs = [
        "-D__NVCC__=1",
        "-D__CUDACC__=1",
        "-D__CUDA_ARCH__=900",
        "-DCUDART_VERSION=12040",
        "-D__global__=__attribute__((global))",
        "-D__device__=",
        "-D__forceinline__=inline",
        "-D__restrict__=",
    ]
    out = subprocess.run(
        [CXX or "g++", "-std=c++17", "-w", "-I.", *defs, "-E", "-P", "-x", "c++", "glu_cuda.cu"],
        cwd=d,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout if out.returncode == 0 else "error: " + out.stderr


def _two_programs(source: str, tmp: Path) -> bool:
    """Whether the two preprocessors leave different programs: one has the real GLU and the other does not (or
    one of them cannot build it at all), or a qualifier's expansion became a string."""
    layer, nvcc = _layer_cpp(source, tmp), _nvcc_like_cpp(source, tmp)
    if layer.startswith("error") or nvcc.startswith("error"):
        return layer.startswith("error") != nvcc.startswith("error")
    if "XSTR" in source:
        return '""' in layer and '"__attribute__((global))"' in nvcc
    return ("__expf(-b)" in layer) != ("__expf(-b)" in nvcc)


@needs_cxx
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_source_that_tells_the_two_builds_apart_gets_no_cpu_build(name, tmp_path):
    source, needle = ATTACKS[name]
    if name in HIDDEN:
        assert not _two_programs(source, tmp_path), f"the layer's own macro in {name} is visible to the student"
    else:
        assert _two_programs(source, tmp_path), f"{name} is not a two-program source: the test proves nothing"
    src = tmp_path / "glu_cuda.cu"
    src.write_text(source)
    b = cudacpu.build_cpu(src, entry="glu_cuda_forward", scratch=None, build_dir=tmp_path / "build")
    assert b.state == cudacpu.State.NEEDS_GPU and b.harness is None, (b.state, b.text)
    assert len(b.text.splitlines()) == 1, b.text  # one clear line
    assert f"glu_cuda.cu:{_line_of(source, needle)}:" in b.text, b.text
    assert "the GPU grade will grade this file" in b.text and b.constructs, b.text


@needs_cxx
@pytest.mark.parametrize("path", LEGIT, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_legitimate_kernel_is_one_program(path):
    """The staff solutions of every problem and every CPU-layer test kernel: nothing legitimate is refused."""
    macros = cudacpu.layer_macros(CXX)
    assert macros, "the layer's compiler listed no macros"
    assert cudacpu_program.one_program(path.read_text(), path.name, macros) is None


@needs_cxx
def test_the_layer_leaves_the_student_no_macro_of_its_own(tmp_path):
    """What the student's first line sees: none of the layer's own macros (its helpers, its entry point's name, the
    scan's switch), so no #ifdef can find the layer by name; __CUDACC__ is there, as under nvcc."""
    assert CXX is not None
    bdir = tmp_path / "b"
    bdir.mkdir()
    unit = cudacpu._stage(bdir, "glu_cuda.cu", "")
    out = subprocess.run(
        [
            CXX,
            *cudacpu.BASE,
            "-Iinclude",
            "-I.",
            "-include",
            "cudacpu.h",
            "-DCUDACPU_ENTRY=glu_cuda_forward",
            "-DCUDACPU_SCAN",
            "-dM",
            "-E",
            unit.name,
        ],
        cwd=bdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    names = {line.split()[1].split("(")[0] for line in out.splitlines() if line.startswith("#define ")}
    assert not [n for n in names if "cudacpu" in n.lower()], sorted(n for n in names if "cudacpu" in n.lower())
    assert "__CUDACC__" in names
    # Every macro the layer leaves defined is either one the scan refuses in a condition or one nvcc has alike.
    macros = cudacpu.layer_macros(CXX) or frozenset()
    for n in names:
        assert n in cudacpu_program.SAME_IN_BOTH or cudacpu_program._in_condition(n, macros), n


# -- the scan itself ------------------------------------------------------------------------------------------------

FORBIDDEN = [
    "!defined(__NVCC__)",
    "__clang__",
    "defined __GNUC__",
    "__has_include(<x.h>)",
    "CUDART_VERSION >= 12000",
    "defined(CUDACPU_ENTRY)",
    "__CUDA_ARCH__ >= 800",
    "EOF == -1",
    "_GNU_SOURCE",
    "linux",
    # Defined by nvcc's build only (cuda_runtime.h, force-included, pulls in <time.h> and more): a file whose nvcc
    # build returned the stub's error under `#ifdef CLOCKS_PER_SEC` earned the CPU layer's 24/24 (red-team pass).
    "defined(CLOCKS_PER_SEC)",
    "TIME_UTC == 1",
    "defined isascii",
]
ALLOWED = ["defined(BLOCK)", "BLOCK >= 128", "__CUDACC__", "__cplusplus >= 201703L", "MODE == 2 && !defined(DEBUG)"]


def _obfuscate(directive: str, cond: str, data) -> str:
    """`#directive cond` written as a preprocessor reads it but a line-by-line reader may not: random splices (a
    backslash, maybe blanks, a newline) inside any token, comments between tokens, the %: digraph, CRLF."""
    hash_ = data.draw(st.sampled_from(["#", "%:", "  #", "\t%:"]))
    text = hash_ + data.draw(st.sampled_from(["", " ", "/**/", " /* x */ "])) + directive + " " + cond
    out = []
    for ch in text:
        out.append(ch)
        if data.draw(st.integers(0, 9)) == 0:
            out.append(data.draw(st.sampled_from(["\\\n", "\\ \n", "\\\t\n", "\\\r\n"])))
    line = "".join(out)
    return line + data.draw(st.sampled_from(["\n", "\r\n", " // trailing\n", " /* over\n two */\n"]))


@settings(deadline=None, max_examples=300)
@given(st.data())
def test_any_spelling_of_a_forbidden_condition_is_refused_and_of_an_allowed_one_is_not(data):
    """A property over spellings: the scan reads directives as the preprocessor does, so splices, comments,
    digraphs and line ends neither hide a forbidden condition nor make an allowed one look forbidden."""
    directive = data.draw(st.sampled_from(["if", "elif"]))
    macros = frozenset({"EOF", "_GNU_SOURCE", "NULL"})
    cond = data.draw(st.sampled_from(FORBIDDEN))
    bad = "#define BLOCK 128\n#if 0\n" * (directive == "elif") + _obfuscate(directive, cond, data) + "#endif\n"
    assert cudacpu_program.one_program("int a;\n" + bad, "k.cu", macros) is not None, repr(bad)
    cond = data.draw(st.sampled_from(ALLOWED))
    good = "#define BLOCK 128\n#if 0\n" * (directive == "elif") + _obfuscate(directive, cond, data) + "#endif\n"
    assert cudacpu_program.one_program("int a;\n" + good, "k.cu", macros) is None, repr(good)


@pytest.mark.parametrize(
    "source, what",
    [
        ('int x = 1;\n_Pragma("push_macro(\\"X\\")")\n', "_Pragma"),
        ("#include_next <cuda_runtime.h>\n", "#include_next"),
        ('# 1 "other.h"\n', "#1"),
        ('#line 1 "other.h"\n', "#line"),
        ('#pragma push_macro("X")\n', "#pragma push_macro"),
        ("#define X __clang__\n", "__clang__"),
        ("#define __CUDACC__ 0\n", "reserved"),
        ("#define CUDA_CHECK(x) x\n#include <cuda_fp16.h>\n", "#include after"),
        ("#define APPLY(f, a) f(a)\n", "parameter f"),
        ("int v = __COUNTER__;\n", "__COUNTER__"),
        ("int v = ::cudacpu::launches;\n", "cudacpu"),
        ("#ifdef X\n#endif\n??=if 1\n", "trigraph"),
        ("#include MY_HEADER\n", "computed"),
        ('#include "glu_helpers.h"\n', "glu_helpers.h"),
        ("#elifdef X\n", "#elifdef"),
    ],
)
def test_each_other_way_to_tell_the_builds_apart_is_refused(source, what):
    why = cudacpu_program.one_program(source, "k.cu", frozenset({"EOF"}))
    assert why is not None and what in why and why.startswith("k.cu:"), why


def test_macro_bodies_reached_from_a_condition_are_checked_in_a_chain_of_any_length():
    chain = "".join(f"#define M{i} M{i + 1}\n" for i in range(10_000)) + "#define M10000 __x86_64\n#if M0\n#endif\n"
    why = cudacpu_program.one_program(chain, "k.cu", frozenset())
    assert why is not None and "__x86_64" in why, why
    assert cudacpu_program.one_program(chain.replace("__x86_64", "1"), "k.cu", frozenset()) is None


@pytest.mark.parametrize(
    "source",
    [
        "\\\n" * 300_000,  # one logical line of splices
        "/*" * 300_000,  # an unterminated comment
        '"' * 500_000,  # empty strings
        "#define A(" + "x," * 200_000 + "y) #y\n",  # a huge parameter list
        "#if " + "(" * 400_000 + "\n",  # deep parentheses (no recursion anywhere)
        "a" * 1_000_000,  # one identifier
    ],
    ids=["splices", "comments", "quotes", "params", "parens", "identifier"],
)
def test_the_scan_is_linear_on_a_megabyte_of_hostile_text(source):
    t0 = time.monotonic()
    cudacpu_program.one_program(source, "k.cu", frozenset())
    assert time.monotonic() - t0 < 10.0


def test_a_source_over_the_cap_is_refused_unread():
    why = cudacpu_program.one_program("int a;\n" * (cudacpu_program.SOURCE_CAP // 7 + 1), "k.cu", frozenset())
    assert why is not None and "larger than" in why, why


# -- the exploit, graded ------------------------------------------------------------------------------------------


@needs_cxx
def test_without_the_check_the_exploit_would_be_graded_as_a_correct_kernel(tmp_path, monkeypatch):
    """What the check prevents: with it switched off, the layer builds the exploit's real GLU (nvcc's device pass
    would build the stub: _two_programs), and it computes F.glu."""
    from grader.child.cudacpu_binding import CpuRowKernel

    src = EXPLOIT / "glu_cuda.cu"
    assert _two_programs(src.read_text(), tmp_path)
    monkeypatch.setattr(cudacpu_program, "one_program", lambda *a, **k: None)
    b = cudacpu.build_cpu(src, entry="glu_cuda_forward", scratch=None, build_dir=tmp_path / "build")
    assert b.state == cudacpu.State.OK, b.text
    k = CpuRowKernel(b.harness, "glu_cuda_forward", lambda c: c // 2, "h", "s", "glu_cuda.cu")
    x = torch.randn(3, 64)
    torch.testing.assert_close(k(x), torch.nn.functional.glu(x, dim=-1))


@pytest.mark.slow
@needs_cxx
def test_the_macro_switch_exploit_earns_no_cuda_point_on_the_cpu(grade_dir):
    g = grade_dir(EXPLOIT, only=("cuda",))
    cuda = [t for t in g.tests if t.part == "cuda"]
    build = next(t for t in cuda if t.kind == Kind.CPU_BUILD)
    assert build.state != PASSED and build.reason == Reason.NEEDS_GPU, build.output
    assert "glu_cuda.cu:21:" in build.output and "__CUDA_ARCH__" in build.output, build.output
    assert sum(t.score for t in cuda if t.kind == Kind.CORRECTNESS) == 0
    assert all(t.reason == Reason.NEEDS_GPU for t in cuda if t.kind == Kind.CORRECTNESS)


def test_no_compiler_is_needed_to_refuse():
    """The scan itself needs neither nvcc nor a C++ compiler: it is Python over the source's text."""
    why = cudacpu_program.one_program(ATTACKS["not_nvcc"][0], "glu_cuda.cu")
    assert why is not None and "__NVCC__" in why
