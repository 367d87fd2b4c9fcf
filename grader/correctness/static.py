"""Static warnings on a submission's source: things that are legal but are how graders get fooled.

They only warn, each with the reason; the dynamic checks (kernel profile, verified timed outputs, host-clock
cross-check, process isolation) decide the grade. A reader of the report sees *why* a line was flagged.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from grader import textscan


@dataclass(frozen=True)
class Warning_:
    line: int
    what: str
    why: str

    def text(self) -> str:
        return f"line {self.line}: {self.what}: {self.why}" if self.line else f"{self.what}: {self.why}"


WHY = {
    "stream": "work on another stream escapes per-stream timing; the grader cross-checks with a device-wide sync",
    "thread": "threads can do work outside the timed call or race with the grader",
    "ctypes": "ctypes can call into arbitrary native code, outside what the kernel check sees",
    "gc": "gc can find the grader's objects (expected outputs, timers) in memory",
    "inspect": "inspect/frame access can read the grader's variables",
    "env": "the environment is not an input to the kernel; the grader's secrets are never in it",
    "file write": "a submission has no reason to write files (results are written by the grader only)",
    "subprocess": "starting processes is not part of a kernel; the grader kills the whole process group",
    "torch math": "the work must be done by your own kernel; the kernel check forfeits parts where PyTorch computes",
    "monkeypatch": "replacing torch or time functions is how timers are fooled; the grader binds its own beforehand",
    "caching": "caching outputs across calls is caught: every timed call gets fresh input contents",
    "grader internals": "the grader's own modules share this process; a kernel has no reason to look them up, and "
    "rewriting them is caught by checks that run outside it (the parent's clock, its own truth)",
    "computed name": "an attribute looked up by a computed name hides from this scan (and from a reader) what is "
    "called",
}

_PY_CALLS = {
    "torch.cuda.Stream": "stream",
    "torch.cuda.stream": "stream",
    "torch.cuda.ExternalStream": "stream",
    "threading.Thread": "thread",
    "concurrent.futures": "thread",
    "multiprocessing": "subprocess",
    "os.environ": "env",
    "os.getenv": "env",
    "os.putenv": "env",
    "gc.get_objects": "gc",
    "gc.get_referrers": "gc",
    "inspect.currentframe": "inspect",
    "inspect.stack": "inspect",
    "sys._getframe": "inspect",
    "subprocess": "subprocess",
    "os.system": "subprocess",
    "os.fork": "subprocess",
    "os.popen": "subprocess",
    "os.setsid": "subprocess",
    "torch.sigmoid": "torch math",
    "torch.tanh": "torch math",
    "torch.erf": "torch math",
    "torch.exp": "torch math",
    "torch.compile": "torch math",
    "functools.lru_cache": "caching",
    "functools.cache": "caching",
    "sys.modules": "grader internals",
    "importlib": "grader internals",
    "__import__": "grader internals",
}
_PY_MODULES = {
    "ctypes": "ctypes",
    "gc": "gc",
    "inspect": "inspect",
    "threading": "thread",
    "subprocess": "subprocess",
    "multiprocessing": "subprocess",
    "importlib": "grader internals",
    "grader": "grader internals",
}
_CALL_ROOTS = {p.split(".")[0] for p in _PY_CALLS} | {"F", "torch"}
_PATCH_ROOTS = ("torch", "time", "triton", "sys", "builtins", "os")
_GRADER_CLASSES = ("Worker", "Timer", "Sandbox")

# Each pattern below is searched in one line of code (comments and literals blanked first). None can backtrack
# super-linearly: a fixed word, then at most one run of one character class (\w*, \s*) followed by a character
# outside that class, so an attempt at one start position ends at the first character that cannot continue it.
_CU_PATTERNS = [
    (re.compile(r"\bcudaStreamCreate\w*|\bcudaStreamPerThread\b|cudaStreamLegacy"), "stream"),
    (re.compile(r"\bstd::thread\b|\bpthread_create\b"), "thread"),
    (re.compile(r"\bgetenv\s*\("), "env"),
    (re.compile(r"\bfopen\s*\(|\bofstream\b|\bopen\s*\("), "file write"),
    (re.compile(r"\bsystem\s*\(|\bfork\s*\(|\bexec[lv]p?\s*\(|\bpopen\s*\("), "subprocess"),
    (re.compile(r"\bdlopen\s*\(|\bdlsym\s*\("), "ctypes"),
]
# `static T *name =` (a pointer kept across calls): `*`, spaces, a name, spaces, `=`. The runs are of disjoint
# classes (\s, \w) and each attempt starts at a `*`, so the runs tried from different starts do not overlap: linear.
_STATIC_POINTER = re.compile(r"\*\s*\w+\s*=")
_WORD = re.compile(r"\w+")

MAX_SOURCE_BYTES = 4 * 1024 * 1024  # a kernel source is a few kB; a bigger one is scanned up to this many bytes
# Python's ast of a crafted 4 MiB file (`x=[a,a,...]`) took 21 s and 2.7 GB in the grader's own process; at 256 KiB
# it is ~0.8 s and ~190 MB on 2 cores. A larger Triton file is not scanned, and says so.
MAX_PYTHON_BYTES = 256 * 1024
# Warnings kept in the row: 12,000 one-line warnings made a results.json the TA report refuses (the schema's caps).
MAX_WARNINGS = 50
TOO_DEEP = "could not scan: too deeply nested"


def _chain(node: ast.AST) -> list[str]:
    """The dotted name an attribute chain spells (`a.b.c` -> ["a", "b", "c"]); a chain that starts at a call or a
    subscript gives the names after it."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _dotted(node: ast.AST) -> str:
    return ".".join(_chain(node))


