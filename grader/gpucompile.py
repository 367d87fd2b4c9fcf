"""GPU compile check, for CPU grades: do the Triton kernels that ran in the interpreter also compile for a GPU?

Triton's interpreter (TRITON_INTERPRET=1, how kernels run without a GPU) executes a kernel as Python and numpy.
It accepts code that the compiler rejects. One example: a plain Python global read inside @triton.jit
(`LOG2E = 1.44`) is refused by the compiler ("Cannot access global variable"), and the interpreter just reads
it (tests/correct/autotune_exp2_helper, docs/PERF_NOTES.md run 33). Such a kernel passes every CPU case, then
fails every case on the autograder's GPU.

So on a CPU grade:
1. the correctness worker records how each of the file's @triton.jit kernels was launched (`describe_launch`):
   argument kinds and dtypes, constexpr values, num_warps. These are data only, no tensor contents;
2. a separate child, *without* the interpreter, imports the file again and compiles each distinct launch with
   Triton's own compiler for an sm_90 target (`compile_launches`). The compiler runs on the CPU: it needs no
   GPU, only the Triton package (ptxas ships with it);
3. the parent (`run`) turns the answers into one 0-point row, "<part> / GPU compile check", and a note.

The row carries no points: the GPU grade decides. It is there so that a student without a GPU hears about a
compile error before the deadline, not from the autograder. Anything the check itself cannot do (an older
Triton without this compiler API, an argument kind it cannot describe) gives SKIPPED with the reason, never
FAILED: only Triton's CompilationError is blamed on the submission.
"""

from __future__ import annotations

import inspect
import os
import re
import tempfile
import time
from typing import Any

MAX_LAUNCHES = 64  # distinct launch records kept per worker (one per kernel, dtype and constexpr values)
MAX_COMPILES = 12  # distinct signatures compiled per part (~0.5-2 s each on a CPU)
ARCH = 90  # the course GPUs (H100/H200); grader/build.py builds CUDA for sm_90 on a machine without a GPU too
_OPTIONS = ("num_warps", "num_stages", "num_ctas")
_TL_TYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
}


# ------------------------------------------------------------------------------------------------------------
# child side, in the interpreter worker: what was launched


def describe_launch(fn: Any, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """One launch of a @triton.jit function (`fn.run(*args, **kwargs)`) as plain data, or None if it cannot be
    described. fn is the InterpretedFunction; fn.fn is the Python function it wraps."""
    try:
        sig = inspect.signature(fn.fn)
        names = set(sig.parameters)
        bound = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in names})
        bound.apply_defaults()
    except (TypeError, ValueError, AttributeError):
        return None
    described = []
    for name, value in bound.arguments.items():
        kind, v = _kind(value)
        if kind == "int" and not _is_constexpr(sig.parameters[name].annotation):
            v = _int_type(v)  # only the type reaches the compiler: launches that differ in sizes alone are one record
        described.append([name, kind, v])
    options = {k: int(kwargs[k]) for k in _OPTIONS if isinstance(kwargs.get(k), int) and not isinstance(kwargs.get(k), bool)}
    return {"kernel": fn.fn.__name__, "args": described, "options": options}


def _is_constexpr(annotation: Any) -> bool:
    # `BLOCK: tl.constexpr`, or the string "tl.constexpr" under `from __future__ import annotations`
    return "constexpr" in (annotation if isinstance(annotation, str) else getattr(annotation, "__name__", ""))


def _int_type(v: int) -> str:
    return "i32" if -(2**31) <= v < 2**31 else ("i64" if -(2**63) <= v < 2**63 else "u64")


def _kind(value: Any) -> tuple[str, Any]:
    if value is None:
        return "none", None
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, int):
        return "int", value
    if isinstance(value, float):
        return "float", value
    dtype = getattr(value, "dtype", None)
    if hasattr(value, "data_ptr") and dtype is not None:
        return "tensor", str(dtype).replace("torch.", "")
    if isinstance(value, str):
        return "str", value
    return "other", type(value).__name__


