"""The child half of the GPU compile check (grader/correctness/gpucompile.py has the parent's half and the why).

Runs beside student code: `describe_launch` in the interpreter worker (what was launched, as data) and
`compile_launches` in the compile worker (Triton's compiler for an sm_90 target, on the CPU).
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
# The course GPUs (H100/H200), the one place it is set: grader/cuda/build.py builds CUDA for it too (no GPU needed).
ARCH = 90
_OPTIONS = ("num_warps", "num_stages", "num_ctas")
_TL_TYPES = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "i1",
}


# ------------------------------------------------------------------------------------------------------------
# child side, in the interpreter worker: what was launched


def describe_launch(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
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
    options = {
        k: int(kwargs[k]) for k in _OPTIONS if isinstance(kwargs.get(k), int) and not isinstance(kwargs.get(k), bool)
    }
    return {"kernel": fn.fn.__name__, "args": described, "options": options}


def _is_constexpr(annotation: Any) -> bool:
    # `BLOCK: tl.constexpr`, or the string "tl.constexpr" under `from __future__ import annotations`
    return "constexpr" in (annotation if isinstance(annotation, str) else getattr(annotation, "__name__", ""))


def _int_type(v: int) -> str:
    return "i32" if -(2**31) <= v < 2**31 else ("i64" if -(2**63) <= v < 2**63 else "u64")


def describe_grid(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """One launch's grid, as data, for `grader profile`: the kernel's name, the grid (a callable grid is called
    with the launch's arguments by name, as Triton does), the number of programs, the constexpr values and the
    launch options. A grid that cannot be worked out is None (the launch itself still runs)."""
    name = getattr(getattr(fn, "fn", None), "__name__", "?")
    meta: dict[str, Any] = dict(kwargs)
    constexprs: dict[str, Any] = {}
    try:
        sig = inspect.signature(fn.fn)
        bound = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
        bound.apply_defaults()
        meta.update(bound.arguments)
        constexprs = {
            k: v
            for k, v in bound.arguments.items()
            if _is_constexpr(sig.parameters[k].annotation) and isinstance(v, (int, float, bool, str))
        }
    except (TypeError, ValueError, AttributeError):
        pass
    grid: Any = kwargs.get("grid")
    try:
        if callable(grid):
            grid = grid(meta)
        dims = [int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,))][:3]
    except Exception:  # the student's grid function: whatever it raises, the launch reports it, not this
        dims = None
    programs = None
    if dims is not None:
        programs = 1
        for d in dims:
            programs *= d
    options = {k: kwargs[k] for k in _OPTIONS if isinstance(kwargs.get(k), int) and not isinstance(kwargs[k], bool)}
    return {"kernel": name, "grid": dims, "programs": programs, "constexprs": constexprs, "options": options}


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


def _signature(fn: Any, args: dict[str, list[Any]]) -> tuple[dict[str, str], dict[str, Any]]:
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
            triton.compile(
                ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", arch, 32), options=options
            )
        except CompilationError as e:
            inner = _innermost_compile_error(e)
            where = "" if inner is e else f" (called from {name})"
            line = _file_line(inner, funcs)
            out["errors"].append({**what, "message": f"{inner}{where}".strip(), "line": line})
            continue
        except Exception as e:  # not the kernel's fault as far as we can tell: the compiler or this check
            out["skipped"].append(
                {
                    "kernel": name,
                    "why": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
                }
            )
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
    if first is None:  # older Triton (3.7.1, torch 2.13's pin) has only the first decorator's line
        start, raw = getattr(f, "starting_line_number", None), getattr(f, "raw_src", None) or []
        idx = next((i for i, ln in enumerate(raw) if isinstance(ln, str) and ln.strip().startswith("def ")), None)
        first = start + idx if isinstance(start, int) and idx is not None else None
    return first + lineno - 1 if isinstance(first, int) and isinstance(lineno, int) else None


def _show(sig: dict[str, str], consts: dict[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={consts[k]!r}" if v == "constexpr" else f"{k}: {v}" for k, v in sig.items()) + ")"


def _triton_version() -> str:
    try:
        import triton

        return f"triton {triton.__version__}"
    except ImportError:
        return "no triton"