def _patch_target(name: str) -> bool:
    return name.split(".", 1)[0] in _PATCH_ROOTS


def _grader_name(value: str) -> bool:
    """'grader', 'grader.x.y' or one of the grader's classes: a string a submission has no use for."""
    if value in _GRADER_CLASSES:
        return True
    parts = value.split(".")
    return parts[0] == "grader" and all(_WORD.fullmatch(p) for p in parts[1:])


def _uses(parts: list[str]) -> list[str]:
    """What a whole attribute chain uses: every pattern of _PY_CALLS it starts with (`sys.modules.get` uses
    sys.modules), and the torch.nn.functional op it names (F.glu, F.gelu, ...: whatever the problem, the work is the
    student kernel's)."""
    if not parts or parts[0] not in _CALL_ROOTS:
        return []
    name = ".".join(parts)
    found = [pat for pat in _PY_CALLS if name == pat or name.startswith(pat + ".")]
    if len(parts) >= 2 and parts[0] == "F":
        found.append("F." + parts[1])
    if len(parts) >= 4 and parts[:3] == ["torch", "nn", "functional"]:
        found.append(".".join(parts[:4]))
    return found


def scan_python(src: str) -> list[Warning_]:
    """The warnings for a Python source. ast.parse recurses over the source's nesting: a too deeply nested file
    (RecursionError, or MemoryError from the parser's own stack) is one clear warning, never an exception; the
    walk over the tree is iterative, and each attribute chain is read once, from its outermost node (reading it
    again from every inner node would be quadratic in the chain's length)."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return []  # the worker reports the syntax error with its line
    except (RecursionError, MemoryError) as e:
        return [Warning_(0, TOO_DEEP, f"Python's parser gave up ({type(e).__name__}); the rest of the grade goes on")]
    out: list[Warning_] = []
    inner: set[int] = set()  # the inner nodes of attribute chains: read as part of their outermost node
    for node in ast.walk(tree):
        out += _node_warnings(node, getattr(node, "lineno", 0), inner)
    uniq = {(w.line, w.what): w for w in out}
    return sorted(uniq.values(), key=lambda w: (w.line, w.what))


def _node_warnings(node: ast.AST, line: int, inner: set[int]) -> list[Warning_]:
    """The warnings one node of the tree gives (an attribute chain only from its outermost node)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        return [Warning_(line, f"imports {m}", WHY[key]) for m in mods if (key := _PY_MODULES.get(m.split(".")[0]))]
    if isinstance(node, (ast.Attribute, ast.Name)):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
        if id(node) in inner:
            return []
        return [Warning_(line, f"uses {u}", WHY[_PY_CALLS.get(u, "torch math")]) for u in _uses(_chain(node))]
    if isinstance(node, ast.Call):
        return _call_warnings(node, line)
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [
            Warning_(line, f"assigns to {_dotted(t)}", WHY["monkeypatch"])
            for t in targets
            if isinstance(t, ast.Attribute) and _patch_target(_dotted(t))
        ]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _grader_name(node.value):
        return [Warning_(line, f"names {node.value!r}", WHY["grader internals"])]
    return []


def _call_warnings(node: ast.Call, line: int) -> list[Warning_]:
    """A call that writes a file, patches an object or reaches an attribute by a computed name."""
    out: list[Warning_] = []
    func = _dotted(node.func)
    if func == "open":
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
            out.append(Warning_(line, "opens a file for writing", WHY["file write"]))
    elif func == "setattr" and node.args and _patch_target(_dotted(node.args[0])):
        out.append(Warning_(line, f"setattr on {_dotted(node.args[0])}", WHY["monkeypatch"]))
    if func in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) > 1:
        if not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            out.append(Warning_(line, f"{func} with a computed name", WHY["computed name"]))
    return out


def scan_cuda(src: str) -> list[Warning_]:
    """The warnings for a CUDA source, line by line, over its code only: comments and string literals are blanked
    by a linear scanner first (grader/textscan.py), which keeps the line numbers."""
    out: list[Warning_] = []
    for i, code in enumerate(textscan.strip_comments(src).splitlines(), 1):
        for pat, key in _CU_PATTERNS:
            m = pat.search(code)
            if m:
                out.append(Warning_(i, f"uses {m.group(0).strip()}", WHY[key]))
        head = code.lstrip()
        if head.startswith("static") and head[6:7].isspace():
            decl = head[: min((k for k in (head.find(c) for c in ";()") if k >= 0), default=len(head))]
            m = _STATIC_POINTER.search(decl)
            if m:
                out.append(Warning_(i, f"uses {decl[: m.end()].strip()}", WHY["caching"]))
    return out


def scan(path: Path, kind: str) -> list[Warning_]:
    """The static warnings for one source file, read with a cap (textscan.read_capped) and scanned in linear time.
    Never raises: a file that cannot be read or scanned gets one warning saying why."""
    cap = MAX_PYTHON_BYTES if kind == "triton" else MAX_SOURCE_BYTES
    try:
        src, cut = textscan.read_capped(path, cap)
    except OSError as e:
        return [Warning_(0, "could not scan", f"could not read {path.name}: {e.strerror or e}")]
    if cut and kind == "triton":
        return [Warning_(0, "could not scan", f"{path.name} is larger than {cap} bytes")]
    found = scan_python(src) if kind == "triton" else scan_cuda(src)
    if len(found) > MAX_WARNINGS:
        more = len(found) - MAX_WARNINGS
        found = [
            *found[:MAX_WARNINGS],
            Warning_(0, f"{more} more warnings", f"not listed (the first {MAX_WARNINGS} are above)"),
        ]
    if cut:
        found.append(Warning_(0, "could not scan", f"only the first {cap} bytes of {path.name} were"))
    return found
