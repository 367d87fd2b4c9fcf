"""Static warnings on a submission's source: things that are legal but are how graders get fooled.

They only warn, each with the reason; the dynamic checks (kernel profile, verified timed outputs, host-clock
cross-check, process isolation) decide the grade. A reader of the report sees *why* a line was flagged.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Warning_:
    line: int
    what: str
    why: str

    def text(self) -> str:
        return f"line {self.line}: {self.what}: {self.why}"


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
# Any torch.nn.functional op (F.glu, F.gelu, F.silu, ...): whatever the problem, the work is the student kernel's.
_FUNCTIONAL = re.compile(r"^(F|torch\.nn\.functional)\.\w+$")
_PATCH_TARGETS = re.compile(r"^(torch|time|triton|sys|builtins|os)\b")
_GRADER_NAME = re.compile(r"^grader(\.\w+)*$|^(Worker|Timer|Sandbox)$")  # the grader's modules and classes

_CU_PATTERNS = [
    (re.compile(r"\bcudaStreamCreate\w*|\bcudaStreamPerThread\b|cudaStreamLegacy"), "stream"),
    (re.compile(r"\bstd::thread\b|\bpthread_create\b"), "thread"),
    (re.compile(r"\bgetenv\s*\("), "env"),
    (re.compile(r"\bfopen\s*\(|\bofstream\b|\bopen\s*\("), "file write"),
    (re.compile(r"\bsystem\s*\(|\bfork\s*\(|\bexec[lv]p?\s*\(|\bpopen\s*\("), "subprocess"),
    (re.compile(r"\bdlopen\s*\(|\bdlsym\s*\("), "ctypes"),
    (re.compile(r"^\s*static\s+[^;()]*\*\s*\w+\s*="), "caching"),
]


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def scan_python(src: str) -> list[Warning_]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []  # the worker reports the syntax error with its line
    out: list[Warning_] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                key = _PY_MODULES.get(m.split(".")[0])
                if key:
                    out.append(Warning_(line, f"imports {m}", WHY[key]))
        elif isinstance(node, (ast.Attribute, ast.Name)):
            name = _dotted(node)
            for pat, key in _PY_CALLS.items():
                if name == pat or name.startswith(pat + "."):
                    out.append(Warning_(line, f"uses {name}", WHY[key]))
            if _FUNCTIONAL.match(name):
                out.append(Warning_(line, f"uses {name}", WHY["torch math"]))
        elif isinstance(node, ast.Call) and _dotted(node.func) == "open":
            mode = (
                node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            )
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
                out.append(Warning_(line, "opens a file for writing", WHY["file write"]))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and _PATCH_TARGETS.match(_dotted(t)):
                    out.append(Warning_(line, f"assigns to {_dotted(t)}", WHY["monkeypatch"]))
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("setattr",) and node.args:
            if _PATCH_TARGETS.match(_dotted(node.args[0])):
                out.append(Warning_(line, f"setattr on {_dotted(node.args[0])}", WHY["monkeypatch"]))
        if (
            isinstance(node, ast.Call)
            and _dotted(node.func) in ("getattr", "setattr", "delattr", "hasattr")
            and len(node.args) > 1
        ):
            if not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                out.append(Warning_(line, f"{_dotted(node.func)} with a computed name", WHY["computed name"]))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _GRADER_NAME.match(node.value):
            out.append(Warning_(line, f"names {node.value!r}", WHY["grader internals"]))
    uniq = {(w.line, w.what): w for w in out}
    # `sys.modules.get(...)` is one use of sys.modules, not two: drop "uses a.b.c" when "uses a.b" is on the line.
    uses = {(w.line, w.what[5:]) for w in uniq.values() if w.what.startswith("uses ")}
    keep = [
        w
        for w in uniq.values()
        if not (
            w.what.startswith("uses ")
            and any((w.line, w.what[5:].rsplit(".", k)[0]) in uses for k in range(1, w.what.count(".") + 1))
        )
    ]
    return sorted(keep, key=lambda w: (w.line, w.what))


def scan_cuda(src: str) -> list[Warning_]:
    out: list[Warning_] = []
    for i, text in enumerate(src.splitlines(), 1):
        code = text.split("//", 1)[0]
        for pat, key in _CU_PATTERNS:
            m = pat.search(code)
            if m:
                out.append(Warning_(i, f"uses {m.group(0).strip()}", WHY[key]))
    return out


def scan(path: Path, kind: str) -> list[Warning_]:
    try:
        src = path.read_text(errors="replace")
    except OSError:
        return []
    return scan_python(src) if kind == "triton" else scan_cuda(src)
