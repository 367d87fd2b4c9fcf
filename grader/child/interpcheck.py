"""Bounds checks for Triton's interpreter, the CPU path: every active load and store lane must stay inside a
tensor that was passed to the kernel.

The interpreter does not check addresses. An unmasked tail store writes past the output into the worker's malloc
heap. The damage shows up later and at random: SIGSEGV, SIGABRT, garbage errors in later cases, or a hang (seen
while building tests/data/problems/glu/broken/missing_mask). The student cannot tell any of these from their own
bug, and a GPU would fault at the same line. So in CPU workers the interpreter's loads and stores are checked
*before* they touch memory: an access outside every tensor argument's storage raises OutOfBounds, naming the
kernel, the program id, the argument it ran past, and by how many bytes. The case fails with that one line, and no
memory is corrupted.

What counts as inside: the whole storage of a tensor argument, as the launch passed it (so reading the padding
of a strided view is allowed here, since it is real memory; the correctness checks catch what it computes).
Masked-off lanes are never checked. This is Triton's interpreter's own machinery, patched in one place. If a
Triton version lacks any of the hooks, `install` returns False and the interpreter runs unchecked as before.
"""

from __future__ import annotations

import os
import sys
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


MAX_SITES = 10  # distinct access sites a launch reports (each once, with how many accesses it made)
# Refused accesses a launch may make before it is stopped at once: enough for every program of any case's grid to
# hit each site, few enough that a loop whose exit depends on an out-of-bounds load (now `other`) cannot hang it.
MAX_REFUSED = 20000


def _site() -> str:
    """The kernel source line of the access being checked: the innermost frame of the kernel's own file (the
    interpreter runs the @triton.jit function as Python), as 'file.py:LINE'; '' when it is not on the stack."""
    want = _state.get("file")
    f = sys._getframe(1)
    while f is not None:
        if want and f.f_code.co_filename == want:
            return f"{os.path.basename(want)}:{f.f_lineno}"
        f = f.f_back  # type: ignore[assignment]
    return ""


def _check(kind: str, ptrs: Any, mask: Any) -> bool:
    """Record an access with active lanes outside every tensor argument; True when it must be skipped (none of its
    lanes touches memory: a store writes nothing, a load gives `other`). The launch goes on, so that one run finds
    every unmasked access site; it raises OutOfBounds at its end (`install`), listing them."""
    ranges = _state["ranges"]
    addr = np.asarray(ptrs.data).astype(np.uint64, copy=False).ravel()
    active = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data)).ravel()
    addr = addr[active]
    if addr.size == 0:
        return False
    size = np.uint64(max(1, ptrs.get_element_ty().primitive_bitwidth // 8))
    ok = np.zeros(addr.shape, dtype=bool)
    for _, lo, hi in ranges:
        ok |= (addr >= np.uint64(lo)) & (addr + size <= np.uint64(hi))
    if ok.all():
        return False
    bad = addr[~ok]
    first = int(bad[0])
    where = "outside every tensor passed to the kernel"
    if ranges:
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
    site = _site()
    sites: dict[tuple[str, str], list[Any]] = _state.setdefault("sites", {})
    key = (kind, site or f"#{len(sites)}")
    if key in sites:
        sites[key][1] += 1
    elif len(sites) < MAX_SITES:
        at = f", at {site}" if site else ""
        sites[key] = [
            f"out-of-bounds {kind} in {_state['kernel']} (program {_state.get('pid', '?')}): {bad.size} of "
            f"{active.sum()} active lanes {verb} memory outside the tensors passed to the kernel (the first {where})"
            f"{at}",
            1,
            kind,
        ]
    if _state["refused"] > MAX_REFUSED:
        _raise_sites()
    return True


def _raise_sites() -> None:
    sites = _state.pop("sites", None)
    _state["refused"] = 0
    if not sites:
        return
    lines = []
    for text, hits, _ in sites.values():
        lines.append(text + (f"; {hits} such accesses in all" if hits > 1 else ""))
    kinds = dict.fromkeys(k for _, _, k in sites.values())
    fix = " and ".join(f"tl.{k}(..., mask=offs < n)" for k in kinds)
    if len(lines) == 1:
        raise OutOfBounds(f"{lines[0]}. On a GPU this corrupts memory or faults; mask it: {fix}")
    # The first line (what a one-line summary keeps) names every site; the details follow, one line each.
    where = ", ".join(f"{k} at {site}" if not site.startswith("#") else k for k, site in sites)
    raise OutOfBounds(
        f"{len(lines)} out-of-bounds access sites in one run of {_state['kernel']}: {where}. On a GPU these corrupt "
        f"memory or fault; mask every one: {fix}\n" + "\n".join(lines)
    )


def install() -> bool:
    """Patch the interpreter once per process. Call after TRITON_INTERPRET=1 is set, before student code runs."""
    try:
        from triton.runtime import interpreter as ti
    except ImportError:
        return False
    gx, ib = getattr(ti, "GridExecutor", None), getattr(ti, "InterpreterBuilder", None)
    hooks = ("_init_args_hst",), ("create_masked_load", "create_masked_store", "set_grid_idx")
    if (
        gx is None
        or ib is None
        or not all(hasattr(gx, h) for h in hooks[0])
        or not all(hasattr(ib, h) for h in hooks[1])
    ):
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
            _state["ranges"] = _ranges_of(list(getattr(self, "arg_names", [])), list(args_hst), dict(kwargs_hst))
            fn = getattr(self, "fn", None)
            _state["kernel"] = getattr(fn, "__name__", "a kernel")
            _state["file"] = getattr(getattr(fn, "__code__", None), "co_filename", None)
        except (TypeError, ValueError):
            _state["ranges"] = []
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
    gx._grader_checked = True
    return True
