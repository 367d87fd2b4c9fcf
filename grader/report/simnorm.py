"""Normalising a submission's source before `python -m grader similarity` fingerprints it.

The tokens a copier adds that change nothing (`; pass`, a second `;`, `#define` aliases of keywords, docstrings, dead
branches) are taken out with parsers that already exist: Python through `ast` (`py_statements`), C/C++/CUDA through
the toolchain's `cpp` run in a subprocess under a timeout and memory and output caps on a text whose directives other
than #define/#undef/#if* are blanked first, so it never reads a file (`safe_for_cpp`, `run_cpp`); then token classes.
A file the parser cannot take falls back to its own tokens. Every step is linear in the (size-capped) text, or
bounded by a timeout (cpp). Why and how in full: docs/architecture.md ("The similarity check").
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field

from grader import textscan

CPP_TIMEOUT_S = 10.0
CPP_MAX_OUTPUT = 4 << 20  # a macro bomb's expansion is cut here (then the file's own tokens are used)
CPP_MAX_MEMORY = 1 << 30
CPP_DEFINES = ("-D__CUDACC__=1", "-D__NVCC__=1", "-D__CUDACC_VER_MAJOR__=12")
KEPT_DIRECTIVES = frozenset("define undef if ifdef ifndef elif else endif elifdef elifndef".split())

# C token classes (applied to the tokenizer's output, after cpp).
C_DROP = frozenset(
    "const volatile register inline static constexpr __forceinline__ __inline__ __inline __restrict__ __restrict "
    "restrict __host__ __noinline__ extern".split()
)
C_INT = frozenset(
    "int long short unsigned signed size_t ssize_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t "
    "uint64_t ptrdiff_t intptr_t uintptr_t index_t".split()
)
C_FLOAT = frozenset("float double".split())
C_CASTS = frozenset("static_cast reinterpret_cast const_cast".split())
# Equivalent builtins and intrinsics: one token each (the fast, the rounded and the double spelling of a function).
C_SAME = {
    "__expf": "expf", "exp": "expf", "__exp2f": "exp2f", "exp2": "exp2f", "__logf": "logf", "log": "logf",
    "__tanhf": "tanhf", "tanh": "tanhf", "__fsqrt_rn": "sqrtf", "sqrt": "sqrtf", "__frsqrt_rn": "rsqrtf",
    "rsqrt": "rsqrtf", "fmax": "fmaxf", "fmin": "fminf", "fabs": "fabsf", "__powf": "powf", "pow": "powf",
}  # fmt: skip
C_RECIPROCAL = frozenset("__frcp_rn __frcp_rz __frcp_ru __frcp_rd __drcp_rn __drcp_rz __drcp_ru __drcp_rd".split())
# f(a, b) written as a OP b: the call's token goes and its top-level comma becomes the operator.
C_BINARY = {
    "__fdividef": "/", "__fdiv_rn": "/", "__fdiv_rz": "/", "__fmul_rn": "*", "__fmul_rz": "*", "__fadd_rn": "+",
    "__fadd_rz": "+", "__fsub_rn": "-", "__fsub_rz": "-", "__ddiv_rn": "/", "__dmul_rn": "*", "__dadd_rn": "+",
}  # fmt: skip


@dataclass
class Normal:
    """A file's normalised token stream: kinds and the original line of each, and its statements (token ranges)."""

    kinds: list[str]
    lines: list[int]
    stmts: list[tuple[int, int]] = field(default_factory=list)
    how: str = ""  # "ast", "cpp", or "tokens" (the fallback), for the report


# -- C ------------------------------------------------------------------------------------------------------------


def _blank_comments(src: str) -> str:
    """src with every comment's characters made spaces (its newlines kept), so a directive cannot hide behind one."""
    out, at = [], 0
    for s in textscan.literal_spans(src):
        if not s.comment or s.end <= at:
            continue
        out.append(src[at : s.start])
        seg = src[s.start : s.end]
        out.append("".join(c if c == "\n" else " " for c in seg))
        at = s.end
    out.append(src[at:])
    return "".join(out)


