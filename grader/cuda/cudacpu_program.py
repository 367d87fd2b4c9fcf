"""The one-program check of the CUDA-on-CPU layer: a .cu file the layer would build differently from nvcc earns no
CPU-layer points (`one_program` says which directive on which line; the GPU grade grades it).

The rules and why they hold: the comment below and docs/SECURITY.md ("The CPU layer grades what nvcc builds").
The layer's own macros (`layer_macros`) and the build are grader/cuda/cudacpu.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from grader import textscan
from grader.cuda.nvcc_macros import NVCC_MACROS

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
# C/C++ standard headers a launcher uses. Any other (a shim-only file such as cudacpu.h, a local file, a header only
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


def ident_char(c: str) -> bool:
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
                elif ident_char(d) or d == "." or (d == "'" and j + 1 < n and ident_char(s[j + 1])):
                    j += 1
                else:
                    break
            out.append(Token("num", s[i:j]))
            i = j
        elif ident_char(c):
            j = i + 1
            while j < n and ident_char(s[j]):
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