# ------------------------------------------------------------------------------------------------------------
# child side, in the compile worker (no interpreter): compile what was launched


def _signature(fn: Any, args: dict[str, list]) -> tuple[dict[str, str], dict[str, Any]]:
    """Triton's (signature, constexprs) for a JITFunction from a described launch. Raises ValueError if an
    argument cannot be typed (the check is then skipped for that launch, not failed)."""
    sig: dict[str, str] = {}
    consts: dict[str, Any] = {}
    for p in fn.params:
        if p.name not in args:
            raise ValueError(f"argument {p.name!r} was not recorded")
        kind, value = args[p.name]
        if p.is_constexpr or kind == "none":
            sig[p.name] = "constexpr"
            consts[p.name] = value
        elif kind == "tensor" and value in _TL_TYPES:
            sig[p.name] = "*" + _TL_TYPES[value]
        elif kind == "bool":
            sig[p.name] = "i1"
        elif kind == "int":
            sig[p.name] = value if isinstance(value, str) else _int_type(value)
        elif kind == "float":
            sig[p.name] = "fp32"
        else:
            raise ValueError(f"argument {p.name!r} is a {kind} ({value}); the check cannot type it")
    return sig, consts


def _innermost_compile_error(e: BaseException) -> BaseException:
    """Triton wraps an error inside a called @triton.jit helper in a CompilationError at the call site; the
    reason is in the innermost one (its message ends with it)."""
    from triton.compiler.errors import CompilationError

    inner = e
    for _ in range(10):
        nxt = inner.__cause__
        if not isinstance(nxt, CompilationError):
            break
        inner = nxt
    return inner


