"""GPU compile check, for CPU grades: do the Triton kernels that ran in the interpreter also compile for a GPU?

Why: docs/architecture.md, "Modules: the why", grader/correctness/gpucompile.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.child.launches import ARCH, MAX_LAUNCHES  # noqa: F401  (MAX_LAUNCHES: re-exported for the tests)

if TYPE_CHECKING:
    from grader.results import TestResult
    from grader.sandbox import Sandbox

# ------------------------------------------------------------------------------------------------------------
# parent side: one row per Triton part on a CPU grade


def row_from_reply(part: str, display: str, reply: Any) -> tuple[str, str, dict[str, Any]]:
    """(state, output, extra) of the '<part> / GPU compile check' row, from the compile worker's reply."""
    from grader.results import FAILED, PASSED, SKIPPED

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
        head = (
            f"{display}{at}: kernel {e['kernel']} runs in Triton's interpreter but does not compile for a GPU "
            f"({target}); on a GPU every {part} case would fail. Triton's compiler says:"
        )
        more = f"\n({len(errors) - 1} more launch signature(s) failed too)" if len(errors) > 1 else ""
        return (
            FAILED,
            f"{head}\n{e['message']}\nwhen compiled as {e['kernel']}{e['signature']}, {e['options']}{more}",
            extra,
        )
    if not compiled:
        why = (
            "; ".join(f"{s['kernel']}: {s['why']}" for s in skipped[:3])
            or "no launch of this file's @triton.jit kernels was recorded"
        )
        return SKIPPED, f"could not check: {why}", extra
    lines = [f"compiled for {target} on this CPU with Triton's own compiler ({reply.get('seconds')} s):"]
    lines += [f"  {c['kernel']}{c['signature']} {c['options']}" for c in compiled]
    lines += [f"  not checked: {s['kernel']}: {s['why']}" for s in skipped[:3]]
    return PASSED, "\n".join(lines), extra


def check_part(
    load_payload: dict[str, Any],
    part: str,
    display: str,
    launches: Any,
    timeout_s: float,
    box: Sandbox | None = None,
) -> TestResult:
    """Run the compile worker on the recorded launches; return the '<part> / GPU compile check' TestResult.
    box: a compile-only worker started earlier (`Sandbox("cpu", compile_only=True, wait=False)`, so that its imports
    overlapped the cases); this closes it. None: one is started here."""
    try:
        state, output, extra = _checked(load_payload, part, display, launches, timeout_s, box)
    finally:
        if box is not None:
            box.close(grace_s=0)
    from grader.results import FAILED, Kind, Reason, TestResult

    return TestResult(
        f"{part} / GPU compile check",
        part,
        "checks",
        0.0,
        0.0,
        state,
        output,
        extra,
        kind=Kind.COMPILE_CHECK,
        reason=Reason.COMPILE_FAILED if state == FAILED else Reason.OK,
    )


def _checked(
    load_payload: dict[str, Any], part: str, display: str, launches: Any, timeout_s: float, box: Sandbox | None
) -> tuple[str, str, dict[str, Any]]:
    """(state, output, extra) of the row."""
    from grader.results import SKIPPED
    from grader.sandbox import Sandbox, WorkerFailure

    if not (
        isinstance(launches, list)
        and all(
            isinstance(x, dict) and isinstance(x.get("kernel"), str) and isinstance(x.get("args"), list)
            for x in launches
        )
    ):
        return SKIPPED, "could not check: the worker sent malformed launch records", {}
    if not launches:
        return SKIPPED, "could not check: no launch of this file's @triton.jit kernels was recorded", {}
    own = box is None
    try:
        if box is None:
            box = Sandbox("cpu", start_timeout_s=timeout_s, compile_only=True)
        box.wait_ready(timeout_s)  # (a no-op for the one just started)
        reply = box.request(
            "gpu_compile", {**load_payload, "launches": launches}, timeout_s=timeout_s, what="the GPU compile check"
        )
    except WorkerFailure as e:
        return SKIPPED, f"could not check: {e.line}" + (f"\n{e.detail}" if e.detail else ""), {}
    finally:
        if own and box is not None:
            box.close(grace_s=0)
    return row_from_reply(part, display, reply)