def _directive(line: str) -> str | None:
    """The directive name of a (comment-free, spliced) line, "" for a null directive, None when it is code."""
    s = line.lstrip(" \t\f\v")
    if s.startswith("#"):
        s = s[1:]
    elif s.startswith("%:"):  # the digraph of '#'
        s = s[2:]
    else:
        return None
    s = s.lstrip(" \t\f\v")
    n = 0
    while n < len(s) and (s[n].isalnum() or s[n] == "_"):
        n += 1
    return s[:n]


def safe_for_cpp(src: str) -> str:
    """src ready for the preprocessor: comments blanked, continuation lines spliced (blank lines added after so the
    line numbers stay), and every directive but #define/#undef/#if* blanked: no #include (nor __has_include) can
    name a file, no #line can move the numbers, no #error/#pragma stops it."""
    text = _blank_comments(src).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        ln, extra = lines[i], 0
        while ln.endswith("\\") and i + extra + 1 < len(lines):
            extra += 1
            ln = ln[:-1] + lines[i + extra]
        name = _directive(ln)
        if name is not None and (name not in KEPT_DIRECTIVES or "__has_include" in ln or "__FILE__" in ln):
            ln = ""
        out.append(ln)
        out.extend([""] * extra)
        i += extra + 1
    joined = "\n".join(out)
    return joined if joined.endswith("\n") else joined + "\n"


def cpp_available() -> bool:
    return shutil.which("cpp") is not None


def run_cpp(src: str, timeout: float = CPP_TIMEOUT_S) -> str | None:
    """The preprocessed text (with its linemarkers), or None when cpp is missing, fails, runs out of time or
    writes more than CPP_MAX_OUTPUT."""
    exe = shutil.which("cpp")
    if exe is None:
        return None
    text = safe_for_cpp(src)
    # The limits through the shell's ulimit, not a preexec_fn: that would force a fork of this (large) process per
    # file, where the shell lets subprocess use vfork/posix_spawn.
    # One limit per ulimit: dash sets none of them when given several at once.
    limits = (
        f"ulimit -v {CPP_MAX_MEMORY >> 10} 2>/dev/null; ulimit -f 0 2>/dev/null; "
        f'ulimit -t {int(timeout) + 1} 2>/dev/null; exec "$0" "$@"'
    )
    cmd = ["/bin/sh", "-c", limits, exe, "-nostdinc", "-undef", "-std=c++17", "-x", "c++", "-w", *CPP_DEFINES, "-"]
    with tempfile.TemporaryDirectory(prefix="grader-cpp-") as empty:
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=empty,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            )
        except OSError:
            return None
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            feeder = threading.Thread(target=_feed, args=(proc, text), daemon=True)
            feeder.start()
            data = proc.stdout.read(CPP_MAX_OUTPUT + 1)
            if len(data) > CPP_MAX_OUTPUT:
                proc.kill()
            proc.stdout.close()
            rc = proc.wait()
            feeder.join(timeout=1)
        finally:
            timer.cancel()
    if rc != 0 or len(data) > CPP_MAX_OUTPUT:
        return None
    return data.decode("utf-8", errors="replace")


def _feed(proc: subprocess.Popen[bytes], text: str) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode("utf-8"))
        proc.stdin.close()
    except OSError:
        pass


def cpp_lines(out: str) -> tuple[str, list[int]]:
    """cpp's output without its linemarkers, and the source line of each of its lines."""
    text: list[str] = []
    where: list[int] = []
    line = 1
    for ln in out.split("\n"):
        if ln.startswith("# "):
            parts = ln.split(" ", 2)
            if len(parts) >= 2 and parts[1].isdigit():
                line = int(parts[1])
                continue
        text.append(ln)
        where.append(line)
        line += 1
    return "\n".join(text), where


