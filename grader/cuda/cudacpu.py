"""Build a CUDA source for the CPU: the trusted half of the CUDA-on-CPU layer (grader/child/cudacpu/).

Why our own layer and not a maintained runtime: HIP-CPU (the one maintained CPU runtime for CUDA-like code) needs
the source ported to HIP's names and TBB with a C++17 parallel STL, runs blocks in parallel in an order it
chooses, and has no notion of the launch orders or exact-size buffers this check needs. What a GLU kernel uses is
small: the qualifiers, a launch over the grid and block, dim3 and the index variables, __half/__nv_bfloat16 with
their conversions, the float intrinsics and the vector types. That is one header (cuda_cpu.h) that g++ >= 11 and
clang >= 14 compile anywhere, with AddressSanitizer and UBSan, on Linux and macOS alike.

The build, as the grade's untrusted identity in its scratch (like nvcc's, grader/cuda/build.py):
  1. the source's `k<<<grid, block[, shm[, stream]]>>>(args)` launches are rewritten (here, as text, keeping every
     line where it was) into calls of the layer's launcher;
  2. the preprocessor runs first, and the student's own lines of its output are scanned for what the layer cannot
     run faithfully (__syncthreads, warp shuffles, atomics, inline asm, ...): those make the part "needs a GPU";
  3. the rewritten source is compiled with the layer's header forced in first and linked into the harness
     (grader/child/cudacpu/harness.cpp), with -fsanitize=address,undefined,alignment. Where the sanitizers'
     runtimes are not installed, it is built without them, and the result says so.
Platforms: Linux with g++ >= 11 or clang >= 14 (tested: g++ 12, clang 14 with libclang-rt-14-dev). macOS: Apple
clang, whose ASan and UBSan runtimes ship with the Xcode command-line tools. Windows: usually no g++ or clang++ on
PATH, and then the result says how to get one (WSL, where all of this works as on Linux, or MSYS2's g++, which has
no ASan: the build then runs without sanitizers and says so); the part is reported "needs a GPU", never a crash.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from grader import textscan
from grader.cuda import build, runner
from grader.cuda.build import (
    MAX_SOURCE_BYTES,
    BuildFor,
    BuildRequest,
    PartBuild,
    State,
    _read_output,
    _scrub,
    error_lines,
)
from grader.cuda.nvcc_macros import NVCC_MACROS

if TYPE_CHECKING:
    from grader.identity import Scratch

LAYER = Path(__file__).resolve().parents[1] / "child" / "cudacpu"
SANITIZE = ("-fsanitize=address,undefined,alignment", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")
# g++ on an ELF platform: cuda_cpu.h puts the __device__ and __constant__ variables, and only them, in .noinit and
# .persistent; this link script (INSERT: the default script does the rest) gathers both sections between two symbols
# on 64 KiB boundaries (every page size of Linux's platforms divides it), pages of their own that host code cannot
# touch between launches (grader/child/cudacpu/device_memory.h). It is written into each build directory (_stage):
# the layer's folder ships only the file kinds the image, the wheel and the handout list. -fsanitize-sections keeps
# those variables AddressSanitizer's globals (an access past a __device__ array is reported, and a host access names
# the variable), which a variable in an explicit section otherwise is not.
DEVICE_VARIABLES_SCRIPT_NAME = "cudacpu_device.ld"
DEVICE_VARIABLES_SCRIPT = """SECTIONS
{
  .cudacpu_device :
  {
    . = ALIGN(65536);
    cudacpu_device_begin = .;
    *(.noinit .noinit.*)
    *(.persistent .persistent.*)
    . = ALIGN(65536);
    cudacpu_device_end = .;
  }
}
INSERT AFTER .data;
"""
DEVICE_VARIABLES_LINK = (f"-Wl,-T,{DEVICE_VARIABLES_SCRIPT_NAME}",)
DEVICE_VARIABLES_SANITIZE = ("-fsanitize-sections=.noinit,.persistent",)
BASE = ("-std=c++17", "-O1", "-g", "-w", "-pthread")
HARNESS = "kernel.cpu"  # the built executable's default name in the scratch's libs/ (the pipeline names it per part)
EXE = ".exe" if sys.platform == "win32" else ""  # what MinGW's g++ (and nvcc on Windows) add to an executable's name


# What a student reads beside every CUDA correctness result earned on the CPU.
CPU_NOTE = (
    "run on this CPU by the grader's CUDA-on-CPU layer (AddressSanitizer and UBSan on, the grid run in three "
    "orders); these correctness points count as on a GPU, and the GPU grade re-checks everything"
)


@dataclass
class CpuBuild:
    """The old record of build_cpu (kept while callers move to PartBuild); State is grader/cuda/build.py's."""

    state: State
    harness: Path | None  # the built executable (in the scratch's libs/), when state is OK
    text: str  # for the student: what was built and how, or why not
    compiler: str = ""
    sanitized: bool = False
    constructs: list[str] = field(default_factory=list)  # "__syncthreads (glu_cuda.cu:42)", ...
    seconds: float = 0.0


def find_compiler() -> str | None:
    """$CXX, else g++, else clang++, else c++ from PATH."""
    for name in (os.environ.get("CXX", ""), "g++", "clang++", "c++"):
        if name and (found := shutil.which(name)):
            return found
    return None


def how_to_get_a_compiler() -> str:
    if sys.platform == "win32":
        return (
            "no C++ compiler on PATH: install WSL (wsl --install) and grade there, or MSYS2's g++ "
            "(pacman -S mingw-w64-ucrt-x86_64-gcc; ASan is not available there), then grade again"
        )
    if sys.platform == "darwin":
        return "no C++ compiler on PATH: run `xcode-select --install` (Apple clang, with AddressSanitizer)"
    return "no C++ compiler on PATH: install g++ (Debian/Ubuntu: sudo apt-get install g++) or clang"


