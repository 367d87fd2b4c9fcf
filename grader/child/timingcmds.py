"""A timing worker's commands: the trusted baselines' first calls (`prepare`) and the Timer's requests.

Only timing workers have a Timer (grader/child/timing.py); the trusted side sends these (grader/performance/).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .timing import Timer
    from .wire import (
        CopyBandwidthReply,
        CopyBandwidthRequest,
        PrepareReply,
        RoundReply,
        RoundRequest,
        SamplesReply,
        SamplesRequest,
        SetupReply,
        SetupRequest,
    )

_perf_counter = time.perf_counter  # bound before any student import (a submission may patch the time module later)


class CompileOnFirstCall:
    """`torch.compile(fn)` made when the baseline is first called, and put in its place in `fns`.

    torch.compile imports Dynamo (2-4 s of CPU). A batch's baseline record times only the control baseline, so in
    most grades the compiled one is never called: made at `load`, the import ran under the GPU's exclusive hold
    (docs/performance.md). Its first call is a warm-up (`time_setup`, or `prepare`), never a timed call, and from
    then on `fns` holds the compiled function itself, with no wrapper in the timed calls."""

    def __init__(self, torch: Any, fn: Callable[..., Any], fns: dict[str, Callable[..., Any]], name: str) -> None:
        self.torch, self.fn, self.fns, self.name = torch, fn, fns, name
        self.compiled: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:  # a caller may hold this object across calls (the warm-up loop does)
            self.compiled = self.torch.compile(self.fn, dynamic=False)
            self.fns[self.name] = self.compiled
        return self.compiled(*args)


class TimingCommands:
    """The timing stage's commands: the trusted baselines' first calls (`prepare`) and the Timer's requests."""

    def __init__(self, torch: Any, device: Any, sub: Any) -> None:  # sub: grader/child/worker.py Submission
        self.torch = torch
        self.device = device
        self.sub = sub
        self.timer: Timer | None = None  # grader.child.timing.Timer, in timing workers only (bound before student code)
        self.spin_s = (
            0.0  # while timing: busy-wait this long for the next request (grader/child/hostprofile.py spin_wait)
        )

    @property
    def fns(self) -> dict[str, Callable[[Any], Any]]:
        fns: dict[str, Callable[[Any], Any]] = self.sub.fns
        return fns

    def prepare(self, p: dict[str, Any]) -> PrepareReply:
        """Trusted baselines only: import them and make every first call (torch.compile's, one per perf shape) now.

        The pipeline queues this right after the worker starts, so Dynamo's import and Inductor's compiles (~10 s
        of a grade on the H200) overlap the correctness stage instead of adding to the timing stage. The one call
        per shape runs on made-up inputs with the perf inputs' exact layout, so the timed calls reuse the compiled
        code (dynamic=False guards on shape, stride and dtype). Returns the seconds of each first call, by case.
        """
        if p["kind"] != "reference":
            raise ValueError(
                "prepare runs trusted baselines only; code under test is imported by load, after calibration"
            )
        self.sub._load_reference(p)
        from types import SimpleNamespace

        from .inputs import make_input_seeded

        torch = self.torch
        out: PrepareReply = {}
        for raw in p.get("cases", []):
            case = SimpleNamespace(**raw)
            try:
                x = make_input_seeded(case, self.device, 0)
                base = x._base if x._base is not None else x
                x = base.clone()[..., : case.shape[-1]]  # as Timer.setup lays out each input set
                times = {}
                for name, fn in self.fns.items():
                    t0 = _perf_counter()
                    fn(x)
                    self._sync()
                    times[name] = _perf_counter() - t0
                out[case.name] = times
            except Exception:
                # Only a head start: this runs beside the correctness stage, which may hold most of a small GPU's
                # memory. Whatever failed here is made again by the timing stage's setup, alone on the GPU.
                pass
            x = base = None  # type: ignore[assignment]  # drop the references, so that empty_cache frees them
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        return out

    def time_setup(self, p: SetupRequest) -> SetupReply:
        assert self.timer is not None and self.timer.calibrated, "timing needs a CUDA device and a loaded worker"
        self.sub._poison(False)
        self.spin_s = float(p.get("spin_s", 0.0))
        return self.timer.setup(self.fns, p)

    def time_round(self, p: RoundRequest) -> RoundReply:
        assert self.timer is not None
        return self.timer.round(self.fns, p)

    def time_samples(self, p: SamplesRequest) -> SamplesReply:
        assert self.timer is not None
        return self.timer.samples(p)

    def copy_bandwidth(self, p: CopyBandwidthRequest) -> CopyBandwidthReply:
        assert self.timer is not None
        return {**self.timer.copy_bandwidth(**p), **self.timer.device_info()}

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)