def c_classes(kinds: list[str], lines: list[int]) -> Normal:
    """The C token classes (see the module's doc) and the statements: token ranges ended by ';', '{' or '}'."""
    k2: list[str] = []
    l2: list[int] = []
    stmts: list[tuple[int, int]] = []
    start = 0
    prev = ";"
    cast = 0  # inside static_cast<...>: its angle brackets are a cast's parentheses
    depth = 0  # parentheses (dropped, but counted for the binary intrinsics' commas)
    binary: list[tuple[int, str]] = []  # (depth inside the call, its operator) of each open __fdividef(...)
    for t, ln in zip(kinds, lines, strict=True):
        if t in "()" and len(t) == 1:  # parentheses: `(int64_t)b`, `static_cast<int64_t>(b)`, `((b))` alike
            depth += 1 if t == "(" else -1
            while binary and depth < binary[-1][0]:
                binary.pop()
            continue
        if t in C_DROP:
            continue
        if t in C_CASTS:
            cast = 1
            continue
        if cast and t in "<>":
            cast = 0 if t == ">" else cast
            continue
        if t == ";" and prev in ";{}":
            continue
        if t in "{}" and len(t) == 1:
            if len(k2) > start:
                stmts.append((start, len(k2)))
            start = len(k2)
            prev = t
            continue
        t = _c_equivalent(_c_class(t, k2, start), k2, l2, (depth, ln), binary)
        if not t:
            prev = k2[-1] if k2 else prev
            continue
        if t in "+-*/" and len(k2) - start >= 3 and k2[-1] == "V" and k2[-2] == "=" and k2[-3] == "V":
            if len(k2) - start == 3 or k2[-4] in ",;":  # `i = i + s` is `i += s` (every name is "V" here)
                k2[-2], k2[-1] = t, "="
                prev = "="
                continue
        k2.append(t)
        l2.append(ln)
        prev = t
        if t == ";":
            stmts.append((start, len(k2)))
            start = len(k2)
    if len(k2) > start:
        stmts.append((start, len(k2)))
    return Normal(k2, l2, stmts)


def _c_equivalent(t: str, k2: list[str], l2: list[int], at: tuple[int, int], binary: list[tuple[int, str]]) -> str:
    """The token to append for t after the equivalent intrinsics and folded constants ("" when done here): at is
    (the parenthesis depth, the line); binary the open `__fdividef(`-like calls (their depth and operator)."""
    depth, ln = at
    if t in C_BINARY:
        binary.append((depth + 1, C_BINARY[t]))
        return ""
    if t == "," and binary and binary[-1][0] == depth:
        return binary.pop()[1]
    if t in C_RECIPROCAL:  # __frcp_rn(x) is 1.0f / x
        k2 += ["N", "/"]
        l2 += [ln, ln]
        return ""
    if t == "N" and len(k2) >= 2 and k2[-1] == "-" and k2[-2] in "+-" and (len(k2) < 3 or k2[-3] != k2[-2]):
        k2.pop()  # `+ (-1)` is `- 1`, `- (-1)` is `+ 1` (not after `++`/`--`)
        l2.pop()
        k2[-1] = "-" if k2[-1] == "+" else "+"
    return t


def _c_class(t: str, k2: list[str], start: int) -> str:
    """t's class: one integer type, one float type, one name per equivalent function; "" when it merges into the
    previous token (`long long`, `unsigned int`: one type)."""
    if t in C_INT:
        return "" if k2 and k2[-1] == "int" and len(k2) > start else "int"
    if t in C_FLOAT:
        return "float"
    return C_SAME.get(t, t)


# -- Python -------------------------------------------------------------------------------------------------------

_BODIES = ("body", "orelse", "finalbody", "handlers")


def _noop(s: ast.stmt) -> bool:
    """A statement that does nothing: pass, or a bare constant (a docstring, `...`, `0`)."""
    return isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))


def _dead(s: ast.stmt) -> bool:
    """`if False:` / `if 0:` / `while False:` with no else: never runs."""
    if isinstance(s, ast.If | ast.While) and not s.orelse and isinstance(s.test, ast.Constant):
        return not s.test.value
    return False