# -- 0. one program: what the layer builds is what nvcc builds ------------------------------------------------------
#
# The layer compiles the student's file with a host compiler against its own headers; nvcc compiles it with its own
# headers, its own predefined macros and two passes (host, and device with __CUDA_ARCH__). Anything the preprocessor
# can tell apart between the two (a compiler's identity macros, a header only one of them has, __CUDA_ARCH__, the
# layer's own names) would let the CPU layer grade one program and nvcc build another: a file whose nvcc build is a
# stub earned full CUDA correctness on a machine without a GPU. Rewriting the source under one macro set
# is not possible here (nvcc and its headers are usually absent), so the layer *refuses* such a file: it earns no
# CPU-layer points, says which directive on which line, and the GPU grade grades it. What is accepted is a small
# preprocessor language whose meaning is provably the same in both builds:
#   - directives: #include of an allow-listed CUDA or standard header (by name: the layer's shims stand in for the
#     CUDA ones), #define, #undef, #if/#ifdef/#ifndef/#elif/#else/#endif, #pragma unroll/nounroll/once,
#     #error/#warning, and the null directive; nothing else (#line, #include_next, #elifdef, linemarkers...);
#   - in a condition (and in every macro a condition reaches, through macro bodies), only names whose state is the
#     same in both builds: the student's own names, `defined`, and SAME_IN_BOTH. Refused there: every reserved name
#     (`__x`, `_X`: the compilers' and the headers' namespace), the CUDA headers' namespaces (CUDA*, cuda*, cu[A-Z]*,
#     NV_*, ...), every macro the layer's own compiler and headers define (listed with -dM, so `#ifdef EOF` and
#     `#ifndef INFINITY` are caught whatever the standard library), and gnu-mode names (linux, unix, i386);
#   - anywhere (code, macro bodies, pragmas): no identifier only one build has or that differs between compilers
#     (__clang__, __GNUC__, __SANITIZE_ADDRESS__, __COUNTER__, __DATE__, any other `__x__` outside ALLOWED_ANYWHERE,
#     the layer's cudacpu names), no `_Pragma`, no `__has_include`-style operator, no trigraph;
#   - no macro that could turn a difference into data: no `##` (it can paste `_` and `_clang__` into `__clang__`),
#     no macro body that names a stringifying macro (`XSTR(x) STR(x)` would turn `__global__`'s expansion, which
#     differs, into a string), no parameter called as a macro (`APPLY(f, x) f(x)`);
#   - #define/#undef of a reserved name is refused, and of a name in a CUDA header's namespace or one the layer's
#     headers define, if an #include comes after it (a CUDA header could redefine it under nvcc only).
# The scan is one linear pass over the source (read with a cap first): no regex that can backtrack, no recursion.

SOURCE_CAP = 1 << 20  # bytes of the student's .cu the layer reads: far above any kernel file (the staff's: ~30 KB)