def compile_launches(jit_functions: list[Any], launches: list[dict[str, Any]], arch: int = ARCH) -> dict[str, Any]:
    """Compile each distinct launch for a CUDA target of compute capability `arch`. Returns
    {"compiled": [...], "errors": [...], "skipped": [...], "seconds": s}, each entry a short dict."""
    t0 = time.monotonic()
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.errors import CompilationError
    except ImportError as e:
        return {"unavailable": f"this Triton ({_triton_version()}) has no compiler API the check knows: {e}"}
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="grader-triton-cache-"))
    funcs = {f.fn.__name__: f for f in jit_functions}
    out: dict[str, Any] = {"compiled": [], "errors": [], "skipped": []}
    seen: set[str] = set()
    for launch in launches:
        name = launch["kernel"]
        fn = funcs.get(name)
        if fn is None:
            out["skipped"].append({"kernel": name, "why": "not found when the file was imported again"})
            continue
        try:
            sig, consts = _signature(fn, {a[0]: a[1:] for a in launch["args"]})
        except ValueError as e:
            out["skipped"].append({"kernel": name, "why": str(e)})
            continue
        options = dict(launch.get("options", {}))
        key = repr((name, sorted(sig.items()), sorted(consts.items(), key=repr), sorted(options.items())))
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > MAX_COMPILES:
            break
        what = {"kernel": name, "signature": _show(sig, consts), "options": options}
        try:
            triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", arch, 32), options=options)
        except CompilationError as e:
            inner = _innermost_compile_error(e)
            where = "" if inner is e else f" (called from {name})"
            line = _file_line(inner, funcs)
            out["errors"].append({**what, "message": f"{inner}{where}".strip(), "line": line})
            continue
        except Exception as e:  # not the kernel's fault as far as we can tell: the compiler or this check
            out["skipped"].append({"kernel": name, "why": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"})
            continue
        out["compiled"].append(what)
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


def _file_line(err: Any, funcs: dict[str, Any]) -> int | None:
    """The file line of a CompilationError: Triton counts lines from the failing function's `def` line."""
    src, lineno = getattr(err, "src", None), getattr(getattr(err, "node", None), "lineno", None)
    m = re.search(r"^\s*def\s+(\w+)\s*\(", src or "", re.MULTILINE)
    f = funcs.get(m.group(1)) if m else None
    first = getattr(f, "def_file_line_number", None)
    return first + lineno - 1 if isinstance(first, int) and isinstance(lineno, int) else None


def _show(sig: dict[str, str], consts: dict[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={consts[k]!r}" if v == "constexpr" else f"{k}: {v}" for k, v in sig.items()) + ")"


def _triton_version() -> str:
    try:
        import triton

        return f"triton {triton.__version__}"
    except ImportError:
        return "no triton"


# ------------------------------------------------------------------------------------------------------------
# parent side: one row per Triton part on a CPU grade


def row_from_reply(part: str, display: str, reply: Any) -> tuple[str, str, dict[str, Any]]:
    """(state, output, extra) of the '<part> / GPU compile check' row, from the compile worker's reply."""
    from .results import FAILED, PASSED, SKIPPED

    if not isinstance(reply, dict):
        return SKIPPED, "could not check: the compile worker sent a malformed reply", {}
    if "unavailable" in reply:
        return SKIPPED, f"could not check: {reply['unavailable']}", {}
    errors, compiled, skipped = reply.get("errors", []), reply.get("compiled", []), reply.get("skipped", [])
    extra = {"compiled": len(compiled), "errors": len(errors), "skipped": len(skipped), "seconds": reply.get("seconds")}
    target = f"sm_{ARCH}"
    if errors:
        e = errors[0]
        at = f", line {e['line']}" if isinstance(e.get("line"), int) else ""
        head = (f"{display}{at}: kernel {e['kernel']} runs in Triton's interpreter but does not compile for a GPU "
                f"({target}); on a GPU every {part} case would fail. Triton's compiler says:")
        more = f"\n({len(errors) - 1} more launch signature(s) failed too)" if len(errors) > 1 else ""
        return FAILED, f"{head}\n{e['message']}\nwhen compiled as {e['kernel']}{e['signature']}, {e['options']}{more}", extra
    if not compiled:
        why = "; ".join(f"{s['kernel']}: {s['why']}" for s in skipped[:3]) or "no launch of this file's @triton.jit kernels was recorded"
        return SKIPPED, f"could not check: {why}", extra
    lines = [f"compiled for {target} on this CPU with Triton's own compiler ({reply.get('seconds')} s):"]
    lines += [f"  {c['kernel']}{c['signature']} {c['options']}" for c in compiled]
    lines += [f"  not checked: {s['kernel']}: {s['why']}" for s in skipped[:3]]
    return PASSED, "\n".join(lines), extra


def check_part(load_payload: dict[str, Any], part: str, display: str, launches: Any, timeout_s: float) -> Any:
    """Run the compile worker on the recorded launches; return the '<part> / GPU compile check' TestResult."""
    from .results import SKIPPED, TestResult
    from .sandbox import Sandbox, WorkerFailure

    name = f"{part} / GPU compile check"
    if not (isinstance(launches, list) and all(isinstance(x, dict) and isinstance(x.get("kernel"), str) and isinstance(x.get("args"), list) for x in launches)):
        return TestResult(name, part, "checks", 0.0, 0.0, SKIPPED, "could not check: the worker sent malformed launch records")
    if not launches:
        return TestResult(name, part, "checks", 0.0, 0.0, SKIPPED, "could not check: no launch of this file's @triton.jit kernels was recorded")
    try:
        with Sandbox("cpu", start_timeout_s=timeout_s, compile_only=True) as box:
            reply = box.request("gpu_compile", {**load_payload, "launches": launches}, timeout_s=timeout_s, what="the GPU compile check")
    except WorkerFailure as e:
        return TestResult(name, part, "checks", 0.0, 0.0, SKIPPED, f"could not check: {e.line}" + (f"\n{e.detail}" if e.detail else ""))
    state, output, extra = row_from_reply(part, display, reply)
    return TestResult(name, part, "checks", 0.0, 0.0, state, output, extra)
