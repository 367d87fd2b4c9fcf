"""Bounds checks for Triton's interpreter, the CPU path: every active load and store lane must stay inside a
tensor that was passed to the kernel.

Why: docs/architecture.md, "Modules: the why", grader/child/interpcheck.py.
"""

from __future__ import annotations

import ast
import os
import sys
from functools import lru_cache
from typing import Any

import numpy as np

_state: dict[str, Any] = {"ranges": [], "kernel": "?"}


class OutOfBounds(IndexError):
    """A kernel lane addressed memory outside every tensor it was given (the interpreter's segfault, early)."""


def _storage_range(arg: Any) -> tuple[int, int] | None:
    t = getattr(arg, "base", arg) if not hasattr(arg, "untyped_storage") else arg  # triton's TensorWrapper
    if not hasattr(t, "untyped_storage"):
        return None
    st = t.untyped_storage()
    return st.data_ptr(), st.data_ptr() + st.nbytes()


def _ranges_of(names: list[str], args: list[Any], kwargs: dict[str, Any]) -> list[tuple[str, int, int]]:
    out = []

    def add(name: str, a: Any) -> None:
        if isinstance(a, (tuple, list)):  # Triton accepts tuples of tensors as one argument
            for i, x in enumerate(a):
                add(f"{name}[{i}]", x)
            return
        r = _storage_range(a)
        if r is not None:
            out.append((name, *r))

    for name, a in [*zip(names, args, strict=False), *kwargs.items()]:
        add(name, a)
    return out


def _facts_of(names: list[str], args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """{argument: int value, or (row stride in elements or None, element size in bytes) for a tensor}: what a
    wrong-address diagnosis compares an offset's integer arguments with."""
    out: dict[str, Any] = {}
    for name, a in [*zip(names, args, strict=False), *kwargs.items()]:
        if isinstance(a, bool):
            continue
        if isinstance(a, int):
            out[name] = a
            continue
        t = a if hasattr(a, "untyped_storage") else getattr(a, "base", None)
        try:
            if t is not None and hasattr(t, "untyped_storage"):
                out[name] = (int(t.stride(-2)) if t.dim() >= 2 else None, int(t.element_size()))
        except (TypeError, ValueError, RuntimeError, AttributeError):
            continue
    return out


SOURCE_CAP = 1 << 20  # bytes of a kernel's file read for the diagnosis; a larger file gets the generic words
NODE_CAP = 5000  # expression nodes followed from one pointer expression back through the kernel's assignments


@lru_cache(maxsize=32)
def _kernel_tree(path: str, name: str) -> ast.FunctionDef | None:
    """The kernel's own `def`, parsed from its file (read at most SOURCE_CAP bytes); None when it cannot be."""
    try:
        with open(path, "rb") as f:
            raw = f.read(SOURCE_CAP + 1)
        if len(raw) > SOURCE_CAP:
            return None
        tree = ast.parse(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    return defs[0] if len(defs) == 1 else None


@lru_cache(maxsize=128)
def _pointer_args(path: str, name: str, line: int) -> tuple[str, ...]:
    """The kernel's parameters that the pointer of the load/store at `line` is computed from, following plain
    assignments back (a_off = row * row_stride + col; row = offs // h): () when the source does not say."""
    fn = _kernel_tree(path, name)
    if fn is None:
        return ()
    # A tl.constexpr (BLOCK) is a tile size, not an offset's stride: left out, so its value is never taken for one.
    params = {
        a.arg
        for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)
        if not (
            a.annotation is not None
            and "constexpr" in {getattr(n, "attr", getattr(n, "id", "")) for n in ast.walk(a.annotation)}
        )
    }
    assigned: dict[str, list[ast.expr]] = {}
    calls: list[ast.Call] = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and isinstance(n.target, ast.Name) and n.value:
            assigned.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno):
            f = n.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in ("load", "store"):
                calls.append(n)
    if not calls:
        return ()
    call = min(calls, key=lambda c: (c.end_lineno or c.lineno) - c.lineno)  # the innermost at that line
    ptr = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)
    if ptr is None:
        return ()
    found: dict[str, None] = {}
    seen: set[str] = set()
    todo: list[ast.expr] = [ptr]
    budget = NODE_CAP
    while todo and budget > 0:
        for n in ast.walk(todo.pop()):
            budget -= 1
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                if n.id in params:
                    found[n.id] = None
                todo.extend(assigned.get(n.id, []))
    return tuple(found)