# Macros both builds define, whose value (or defined-ness) is the same in both: nvcc defines __CUDACC__ 1 and the
# layer does too; __cplusplus is 201703L in both (nvcc -std=c++17, grader/cuda/build.py; the layer -std=c++17);
# __FILE__ is
# the file's base name in both (nvcc is run on `glu_cuda.cu` in its directory; the layer's unit starts with #line 1
# "glu_cuda.cu") and __LINE__ the student's line (the launch rewrite keeps every line where it was). The CUDA
# qualifiers are macros in both, so `defined(__global__)` is the same; their *expansions* differ (nvcc:
# __attribute__((global)), the layer: nothing), which is why no macro may stringify an expanded argument (above).
# Checked with nvcc 13.0 on the H200 (nvcc -std=c++17 -arch=sm_90 -E -Xcompiler -dM): __CUDACC__ 1, __cplusplus
# 201703L, __NVCC__ 1, __CUDA_ARCH__ 900 (device pass), CUDART_VERSION 13000, _GNU_SOURCE 1, no linux/unix; __FILE__
# of `nvcc ... g.cu` is "g.cu"; and a `#ifndef __CUDA_ARCH__` switch in a kernel runs its #else branch on the GPU.
QUALIFIERS = frozenset(
    {
        "__global__",
        "__device__",
        "__host__",
        "__forceinline__",
        "__noinline__",
        "__launch_bounds__",
        "__grid_constant__",
        "__shared__",
        "__constant__",
    }
)
SAME_IN_BOTH = QUALIFIERS | {"__CUDACC__", "__cplusplus", "__FILE__", "__LINE__", "__VA_ARGS__"}
# Reserved names of the form __x__ a kernel may use in its code and macro bodies: keywords and qualifiers that mean
# the same to both compilers (or that the layer lacks, so that a use fails the CPU build: "needs a GPU").
ALLOWED_ANYWHERE = SAME_IN_BOTH | {
    "__restrict__",
    "__inline__",
    "__attribute__",
    "__asm__",
    "__volatile__",
    "__typeof__",
    "__extension__",
    "__func__",
    "__FUNCTION__",
    "__align__",
    "__managed__",
}
# Non-reserved names g++ and clang predefine in their GNU modes (nvcc's host compiler may run in one).
PLATFORM_NAMES = frozenset({"linux", "unix", "i386"})
# The CUDA toolkit's macro namespaces (cuda_runtime_api.h's CUDART_VERSION, cuda.h's CUDA_VERSION and its cuXxx
# aliases, driver_types.h's cudaStreamAttrValue, <nv/target>'s NV_IF_TARGET, CUB/Thrust/libcu++): a name there may be
# a macro under nvcc and not in the layer.
_OWNED_PREFIXES = ("CUDA", "cuda", "CU_", "NV_", "NVRTC", "CUB_", "THRUST_", "CCCL", "LIBCUDACXX")
# Headers a kernel may include: the CUDA ones the layer's shims stand in for (grader/child/cudacpu/include/) and the
# C/C++ standard headers a launcher uses. Any other (a shim-only file such as cuda_cpu.h, a local file, a header only
# one machine has) is refused: its contents differ between the builds.
CUDA_HEADERS = frozenset(
    {
        "cuda.h",
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "cuda_fp16.h",
        "cuda_fp16.hpp",
        "cuda_bf16.h",
        "cuda_bf16.hpp",
        "device_launch_parameters.h",
        "vector_types.h",
    }
)
STD_HEADERS = frozenset(
    {
        *("assert.h", "float.h", "inttypes.h", "limits.h", "math.h", "stdbool.h", "stddef.h", "stdint.h"),
        *("stdio.h", "stdlib.h", "string.h"),
        *("algorithm", "array", "cassert", "cfloat", "cinttypes", "climits", "cmath", "cstddef", "cstdint"),
        *("cstdio", "cstdlib", "cstring", "initializer_list", "limits", "numeric", "tuple", "type_traits"),
        *("utility", "vector"),
    }
)
_DIRECTIVES = frozenset(
    {"include", "define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "pragma", "error", "warning"}
)
_CONDITIONS = frozenset({"if", "ifdef", "ifndef", "elif"})
_PRAGMAS = frozenset({"unroll", "nounroll", "once"})
GPU_GRADES_IT = "the CPU layer grades only what nvcc builds the same way; the GPU grade will grade this file"


def _reserved(name: str) -> bool:
    return name.startswith("__") or (len(name) > 1 and name[0] == "_" and name[1].isupper())


def _owned(name: str) -> bool:
    """A name in the CUDA toolkit's macro namespaces."""
    return name.startswith(_OWNED_PREFIXES) or (len(name) > 2 and name[:2] == "cu" and name[2].isupper())


def _ident_char(c: str) -> bool:
    # '$' and non-ASCII letters are identifier characters to g++ and clang (so `a$__clang__` is one name, not two).
    return c.isalnum() or c == "_" or c == "$" or c > "\x7f"


@dataclass
class Token:
    kind: str  # "id", "num", "str", "op" (one punctuator character, or "#", "##", "(")
    text: str


def _tokens(s: str) -> list[Token]:
    """The preprocessing tokens of one (spliced, comment-free) line that matter here, in one linear pass:
    identifiers, pp-numbers (so that the `e` of 1e5 or the `f` of 1.0f is not a name), string and character
    literals (skipped whole: a name inside a string is data), '#' and '##' (and their digraphs %: and %:%:)."""
    out: list[Token] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c.isspace():
            i += 1
        elif c.isdigit() or (c == "." and i + 1 < n and s[i + 1].isdigit()):
            j = i + 1
            while j < n:
                d = s[j]
                if d in "+-" and s[j - 1] in "eEpP":
                    j += 1
                elif _ident_char(d) or d == "." or (d == "'" and j + 1 < n and _ident_char(s[j + 1])):
                    j += 1
                else:
                    break
            out.append(Token("num", s[i:j]))
            i = j
        elif _ident_char(c):
            j = i + 1
            while j < n and _ident_char(s[j]):
                j += 1
            out.append(Token("id", s[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == "\\" else 1
            out.append(Token("str", s[i : j + 1]))
            i = j + 1
        elif c == "#" or (c == "%" and s.startswith("%:", i)):
            w = 1 if c == "#" else 2
            if s.startswith("#", i + w) or s.startswith("%:", i + w):
                out.append(Token("op", "##"))
                i += w + (1 if s[i + w] == "#" else 2)
            else:
                out.append(Token("op", "#"))
                i += w
        else:
            out.append(Token("op", c))
            i += 1
    return out


def logical_lines(src: str) -> list[tuple[int, str]]:
    """The source as the preprocessor's phases 1-3 leave it, one entry per logical line: (the physical line it starts
    on, its text), with every backslash-newline spliced (a backslash then blanks then a newline too, as g++ and clang
    accept), every comment replaced by one space (a block comment over several lines does not end a directive) and
    string literals kept. CR and CRLF count as newlines, as they do for g++."""
    text = src.replace("\r\n", "\n").replace("\r", "\n")
    starts: list[int] = []  # physical line (1-based) each spliced line starts on
    spliced: list[str] = []
    part: list[str] = []
    first = 0
    for number, line in enumerate(text.split("\n"), 1):
        body = line.rstrip(" \t\f\v")
        if not part:
            first = number
        if body.endswith("\\"):
            part.append(body[:-1])
            continue
        part.append(line)
        spliced.append("".join(part))
        starts.append(first)
        part = []
    if part:
        spliced.append("".join(part))
        starts.append(first)
    joined = "\n".join(spliced)
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    here = 0  # the spliced line of the current position
    begun = 0  # the spliced line the current logical line began on

    def code(segment: str) -> None:
        nonlocal here, begun
        pieces = segment.split("\n")
        buf.append(pieces[0])
        for p in pieces[1:]:
            out.append((starts[begun], "".join(buf)))
            buf.clear()
            buf.append(p)
            here += 1
            begun = here

    pos = 0
    for span in textscan.literal_spans(joined):
        code(joined[pos : span.start])
        if span.comment:
            buf.append(" ")
            here += joined.count("\n", span.start, span.end)
        else:
            buf.append(joined[span.start : span.end])
        pos = span.end
    code(joined[pos:])
    out.append((starts[min(begun, len(starts) - 1)] if starts else 1, "".join(buf)))
    return out


def _directive(text: str) -> tuple[str, list[Token]] | None:
    """(the directive's name, the tokens after it) when the logical line is a directive ('#' or '%:' first)."""
    s = text.lstrip(" \t\f\v")
    if s.startswith("#"):
        rest = s[1:]
    elif s.startswith("%:"):
        rest = s[2:]
    else:
        return None
    toks = _tokens(rest)
    if not toks:
        return "", []
    head = toks[0]
    return head.text, toks[1:]


def _header(toks: list[Token], text: str) -> str | None:
    """The header an #include names, `<name>` or `"name"`; None for a computed include."""
    s = text.lstrip(" \t\f\v")[1:].lstrip()
    if s.startswith(":"):  # the digraph's second character
        s = s[1:]
    s = s.lstrip(" \t\f\v")[len("include") :].strip(" \t\f\v")
    if s[:1] == "<" and ">" in s:
        return s[1 : s.index(">")].strip()
    if toks and toks[0].kind == "str" and toks[0].text[:1] == '"' and len(toks[0].text) >= 2:
        return toks[0].text[1:-1]
    return None


@dataclass
class Macro:
    line: int
    params: set[str]
    body: list[Token]
    function_like: bool


def _never(name: str, layer_macros: frozenset[str]) -> str | None:
    """Why `name` may appear nowhere in the source (None when it may): it exists in one build only, or its value
    differs between compilers."""
    if name.lower().startswith("cudacpu"):
        return "is the CPU layer's own name (nvcc has no such thing)"
    if name == "_Pragma" or name.startswith("__has_"):
        return "is a preprocessor operator whose result differs between the two builds"
    if name in PLATFORM_NAMES:
        return "is predefined by some compilers' GNU modes only"
    if name in ALLOWED_ANYWHERE:
        return None
    if len(name) > 4 and name.startswith("__") and name.endswith("__"):
        return "is a compiler-defined macro whose value differs between nvcc's build and the CPU layer's"
    if _reserved(name) and name in layer_macros:
        return "is a macro the CPU layer's compiler or headers define, not nvcc's"
    return None


def _in_condition(name: str, layer_macros: frozenset[str]) -> str | None:
    """Why `name` may not decide a condition (None when it may)."""
    if name in SAME_IN_BOTH:
        return None
    if _reserved(name):
        return "is a reserved name (the compilers' and headers' own), not the same in nvcc's build and the CPU layer's"
    if _owned(name):
        return "is in the CUDA headers' namespace: it can be a macro under nvcc and not in the CPU layer"
    if name in layer_macros:
        return "is a macro of the CPU layer's compiler or headers, which nvcc's build need not define alike"
    if name in NVCC_MACROS:
        return "is a macro nvcc's build defines (its headers: grader/cuda/nvcc_macros.py), which the CPU layer need not"
    return None


class _Refused(Exception):
    """one_program's verdict: the line, and what on it the CPU layer cannot build the way nvcc does."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line
        self.what = what


class _Directive(NamedTuple):
    line: int  # the physical line the logical line starts on
    name: str  # "include", "define", ...
    text: str  # the whole logical line
    toks: list[Token]  # the tokens after the directive's name
    ids: list[str]  # the identifiers among them


@dataclass
class _Scan:
    """What one_program's pass over the logical lines collects for the checks that need the whole file."""

    layer_macros: frozenset[str]
    macros: dict[str, list[Macro]] = field(default_factory=dict)
    conditions: list[tuple[int, str]] = field(default_factory=list)  # (line, name) for every name a condition reads
    owned_def: tuple[int, str] | None = None  # the first #define/#undef of a name a header could define
    code_ids: list[tuple[int, str]] = field(default_factory=list)  # (line, name) for every identifier of the code

    def line(self, line: int, text: str) -> None:
        """One logical line: its identifiers when it is code; a directive checked by its handler (_CHECKS)."""
        d = _directive(text)
        if d is None:
            self.code_ids.extend((line, t.text) for t in _tokens(text) if t.kind == "id")
            return
        name, toks = d
        if name in ("", "error", "warning"):
            return  # the null directive; a message (compilation stops, or warns, the same in both builds)
        if name not in _DIRECTIVES:
            raise _Refused(line, f"the directive #{name} is not one the CPU layer accepts")
        ids = [t.text for t in toks if t.kind == "id"]
        for i in ids:
            if why := _never(i, self.layer_macros):
                raise _Refused(line, f"#{name} ... {i}: {i} {why}")
        check = _CHECKS.get(name)
        if check is not None:
            check(self, _Directive(line, name, text, toks, ids))


def _check_include(scan: _Scan, d: _Directive) -> None:
    header = _header(d.toks, d.text)
    if header is None:
        raise _Refused(d.line, "a computed #include (its header is a macro)")
    if header not in CUDA_HEADERS and header not in STD_HEADERS:
        raise _Refused(
            d.line,
            f"#include of {header}: the CPU layer builds against its own copies of the CUDA headers and "
            f"the standard ones (allowed: {', '.join(sorted(CUDA_HEADERS | STD_HEADERS))})",
        )
    if scan.owned_def is not None:
        raise _Refused(
            d.line,
            f"#include after the #define/#undef of {scan.owned_def[1]} on line {scan.owned_def[0]}: a header "
            "included under nvcc could define that name differently; put the #includes first",
        )


def _check_pragma(scan: _Scan, d: _Directive) -> None:
    if not d.ids or d.ids[0] not in _PRAGMAS:
        raise _Refused(d.line, f"#pragma {d.ids[0] if d.ids else ''}: only #pragma unroll, nounroll and once")


def _check_define(scan: _Scan, d: _Directive) -> None:
    """#define and #undef: of a name the student may own; a #define's macro is kept for the whole-file checks."""
    if not d.toks or d.toks[0].kind != "id":
        raise _Refused(d.line, f"#{d.name} without a name")
    target = d.toks[0].text
    if _reserved(target):
        raise _Refused(d.line, f"#{d.name} {target}: a reserved name (the compilers' and headers' own)")
    if _owned(target) or target in scan.layer_macros:
        scan.owned_def = scan.owned_def or (d.line, target)
    if d.name == "define":
        scan.macros.setdefault(target, []).append(_macro(d, target))


def _macro(d: _Directive, target: str) -> Macro:
    """The macro a #define of `target` defines: its parameters and body (refused when the body pastes with ##)."""
    body = d.toks[1:]
    params: set[str] = set()
    # Function-like only when '(' touches the name (`#define F (x)` is an object-like F).
    at = d.text.find(target, d.text.find("define") + len("define"))
    function_like = at >= 0 and d.text[at + len(target) : at + len(target) + 1] == "("
    if function_like:
        k = 1
        while k < len(body) and body[k].text != ")":
            if body[k].kind == "id":
                params.add(body[k].text)
            k += 1
        body = body[k + 1 :]
    if any(t.text == "##" for t in body):
        raise _Refused(d.line, f"#define {target}: the ## operator (it can paste a compiler's macro name)")
    return Macro(d.line, params, body, function_like)


def _check_condition(scan: _Scan, d: _Directive) -> None:
    scan.conditions.extend((d.line, i) for i in d.ids if i != "defined")


_CHECKS: dict[str, Callable[[_Scan, _Directive], None]] = {
    "include": _check_include,
    "pragma": _check_pragma,
    "define": _check_define,
    "undef": _check_define,
    **dict.fromkeys(_CONDITIONS, _check_condition),
}


def _check_stringify(macros: dict[str, list[Macro]]) -> None:
    """A macro that stringifies (#param) may be used from code only; a macro body naming one, or calling one of its
    own parameters, could hand it an argument expanded first, whose text differs."""
    stringifying = {name for name, defs in macros.items() if any(t.text == "#" for m in defs for t in m.body)}
    for target, defs in macros.items():
        for m in defs:
            for k, t in enumerate(m.body):
                if t.kind != "id":
                    continue
                if t.text in stringifying:
                    raise _Refused(
                        m.line,
                        f"#define {target}: its body uses {t.text}, which stringifies its argument (an argument "
                        "macro-expanded first differs between the two builds)",
                    )
                if t.text in m.params and k + 1 < len(m.body) and m.body[k + 1].text == "(":
                    raise _Refused(m.line, f"#define {target}: it calls its parameter {t.text} as a macro")


def _check_conditions(scan: _Scan) -> None:
    """Every name a condition reads, and every macro it reaches through macro bodies (iteratively: no recursion)."""
    seen: set[str] = set()
    todo = list(reversed(scan.conditions))
    while todo:
        line, ident = todo.pop()
        if ident in seen:
            continue
        seen.add(ident)
        if why := _in_condition(ident, scan.layer_macros):
            raise _Refused(line, f"a condition reads {ident}, which {why}")
        for m in scan.macros.get(ident, []):
            todo.extend((line, t.text) for t in m.body if t.kind == "id" and t.text not in m.params)


def _check_code(scan: _Scan) -> None:
    for line, ident in scan.code_ids:
        if why := _never(ident, scan.layer_macros):
            raise _Refused(line, f"{ident} {why}")


_TRIGRAPHS = ("??=", "??/", "??'", "??(", "??)", "??!", "??<", "??>", "??-")


def one_program(source: str, filename: str, layer_macros: frozenset[str] = frozenset()) -> str | None:
    """None when the source preprocesses to the same program under nvcc and under the CPU layer (by the rules
    above); else one line for the student: where, what, and that the GPU grade will grade it."""
    if len(source) > SOURCE_CAP:
        return f"{filename} is larger than {SOURCE_CAP >> 20} MiB, more than the CPU layer scans; {GPU_GRADES_IT}"
    if any(t in source for t in _TRIGRAPHS):
        return f"{filename}: a trigraph (??x): compilers disagree on them; {GPU_GRADES_IT}"
    scan = _Scan(layer_macros)
    try:
        for line, text in logical_lines(source):
            scan.line(line, text)
        _check_stringify(scan.macros)
        _check_conditions(scan)
        _check_code(scan)
    except _Refused as r:
        return f"{filename}:{r.line}: {r.what}; {GPU_GRADES_IT}"
    return None


_layer_macro_cache: dict[tuple[str, float], frozenset[str]] = {}


def layer_macros(cxx: str) -> frozenset[str] | None:
    """Every macro the layer's build defines before and around the student's code: the compiler's predefined ones
    (with the layer's flags, sanitizers included) and those of the layer's header and of every header a kernel may
    include. Staff files only, run as the grader and cached per compiler; None when the compiler cannot list them."""
    key = (cxx, os.stat(cxx).st_mtime) if os.path.exists(cxx) else (cxx, 0.0)
    if key in _layer_macro_cache:
        return _layer_macro_cache[key]
    with tempfile.TemporaryDirectory(prefix="cudacpu-macros-") as tmp:
        probe = Path(tmp) / "probe.cpp"
        probe.write_text(
            "".join(f"#if __has_include(<{h}>)\n#include <{h}>\n#endif\n" for h in sorted(STD_HEADERS | CUDA_HEADERS))
        )
        flags = [*BASE, f"-I{LAYER / 'include'}", f"-I{LAYER}", "-include", "cuda_cpu.h", "-dM", "-E", probe.name]
        done = None
        # With the sanitizers' flags first (their macros are the build's); a compiler that refuses them (MSYS2's
        # g++) builds without them, and is asked without them.
        for sanitize in (SANITIZE, ()):
            try:
                done = runner.run([cxx, *sanitize, *flags], cwd=tmp, timeout_s=120.0, limit=8 << 20)
            except OSError:
                return None
            if done.returncode == 0 and not done.truncated:
                break
        else:
            return None
    assert done is not None
    names = set()
    for line in done.output.splitlines():
        if line.startswith("#define "):
            rest = line[len("#define ") :]
            end = 0
            while end < len(rest) and _ident_char(rest[end]):
                end += 1
            names.add(rest[:end])
    found = frozenset(names)
    _layer_macro_cache[key] = found
    return found


# -- 1. launches -------------------------------------------------------------------------------------------------


def _code_mask(src: str) -> bytearray:
    r"""For each character: 1 when it is code (not in a comment, string or character literal). A linear scanner
    (grader/textscan.py): the regex this was (`/\*.*?\*/` and string patterns under DOTALL) backtracked without end
    on crafted sources."""
    return textscan.code_mask(src)


def _name_start(src: str, j: int, floor: int) -> int | None:
    r"""Where the identifier that ends at `j` (spaces before `j` skipped) starts, not looking before `floor`: its first
    ASCII letter or '_' after the digits that may open the run of word characters. None when there is none.
    (What `re.search(r"[A-Za-z_][\w]*\s*$", src[:j])` found, without trying every start position of the text.)"""
    e = j
    while e > floor and src[e - 1].isspace():
        e -= 1
    b = e
    while b > floor and (src[b - 1].isalnum() or src[b - 1] == "_"):
        b -= 1
    for k in range(b, e):
        if src[k] == "_" or ("a" <= src[k] <= "z") or ("A" <= src[k] <= "Z"):
            return k
    return None


def _kernel_start(src: str, end: int, floor: int = 0) -> int:
    """Where the kernel expression that ends at `end` (just before `<<<`) starts: names, `::`, template args. Never
    looks before `floor` (the end of the previous launch), so the scans of all launches together are linear."""
    i = end
    while True:
        j = i
        while j > floor and src[j - 1].isspace():
            j -= 1
        if j > floor and src[j - 1] == ">":  # template arguments: back over the balanced <...>
            depth, k = 0, j - 1
            while k >= floor:
                depth += {">": 1, "<": -1}.get(src[k], 0)
                if depth == 0:
                    break
                k -= 1
            if k < floor:
                return i
            j = k
            while j > floor and src[j - 1].isspace():
                j -= 1
        start = _name_start(src, j, floor)
        if start is None:
            return j
        j = start
        if j >= floor + 2 and src[j - 2 : j] == "::":
            i = j - 2
            continue
        return j


def _matching(src: str, start: int, mask: bytearray, open_: str, close: str) -> int:
    """The index of the `close` that balances the `open_` at `start` (-1 if none)."""
    depth = 0
    for k in range(start, len(src)):
        if not mask[k]:
            continue
        if src[k] == open_:
            depth += 1
        elif src[k] == close:
            depth -= 1
            if depth == 0:
                return k
    return -1


def rewrite_launches(src: str) -> str:
    """Every `kernel<<<cfg>>>(args)` (templates, `ns::` names, any whitespace, 2 to 4 launch parameters) becomes
    `(::cudacpu::configure(::cudacpu::Config(cfg)) ? (void)0 : ::cudacpu::launch_configured([&](auto... a) {
    kernel(a...); }, args))`, each part on its own line, evaluated in nvcc's order (the configuration first)."""
    out: list[str] = []
    pos = 0
    mask = _code_mask(src)
    i = src.find("<<<")
    while i != -1:
        if not mask[i] or i < pos:
            i = src.find("<<<", i + 3)
            continue
        depth, k = 0, i + 3
        while k < len(src) - 2:
            if mask[k]:
                c = src[k]
                depth += c in "([{"
                depth -= c in ")]}"
                if depth == 0 and src.startswith(">>>", k):
                    break
            k += 1
        else:
            break
        cfg_end = k
        p = cfg_end + 3
        while p < len(src) and src[p].isspace():
            p += 1
        if p >= len(src) or src[p] != "(":
            # Not a launch; go on after its `>>>` (from i + 3 every `<<<` inside would scan to the same `>>>` again:
            # quadratic on a source of many `<<<`).
            i = src.find("<<<", cfg_end + 3)
            continue
        close = _matching(src, p, mask, "(", ")")
        if close == -1:
            break
        start = _kernel_start(src, i, pos)
        kernel = " ".join(src[start:i].split())
        args = src[p + 1 : close]
        # Every part stays on its line: the name's newlines come first (the configuration starts on the line of
        # `<<<`, the arguments on theirs), so __LINE__ in either reads what nvcc's build reads. The configuration
        # is evaluated before the arguments, as nvcc sequences a launch (cuda_cpu.h `configure`).
        out.append(src[pos:start])
        out.append(
            "\n" * src[start:i].count("\n")
            + f"(::cudacpu::configure(::cudacpu::Config({src[i + 3 : cfg_end]})) ? (void)0 : "
            + f"::cudacpu::launch_configured([&](auto... cudacpu_a) {{ {kernel}(cudacpu_a...); }}"
            + "\n" * src[cfg_end + 3 : p].count("\n")
            + (f", {args}))" if args.strip() else args + "))")
        )
        pos = close + 1
        i = src.find("<<<", pos)
    out.append(src[pos:])
    return "".join(out)


# -- 2. what the layer cannot run ----------------------------------------------------------------------------------


class _Finder(Protocol):
    def search(self, text: str, /) -> object: ...


_TOKEN = re.compile(r"\w+|[^\w\s]")  # a word or one other character: one token per match, no backtracking


class _ExternShared:
    r"""`extern <words> __shared__` on a line (dynamic shared memory), in one pass over its tokens. The regex it
    replaces, `\bextern\s+(\w+\s+)*__shared__\b`, ran from every `extern` over all the words after it: quadratic
    on a line of many `extern`s."""

    def search(self, text: str, /) -> bool:
        if "__shared__" not in text or "extern" not in text:
            return False
        chain = False  # inside `extern` followed by words only
        for m in _TOKEN.finditer(text):
            word = m.group()
            if word == "__shared__" and chain:
                return True
            chain = word == "extern" or (chain and (word[0].isalnum() or word[0] == "_"))
        return False


# Each: what it is, for the student. Matched on the student's own lines of the preprocessed source (so comments
# and #if'd-out code do not count), with the layer's __shared__ left as it is. The regexes are linear on a line of
# any length: a fixed word, then at most a run of \w (or \s before a fixed character), nothing nested.
UNSUPPORTED: tuple[tuple[str, _Finder], ...] = (
    ("__syncthreads (block-wide barriers)", re.compile(r"\b__syncthreads\w*\b|\b__syncwarp\b|\bbarrier\.sync\b")),
    ("dynamic shared memory (extern __shared__)", _ExternShared()),
    ("warp shuffles and votes", re.compile(r"\b__(shfl|ballot|any|all|activemask|match|reduce)\w*\b")),
    ("atomics", re.compile(r"\batomic[A-Z]\w*\b|\bcuda::atomic\w*\b")),
    ("inline PTX (asm)", re.compile(r"\b(__asm__|__asm|asm)\b")),
    ("__nanosleep", re.compile(r"\b__nanosleep\b")),
    ("cooperative groups", re.compile(r"\bcooperative_groups\b|\bthis_grid\b|\bgrid\.sync\b")),
    ("clock-based waits", re.compile(r"\b(clock|clock64|globaltimer)\s*\(")),
    ("memory fences", re.compile(r"\b__threadfence\w*\b")),
)
# Applied with .match (one start) to one line; each part is a run of one class followed by a character outside it
# (\s then a digit or 'l', \d then \s, [^"] then '"'), so it cannot backtrack super-linearly.
_LINEMARK = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"([^"]*)"')
MAX_UNIT_BYTES = 20_000_000  # of the preprocessed unit; the parent never reads more than this of it


def unsupported(preprocessed: str, filename: str) -> list[str]:
    """What the student's file uses that the layer cannot run faithfully: "what (file:line)", first use each."""
    found: dict[str, str] = {}
    line, mine = 0, False
    for text in preprocessed.splitlines():
        m = _LINEMARK.match(text)
        if m:
            line, mine = int(m.group(1)), os.path.basename(m.group(2)) == filename
            continue
        if mine:
            for what, pat in UNSUPPORTED:
                if what not in found and pat.search(text):
                    found[what] = f"{what} ({filename}:{line})"
        line += 1
    return list(found.values())


# -- 3. the build -------------------------------------------------------------------------------------------------


def fresh_dir(scratch: Scratch | None, build_dir: Path | None) -> Path:
    """A new build directory: in the scratch's root, which only the grader can write (nothing can be planted at its
    name), or `build_dir` (tests, without a scratch)."""
    if scratch is not None:
        return Path(tempfile.mkdtemp(prefix="cpubuild-", dir=scratch.root))
    assert build_dir is not None, "a build needs a scratch or a build_dir"
    build_dir.mkdir(parents=True, exist_ok=True)
    return build_dir


def give_to_untrusted(bdir: Path, scratch: Scratch | None) -> None:
    for p in [bdir, *bdir.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if scratch is not None and scratch.identity.separated:
            os.chown(p, scratch.identity.uid, scratch.identity.gid)


def _run_step(cmd: list[str], cwd: Path, scratch: Scratch | None, timeout_s: float) -> tuple[int, str]:
    """One compiler step of a harness build, through the one runner (grader/cuda/runner.py) as the grade's untrusted
    identity in `cwd`: (exit status, -1 on a timeout, its whole process group killed; output with the machine's
    directories replaced, and a line on a timeout)."""
    ran = runner.run(cmd, cwd=cwd, timeout_s=timeout_s, scratch=scratch)
    scrub = [(str(cwd), "")] + ([(str(scratch.root), "<scratch>/")] if scratch is not None else [])
    if ran.returncode is None:
        return -1, _scrub(ran.output, scrub) + f"\n{Path(cmd[0]).name} timed out after {timeout_s:g} s"
    return ran.returncode, _scrub(ran.output, scrub)


def _stage(build_dir: Path, src_name: str, source: str) -> Path:
    """The layer's files and the rewritten source, in the (untrusted) build directory."""
    shutil.copytree(LAYER, build_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (build_dir / DEVICE_VARIABLES_SCRIPT_NAME).write_text(DEVICE_VARIABLES_SCRIPT)
    unit = build_dir / (src_name + ".cpp")
    # #line keeps every diagnostic, and every sanitizer report, on the student's file and line.
    # The layer's own macros (its entry point's name, the scan's switch) are undefined before the student's first
    # line: the student's file sees only what it would see under nvcc (one_program refuses the rest).
    undefs = "".join(f"#undef {m}\n" for m in ("CUDACPU_ENTRY", "CUDACPU_SCAN", *SIGNATURE_MACROS))
    unit.write_text(f'{undefs}#line 1 "{src_name}"\n' + rewrite_launches(source))
    return unit


# The entry point's signature, as the harnesses' translation unit gets it (grader/child/cudacpu/protocol.h): how many
# input pointers, output pointers and int64 shape arguments (rows, out_cols, each input's row stride) it takes.
SIGNATURE_MACROS = ("CUDACPU_INPUTS", "CUDACPU_OUTPUTS", "CUDACPU_SCALARS")


def signature_flags(inputs: int) -> list[str]:
    """-D flags for a harness whose entry follows the spec's `inputs` (grader/child/cuda_abi.py): one output, and the
    shape arguments rows, out_cols and one row stride per input."""
    if not 1 <= inputs <= 15:
        raise ValueError(f"the CUDA harnesses take 1 to 15 inputs, not {inputs}")
    return [f"-DCUDACPU_INPUTS={inputs}", "-DCUDACPU_OUTPUTS=1", f"-DCUDACPU_SCALARS={inputs + 2}"]


def build_cpu(
    src: Path,
    *,
    entry: str,
    out_name: str = HARNESS,
    scratch: Scratch | None,
    build_dir: Path | None = None,
    timeout_s: float = 180.0,
    nvcc_ok: bool = True,
    inputs: int = 1,
) -> CpuBuild:
    """build_cpu_layer under its old name and record (kept while callers move to grader/cuda/part.py's build_part)."""
    req = BuildRequest(
        src, "", entry, inputs, timeout_s, scratch, nvcc_ok=nvcc_ok, build_dir=build_dir, out_name=out_name
    )
    b = build_cpu_layer(req)
    return CpuBuild(b.state, b.artifact, b.text, b.compiler, b.sanitized, b.constructs, b.seconds)


def build_cpu_layer(req: BuildRequest) -> PartBuild:
    """Build `req.src` into the CPU harness (req.harness_name(), +EXE). Never raises for a bad source. With a
    scratch, the compiler runs as the grade's untrusted identity in a fresh directory of its root and the harness is
    copied into its libs/; without one (tests) it runs as this process in `req.build_dir`. req.nvcc_ok: nvcc compiled
    this source, so a failure to compile it here is the layer's limit, not the student's error."""
    t0 = time.monotonic()
    src = req.src

    def done(state: State, text: str, compiler: str = "", constructs: list[str] | None = None) -> PartBuild:
        return PartBuild(
            BuildFor.CPU_LAYER, state, None, text, time.monotonic() - t0, compiler, constructs=constructs or []
        )

    cxx = find_compiler()
    if cxx is None:
        return done(State.NO_COMPILER, how_to_get_a_compiler())
    source, too_big = textscan.read_capped(src, MAX_SOURCE_BYTES)
    if too_big:
        return done(State.FAILED, f"{src.name} is larger than {MAX_SOURCE_BYTES >> 20} MiB: not built")
    name = Path(cxx).name
    # One program (section 0): a file that could tell this build from nvcc's earns nothing here.
    refused = _refusal(source, src.name, cxx)
    if refused is not None:
        return done(State.NEEDS_GPU, "needs a GPU: " + refused, name, [refused])
    bdir = fresh_dir(req.scratch, req.build_dir)
    unit = _stage(bdir, src.name, source)
    give_to_untrusted(bdir, req.scratch)

    def run(args: list[str]) -> tuple[int, str]:
        return _run_step([cxx, *args], bdir, req.scratch, max(1.0, req.timeout_s - (time.monotonic() - t0)))

    common = [*BASE, "-Iinclude", "-I.", "-include", "cuda_cpu.h", f"-DCUDACPU_ENTRY={req.entry}"]
    common += signature_flags(req.inputs)
    try:
        uses = _scan_unit(run, common, unit, src.name)
        if uses:
            return done(
                State.NEEDS_GPU, f"needs a GPU: the CPU layer cannot run {'; '.join(uses)} faithfully", name, uses
            )
        sanitized, errs = _link(run, common, unit, device_variables_protected(cxx))
        if errs is not None and req.nvcc_ok:
            return done(
                State.NEEDS_GPU,
                "needs a GPU: nvcc compiles it, but the CPU layer cannot (it uses CUDA the layer does not "
                f"provide); {name} says:\n" + "\n".join(errs),
                name,
            )
        if errs is not None:
            return done(State.FAILED, f"does not compile for the CPU; {name} says:\n" + "\n".join(errs), name)
        data = _read_output(bdir / ("harness" + EXE))
    except OSError as e:
        return done(State.NEEDS_GPU, f"needs a GPU: could not run {name}: {e.strerror or e}", name)
    dst = (req.scratch.libs if req.scratch is not None else bdir) / (req.harness_name(BuildFor.CPU_LAYER) + EXE)
    dst.write_bytes(data)
    os.chmod(dst, 0o755)
    runtimes = "compiler-rt (Debian/Ubuntu: libclang-rt-NN-dev)" if "clang" in name else "libasan and libubsan"
    how = "with AddressSanitizer and UBSan" if sanitized else f"WITHOUT sanitizers (install {runtimes} for them)"
    text = f"built for the CPU with {name} {how}"
    return PartBuild(BuildFor.CPU_LAYER, State.OK, dst, text, time.monotonic() - t0, name, sanitized=sanitized)


def _refusal(source: str, filename: str, cxx: str) -> str | None:
    """one_program's verdict against the layer's own macros; a refusal when the compiler cannot list them."""
    macros = layer_macros(cxx)
    if macros is None:
        return (
            f"{filename}: {Path(cxx).name} could not list its predefined macros, so the CPU layer cannot check that "
            f"it builds what nvcc builds; {GPU_GRADES_IT}"
        )
    return one_program(source, filename, macros)


def _scan_unit(run: Callable[[list[str]], tuple[int, str]], common: list[str], unit: Path, filename: str) -> list[str]:
    """Preprocess the unit (in the build directory) and list what of the student's lines the layer cannot run."""
    rc, _ = run([*common, "-DCUDACPU_SCAN", "-E", "-o", "unit.i", unit.name])
    if rc != 0:
        return []  # the compile below says why
    unit_text, cut = textscan.read_capped(unit.parent / "unit.i", MAX_UNIT_BYTES)  # capped before it is read
    too_big = [f"a preprocessed unit of more than {MAX_UNIT_BYTES} bytes (not scanned past that)"] if cut else []
    return unsupported(unit_text, filename) + too_big


def device_variables_protected(cxx: str) -> bool:
    """Whether this compiler's build puts the __device__ / __constant__ variables in pages of their own: g++ (not
    clang, which has no variable-only section attribute) on Linux (ELF, a GNU-compatible linker that takes INSERT).
    Elsewhere they stay ordinary host memory (docs/SECURITY.md, the CPU layer's limits)."""
    if not sys.platform.startswith("linux"):
        return False
    macros = layer_macros(cxx)
    return macros is not None and "__GNUC__" in macros and "__clang__" not in macros and "__ELF__" in macros


def _link(
    run: Callable[[list[str]], tuple[int, str]], common: list[str], unit: Path, device_variables: bool = False
) -> tuple[bool, list[str] | None]:
    """Compile and link the unit into the harness, with the sanitizers, else without (their runtimes may be what is
    missing): (sanitized, None), or (False, the first attempt's error lines) when neither built. device_variables:
    link the __device__ variables into pages of their own (device_variables_protected)."""
    link = [unit.name, "harness.cpp", "-o", "harness" + EXE, *(DEVICE_VARIABLES_LINK if device_variables else ())]
    sanitize = [*SANITIZE, *(DEVICE_VARIABLES_SANITIZE if device_variables else ())]
    rc, log = run([*common, *sanitize, *link])
    if rc == 0:
        return True, None
    rc_plain, _ = run([*common, *link])
    if rc_plain == 0:
        return False, None
    return False, error_lines(log) or log.strip().splitlines()[-20:]


# -- 4. the compute-sanitizer harness (grader/correctness/sanitizer.py runs it) ----------------------------------------


def build_sanitizer_harness(req: BuildRequest) -> PartBuild:
    """The GPU harness (grader/child/cudacpu/gpu_harness.cu linked with the student's file by nvcc) in the scratch's
    libs/ as req.harness_name() (+EXE); without a scratch (tests) built in `req.build_dir` as this process. On a
    failure its text is the failing step's log (PartBuild.errors() is what to show)."""
    t0 = time.monotonic()
    nvcc = build.find_nvcc()
    if nvcc is None:
        return PartBuild(BuildFor.SANITIZER, State.NO_COMPILER, None, build.NVCC_MISSING, time.monotonic() - t0)
    src, scratch = req.src, req.scratch
    bdir = fresh_dir(scratch, req.build_dir)
    shutil.copyfile(src, bdir / src.name)
    shutil.copyfile(LAYER / "gpu_harness.cu", bdir / "gpu_harness.cu")
    shutil.copyfile(LAYER / "protocol.h", bdir / "protocol.h")
    give_to_untrusted(bdir, scratch)
    flags = ["-O3", "-std=c++17", "-lineinfo", f"-arch={req.arch or build.DEFAULT_ARCH}"]
    # Three steps, so that the entry point's name reaches the harness's translation unit only: compiled together
    # with -D, the student's file could test CUDACPU_ENTRY and be another program under the sanitizer than in the
    # graded build: the sanitizer must check the one program that was graded.
    steps = [
        [nvcc, *flags, "-c", src.name, "-o", "student.o"],
        [nvcc, *flags, f"-DCUDACPU_ENTRY={req.entry}", *signature_flags(req.inputs), "-c", "gpu_harness.cu"]
        + ["-o", "gpu_harness.o"],
        [nvcc, *flags, "student.o", "gpu_harness.o", "-o", "harness" + EXE],
    ]
    for cmd in steps:
        rc, log = _run_step(cmd, bdir, scratch, req.timeout_s)
        if rc != 0:
            return PartBuild(BuildFor.SANITIZER, State.FAILED, None, log, time.monotonic() - t0, "nvcc")
    dst = (scratch.libs if scratch is not None else bdir) / (req.harness_name(BuildFor.SANITIZER) + EXE)
    dst.write_bytes(_read_output(bdir / ("harness" + EXE)))
    dst.chmod(0o755)
    text = "built with nvcc for compute-sanitizer"
    return PartBuild(BuildFor.SANITIZER, State.OK, dst, text, time.monotonic() - t0, "nvcc")