def py_statements(src: str) -> list[tuple[str, int]] | None:
    """(canonical text, line) of every statement of src, in order, a compound one as its header (its body
    follows); None when `ast` cannot take it."""
    try:
        tree = _Equivalents().visit(ast.parse(src))
        out: list[tuple[str, int]] = []
        todo: list[ast.stmt | tuple[str, int]] = list(reversed(tree.body))  # a stack, not recursion
        while todo:
            s = todo.pop()
            if isinstance(s, tuple):
                out.append(s)
                continue
            if _noop(s) or _dead(s):
                continue
            nested: list[ast.stmt | tuple[str, int]] = []
            head = s
            if any(getattr(s, b, None) for b in _BODIES):
                head = _header(s, nested)
            out.append((_unparse(head), s.lineno))
            todo.extend(reversed(nested))
        return out
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def _call_of(node: ast.AST, *names: str) -> ast.Call | None:
    """node when it is a call of a method or function named one of names (`t.size(...)`, `triton.cdiv(...)`)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names:
        return node if not node.keywords else None
    return None


class _Equivalents(ast.NodeTransformer):
    """Equivalent spellings made one: `t.size(d)` is `t.shape[d]`, `t.stride()[d]` is `t.stride(d)`, `.reshape` is
    `.view`, `tl.math.f` is `tl.f`, `triton.cdiv(a, b)` is `(a + b - 1) // b`, `tl.fdiv(a, b)` is `a / b`, `e / c` is
    `e * c` for a constant c, `e + -c` is `e - c` and `e - -c` is `e + c`."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "reshape":
            node.attr = "view"
        v = node.value
        if isinstance(v, ast.Attribute) and v.attr == "math" and isinstance(v.value, ast.Name) and v.value.id == "tl":
            node.value = v.value
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (c := _call_of(node, "size")) is not None and len(c.args) <= 1:
            assert isinstance(c.func, ast.Attribute)
            shape = ast.Attribute(c.func.value, "shape", ast.Load())
            return ast.Subscript(shape, c.args[0], ast.Load()) if c.args else shape
        if (c := _call_of(node, "cdiv")) is not None and len(c.args) == 2:
            a, b = c.args
            up = ast.BinOp(ast.BinOp(a, ast.Add(), b), ast.Sub(), ast.Constant(1))
            return ast.BinOp(up, ast.FloorDiv(), b)
        if (c := _call_of(node, "fdiv", "div_rn")) is not None and len(c.args) == 2:
            return ast.BinOp(c.args[0], ast.Div(), c.args[1])
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        c = _call_of(node.value, "stride")
        if c is not None and not c.args:
            c.args = [node.slice]
            return c
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        r = node.right
        if isinstance(node.op, ast.Div) and isinstance(r, ast.Constant) and isinstance(r.value, float):
            node.op = ast.Mult()
        elif isinstance(node.op, ast.Add | ast.Sub) and isinstance(r, ast.UnaryOp) and isinstance(r.op, ast.USub):
            node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
            node.right = r.operand
        return node


def _header(s: ast.stmt, nested: list[ast.stmt | tuple[str, int]]) -> ast.stmt:
    """A copy of compound s with empty bodies (a `pass` the tokens drop), its bodies appended to nested in order,
    each `else:`/`finally:` as a marker statement."""
    import copy

    head = copy.copy(s)
    for b in _BODIES:
        body = getattr(s, b, None)
        if not body:
            continue
        if b == "handlers":
            for h in body:
                hh = copy.copy(h)
                hh.body = [ast.Pass()]
                nested.append((_unparse_handler(hh), h.lineno))
                nested.extend(h.body)
            setattr(head, b, [])
            continue
        if b != "body":
            nested.append(("else:" if b == "orelse" else "finally:", body[0].lineno))
        nested.extend(body)
        setattr(head, b, [ast.Pass()] if b == "body" else [])
    if isinstance(head, ast.Try | ast.TryStar) and not head.handlers and not head.finalbody:
        head.finalbody = [ast.Pass()]
    return head


def _unparse(s: ast.AST) -> str:
    return ast.unparse(s)


def _unparse_handler(h: ast.excepthandler) -> str:
    return ast.unparse(h)