def _wrong_address(site_args: tuple[str, ...], facts: dict[str, Any], guess: str | None) -> tuple[str, str]:
    """(the pointer's name, what is wrong with its offset) for an access whose faulting lanes are inside its mask."""
    tensors = [a for a in site_args if isinstance(facts.get(a), tuple)]
    ints = [(a, facts[a]) for a in site_args if isinstance(facts.get(a), int) and not isinstance(facts.get(a), bool)]
    ptr = tensors[0] if tensors else guess
    if ptr is None or not isinstance(facts.get(ptr), tuple):
        return ptr or "?", "check the offset: a row stride in elements (not bytes), and the right tensor's"
    stride, size = facts[ptr]
    for a, v in ints:  # a stride in bytes: Triton's pointer arithmetic counts elements
        if stride and size > 1 and v == stride * size:
            return ptr, (f"{a} = {v} is {ptr}'s row stride in bytes ({stride} x {size}): Triton offsets count elements")
    for a, v in ints:  # another tensor's row stride
        others = [o for o, f in facts.items() if o != ptr and isinstance(f, tuple) and f[0] == v]
        if stride is not None and v != stride and others:
            return ptr, f"{ptr}'s offset uses {a} = {v}, the row stride of {others[0]}; {ptr}'s own is {stride}"
    named = [(a, v) for a, v in ints if "stride" in a.lower()]
    own = f"{ptr}'s row stride is {stride} elements" if stride is not None else f"{ptr} is 1-D"
    if named:
        return ptr, f"check {ptr}'s offset: {named[0][0]} = {named[0][1]}, while {own}"
    return ptr, f"check {ptr}'s offset ({own}; offsets count elements, not bytes)"


MAX_SITES = 10  # distinct access sites a launch reports (each once, with how many accesses it made)
# Refused accesses a launch may make before it is stopped at once: enough for every program of any case's grid to
# hit each site, few enough that a loop whose exit depends on an out-of-bounds load (now `other`) cannot hang it.
MAX_REFUSED = 20000


def _site() -> tuple[str, int]:
    """The kernel source line of the access being checked: the innermost frame of the kernel's own file (the
    interpreter runs the @triton.jit function as Python), as ('file.py:LINE', LINE); ('', 0) when it is not on the
    stack."""
    want = _state.get("file")
    f = sys._getframe(1)
    while f is not None:
        if want and f.f_code.co_filename == want:
            return f"{os.path.basename(want)}:{f.f_lineno}", f.f_lineno
        f = f.f_back  # type: ignore[assignment]
    return "", 0


