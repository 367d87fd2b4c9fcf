"""`grader profile`'s command in a worker (advisory, never graded): launches, and on a GPU times and a profile."""

from __future__ import annotations

from typing import Any

from .hostprofile import _stderr_muted


class Profiler:
    """The `profile` command, over a worker's CaseRunner (grader/child/worker.py: its submission, device, calls)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.sub = runner.sub
        self.device = runner.device
        self._call = runner._call

    def _sync(self) -> None:
        self.runner._sync()

    def profile(self, p: dict[str, Any]) -> dict[str, Any]:
        """`grader profile` (advisory, never graded): the inputs made here from p["inputs"]; one call
        records its Triton launches (kernel, grid, constexprs, options); on a GPU, the median time of a call
        (triton.testing.do_bench: warmed up, L2 flushed, synchronized) and the torch.profiler table and per-kernel
        totals of p["reps"] calls."""
        from types import SimpleNamespace

        from .inputs import make_input_seeded

        self.sub._poison(False)
        # p["inputs"] (grader/operands.timing_seeds): every input of the op, each from its first seed.
        xs = [make_input_seeded(SimpleNamespace(**d["case"]), self.device, int(d["seeds"][0])) for d in p["inputs"]]
        if self.sub.launches is not None:
            self.sub.launches.grids = []
        try:
            self._call(*xs)
            self._sync()
        finally:
            grids = (self.sub.launches.grids or []) if self.sub.launches is not None else []
            if self.sub.launches is not None:
                self.sub.launches.grids = None
        out: dict[str, Any] = {"launches": grids, "jit_names": list(self.sub.jit_names)}
        if self.device.type != "cuda" or not p.get("time", True):
            return out
        import triton.testing
        from torch.profiler import ProfilerActivity, profile

        out["median_ms"] = float(triton.testing.do_bench(lambda: self._call(*xs), return_mode="median"))
        with _stderr_muted(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(int(p.get("reps", 10))):
                self._call(*xs)
            self._sync()
        avg = prof.key_averages()
        out["table"] = avg.table(sort_by="device_time_total", row_limit=15)[:30000]
        out["kernels"] = [
            [str(e.key), int(e.count), float(e.device_time_total)]
            for e in sorted(avg, key=lambda e: -float(getattr(e, "device_time_total", 0.0)))
            if float(getattr(e, "device_time_total", 0.0)) > 0 and not str(e.key).startswith(("aten::", "cuda"))
        ][:50]
        return out
