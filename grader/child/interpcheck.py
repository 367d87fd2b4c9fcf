"""Bounds checks for Triton's interpreter, the CPU path: every active load and store lane must stay inside a
tensor that was passed to the kernel.

The interpreter does not check addresses. An unmasked tail store writes past the output into the worker's malloc
heap. The damage shows up later and at random: SIGSEGV, SIGABRT, garbage errors in later cases, or a hang (seen
while building tests/broken/missing_mask). The student cannot tell any of these from their own bug, and a GPU
would fault at the same line. So in CPU workers the interpreter's loads and stores are checked *before* they
touch memory: an access outside every tensor argument's storage raises OutOfBounds, naming the kernel, the
program id, the argument it ran past, and by how many bytes. The case fails with that one line, and no memory is
corrupted.

What counts as inside: the whole storage of a tensor argument, as the launch passed it (so reading the padding
of a strided view is allowed here, since it is real memory; the correctness checks catch what it computes).
Masked-off lanes are never checked. This is Triton's interpreter's own machinery, patched in one place. If a
Triton version lacks any of the hooks, `install` returns False and the interpreter runs unchecked as before.
"""

from __future__ import annotations

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


def _check(kind: str, ptrs: Any, mask: Any) -> None:
    ranges = _state["ranges"]
    addr = np.asarray(ptrs.data).astype(np.uint64, copy=False).ravel()
    active = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data)).ravel()
    addr = addr[active]
    if addr.size == 0:
        return
    size = np.uint64(max(1, ptrs.get_element_ty().primitive_bitwidth // 8))
    ok = np.zeros(addr.shape, dtype=bool)
    for _, lo, hi in ranges:
        ok |= (addr >= np.uint64(lo)) & (addr + size <= np.uint64(hi))
    if ok.all():
        return
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
    raise OutOfBounds(
        f"out-of-bounds {kind} in {_state['kernel']} (program {_state.get('pid', '?')}): {bad.size} of {active.sum()} "
        f"active lanes {verb} memory outside the tensors passed to the kernel (the first {where}). On a GPU this "
        f"corrupts memory or faults; mask it: tl.{kind}(..., mask=offs < n)"
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

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any, *rest: Any, **kw: Any) -> Any:
        res = init_args(self, args_dev, kwargs, *rest, **kw)
        try:
            args_hst, kwargs_hst = res
            _state["ranges"] = _ranges_of(list(getattr(self, "arg_names", [])), list(args_hst), dict(kwargs_hst))
            _state["kernel"] = getattr(getattr(self, "fn", None), "__name__", "a kernel")
        except (TypeError, ValueError):
            _state["ranges"] = []
        return res

    def create_masked_load(self: Any, ptrs: Any, mask: Any, *a: Any, **k: Any) -> Any:
        if _state["ranges"]:
            _check("load", ptrs, mask)
        return load(self, ptrs, mask, *a, **k)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *a: Any, **k: Any) -> Any:
        if _state["ranges"]:
            _check("store", ptrs, mask)
        return store(self, ptrs, value, mask, *a, **k)

    def set_grid_idx(self: Any, x: int, y: int, z: int) -> Any:
        _state["pid"] = (x, y, z)
        return set_idx(self, x, y, z)

    gx._init_args_hst = _init_args_hst
    ib.create_masked_load, ib.create_masked_store, ib.set_grid_idx = (
        create_masked_load,
        create_masked_store,
        set_grid_idx,
    )
    gx._grader_checked = True
    return True