def _check(kind: str, ptrs: Any, mask: Any) -> bool:
    """Record an access with active lanes outside every tensor argument; True when it must be skipped (none of its
    lanes touches memory: a store writes nothing, a load gives `other`). The launch goes on, so that one run finds
    every faulting access site; it raises OutOfBounds at its end (`install`), listing them."""
    ranges = _state["ranges"]
    addr = np.asarray(ptrs.data).astype(np.uint64, copy=False).ravel()
    active = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data)).ravel()
    addr = addr[active]
    if addr.size == 0:
        return False
    size = np.uint64(max(1, ptrs.get_element_ty().primitive_bitwidth // 8))
    ok = np.zeros(addr.shape, dtype=bool)
    inside: dict[str, int] = {}
    for n, lo, hi in ranges:
        here = (addr >= np.uint64(lo)) & (addr + size <= np.uint64(hi))
        inside[n] = int(here.sum())
        ok |= here
    if ok.all():
        return False
    masked = _state.get("masked", True)
    bad = addr[~ok]
    first = int(bad[0])
    site, line = _site()
    ptr: str | None = None
    advice = ""
    if masked:
        # Lanes the mask lets through at a wrong address: name the pointer the source computes it from (else the
        # tensor its other lanes hit) and what is wrong with its offset.
        args = _pointer_args(_state.get("file") or "", _state["kernel"], line) if line else ()
        hit = max(inside, key=lambda k: inside[k]) if inside and max(inside.values()) > 0 else None
        ptr, advice = _wrong_address(args, _state.get("facts", {}), hit)
    where = "outside every tensor passed to the kernel"
    own = [(lo, hi) for n, lo, hi in ranges if n == ptr]
    if own:  # relative to the tensor it was meant to address
        lo, hi = own[0]
        d = first - hi if first >= hi else lo - first
        where = f"{d} bytes {'past the end' if first >= hi else 'before the start'} of argument {ptr!r}"
        where = f"just past the end of argument {ptr!r}" if first == hi else where
    elif ranges:
        # Name the argument it most plausibly ran past: the nearest storage end below the address, else the
        # nearest start above it.
        below = [(first - hi, n) for n, lo, hi in ranges if hi <= first + int(size)]
        above = [(lo - first, n) for n, lo, hi in ranges if lo > first]
        if below:
            d, n = min(below)
            where = f"{d} bytes past the end of argument {n!r}" if d > 0 else f"just past the end of argument {n!r}"
        elif above:
            d, n = min(above)
            where = f"{d} bytes before the start of argument {n!r}"
    verb = "write" if kind == "store" else "read"
    _state["refused"] = _state.get("refused", 0) + 1
    sites: dict[tuple[str, str], list[Any]] = _state.setdefault("sites", {})
    key = (kind, site or f"#{len(sites)}")
    if key in sites:
        sites[key][1] += 1
    elif len(sites) < MAX_SITES:
        lanes = "lanes inside the mask" if masked else "active lanes"
        sites[key] = [
            f"in {_state['kernel']} (program {_state.get('pid', '?')}), {bad.size} of {active.sum()} {lanes} {verb} "
            f"memory outside the tensors passed to the kernel (the first {where})",
            1,
            kind,
            advice if masked else None,
            site,
        ]
    if _state["refused"] > MAX_REFUSED:
        _raise_sites()
    return True


def _raise_sites() -> None:
    """Raise OutOfBounds for the sites a launch recorded. The message's first line is what a one-line summary keeps
    (and may cut short), so it starts with the diagnosis and the fix; the lanes and the argument follow."""
    sites = _state.pop("sites", None)
    _state["refused"] = 0
    if not sites:
        return
    unmasked = dict.fromkeys(k for _, _, k, advice, _ in sites.values() if advice is None)
    wrong = list(dict.fromkeys(advice for _, _, _, advice, _ in sites.values() if advice is not None))
    fix = " and ".join(f"tl.{k}(..., mask=offs < n)" for k in unmasked)
    why = []
    if unmasked:
        mask_it = "mask it" if len(sites) == 1 else ("mask every one" if not wrong else "mask the unmasked ones")
        why.append(f"{mask_it} with {fix}; on a GPU an unmasked access past the end corrupts memory or faults")
    if wrong:
        # A mask would only hide these lanes: the mask already lets them through, so their address is wrong.
        who = (
            "where the lanes are inside the mask, "
            if unmasked
            else ""
            if len(sites) == 1
            else "their lanes are inside the mask: "
        )
        why.append(f"{who}the address is wrong, not the mask. {'; '.join(wrong)}")
    lines = []
    for text, hits, kind, advice, site in sites.values():
        how = "with no mask" if advice is None else "with its lanes inside the mask"
        at = f" at {site}" if site else ""
        lines.append(f"out-of-bounds {kind}{at} {how}: {text}" + (f"; {hits} such accesses in all" if hits > 1 else ""))
    if len(lines) == 1:
        text, hits, kind, advice, site = next(iter(sites.values()))
        how = "which has no mask" if advice is None else "its lanes inside the mask"
        at = f" at {site}" if site else ""
        more = f"; {hits} such accesses in all" if hits > 1 else ""
        raise OutOfBounds(f"out-of-bounds {kind}{at}, {how}: {why[0]}. {text[0].upper()}{text[1:]}{more}")
    where = ", ".join(f"{k} at {site}" if not site.startswith("#") else k for k, site in sites)
    raise OutOfBounds(
        f"{len(lines)} out-of-bounds access sites in one run of {_state['kernel']}: {where}. "
        + ". ".join(w[0].upper() + w[1:] for w in why)
        + "\n"
        + "\n".join(lines)
    )


HOOKS = (
    ("_init_args_hst",),
    ("create_masked_load", "create_masked_store", "create_load", "create_store", "set_grid_idx"),
)


def _has_hooks(gx: Any, ib: Any) -> bool:
    return (
        gx is not None
        and ib is not None
        and all(hasattr(gx, h) for h in HOOKS[0])
        and all(hasattr(ib, h) for h in HOOKS[1])
    )


def _unmasked(plain: Any) -> Any:
    """tl.load/tl.store without a mask come through the builder's create_load/create_store, which then call the
    masked forms with an all-true mask: the flag tells the check that no mask was given (the fix is a mask) from a
    mask that holds (the address is wrong)."""

    def call(self: Any, *a: Any, **k: Any) -> Any:
        _state["masked"] = False
        try:
            return plain(self, *a, **k)
        finally:
            _state["masked"] = True

    return call


def install() -> bool:
    """Patch the interpreter once per process. Call after TRITON_INTERPRET=1 is set, before student code runs."""
    try:
        from triton.runtime import interpreter as ti
    except ImportError:
        return False
    gx, ib = getattr(ti, "GridExecutor", None), getattr(ti, "InterpreterBuilder", None)
    if gx is None or ib is None or not _has_hooks(gx, ib):
        return False
    if getattr(gx, "_grader_checked", False):
        return True
    init_args, load, store, set_idx = gx._init_args_hst, ib.create_masked_load, ib.create_masked_store, ib.set_grid_idx
    run = gx.__call__

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        _state.pop("sites", None)
        _state["refused"] = 0
        try:
            res = run(self, *args, **kwargs)
        except Exception as e:
            if isinstance(e.__cause__, OutOfBounds):  # stopped at MAX_REFUSED: ours, not wrapped in Triton's error
                raise e.__cause__ from None
            _raise_sites()  # what the run found before it failed explains the failure better than its error
            raise
        _raise_sites()
        return res

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any, *rest: Any, **kw: Any) -> Any:
        res = init_args(self, args_dev, kwargs, *rest, **kw)
        try:
            args_hst, kwargs_hst = res
            names = list(getattr(self, "arg_names", []))
            _state["ranges"] = _ranges_of(names, list(args_hst), dict(kwargs_hst))
            _state["facts"] = _facts_of(names, list(args_hst), dict(kwargs_hst))
            fn = getattr(self, "fn", None)
            _state["kernel"] = getattr(fn, "__name__", "a kernel")
            _state["file"] = getattr(getattr(fn, "__code__", None), "co_filename", None)
        except (TypeError, ValueError):
            _state["ranges"], _state["facts"] = [], {}
        return res

    def create_masked_load(self: Any, ptrs: Any, mask: Any, *a: Any, **k: Any) -> Any:
        if _state["ranges"] and _check("load", ptrs, mask):
            mask = _none(mask)  # refused as a whole: no lane of it touches memory
        return load(self, ptrs, mask, *a, **k)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *a: Any, **k: Any) -> Any:
        if _state["ranges"] and _check("store", ptrs, mask):
            mask = _none(mask)
        return store(self, ptrs, value, mask, *a, **k)

    def set_grid_idx(self: Any, x: int, y: int, z: int) -> Any:
        _state["pid"] = (x, y, z)
        return set_idx(self, x, y, z)

    def _none(mask: Any) -> Any:
        return type(mask)(np.zeros_like(np.asarray(mask.data, dtype=bool)), mask.dtype)

    gx._init_args_hst = _init_args_hst
    gx.__call__ = call
    ib.create_masked_load, ib.create_masked_store, ib.set_grid_idx = (
        create_masked_load,
        create_masked_store,
        set_grid_idx,
    )
    ib.create_load, ib.create_store = _unmasked(ib.create_load), _unmasked(ib.create_store)
    gx._grader_checked = True
    return True
