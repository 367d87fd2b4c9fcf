"""Timing primitives, run inside a worker process next to the code being timed (student or baseline).

All torch functions used here are bound when the Timer is built, before any student module is imported.

Why: docs/performance.md, "Modules: the why", grader/child/timing.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch

from .inputs import digest, digest_weights, make_input_seeded

if TYPE_CHECKING:  # the requests and replies this timer serves (wire.COMMANDS)
    from .wire import (
        Bandwidth,
        DeviceInfo,
        RoundReply,
        RoundRequest,
        SamplesReply,
        SamplesRequest,
        SetupReply,
        SetupRequest,
    )

try:
    import triton
    import triton.language as tl

    _jit: Callable[[Callable[..., Any]], Any] = triton.jit
except ImportError:  # Windows: no Triton wheels (grader/availability.py). A CUDA part is still timed, with
    triton = None  # torch's one-thread sleep before each call (Timer._check_occupy reports which sleep it used).

    def _no_jit(fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn

    _jit = _no_jit


_perf_counter = time.perf_counter


@_jit
def _now_ns() -> Any:
    # nanosleep first: the waiting warps mostly sleep and issue few instructions (a wait, not a power burn ahead
    # of the timed kernel).
    return tl.inline_asm_elementwise(
        "nanosleep.u32 256;\n\tmov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


@_jit
def _occupy_kernel(ns):  # type: (int) -> None
    # (a type comment: Triton reads a parameter's annotation as a type to specialize on, and looks its name up)
    """Wait `ns` nanoseconds. Launched with as many threads per SM as an SM holds (Timer.__init__) it takes every
    warp slot of every SM, so no kernel from any other stream can start until it ends. torch.cuda._sleep is a
    single thread: a side stream's kernels run beside it, hidden from both clocks."""
    t0 = _now_ns()
    t = t0
    while t - t0 < ns:
        t = _now_ns()


class Timer:
    def __init__(self, device: torch.device, calibrate: bool = True):
        """Bind the primitives and allocate the flush buffer. calibrate=False leaves the GPU measurements (the
        sleep's clock rate, the whole-device sleep's check) to calibrate(): a timing worker is started while the
        correctness stage still runs kernels, and calibrates once that is over, before it imports code under test."""
        self.device = device
        # Bind the primitives now: a submission that later patches torch.cuda.Event.elapsed_time or
        # torch.cuda.synchronize does not change what these names point to.
        self._Event: Callable[..., torch.cuda.Event] = torch.cuda.Event
        self._record = torch.cuda.Event.record
        self._elapsed: Callable[[torch.cuda.Event, torch.cuda.Event], float] = torch.cuda.Event.elapsed_time
        self._sync = torch.cuda.synchronize
        self._sleep: Callable[[int], None] = torch.cuda._sleep
        self._mul = torch.mul
        self._zero = torch.Tensor.zero_
        props = torch.cuda.get_device_properties(device)
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        self.flush_bytes = max(2 * self.l2_bytes, 64 * 2**20)
        self.flush = torch.empty(self.flush_bytes, dtype=torch.uint8, device=device)
        self.sms = props.multi_processor_count
        # Fill every warp slot: 2 programs of 1024 threads per SM where an SM holds 2048 threads (A100, H100,
        # H200), 3 of 512 where it holds 1536 (consumer Ampere and Ada).
        per_sm = int(getattr(props, "max_threads_per_multi_processor", 2048) or 2048)
        self.occupy_warps = 32 if per_sm % 1024 == 0 else 16
        self.occupy_grid = self.sms * max(1, per_sm // (32 * self.occupy_warps))
        self.calibrated = False
        self.cycles_per_us = 2000.0
        self._occupy_ok = False
        self.sleep_kind = "not calibrated"
        if calibrate:
            self.calibrate()
        else:
            try:  # JIT-compile the sleep kernel now (a zero-length launch), so that calibrate() only measures
                self._occupy(0)
                self._sync()
            except Exception:  # calibrate() tries again and reports why it could not use it
                pass
        # Per input set, one buffer per input of the op (spec `inputs:`, in call order): GLU's x, or GLU backward's
        # x and dy. pristine holds each set's contents; work is what a call gets, refreshed from pristine.
        self.pristine: list[list[torch.Tensor]] = []
        self.work: list[list[torch.Tensor]] = []
        self.cols: list[int] = []
        self.kept: dict[str, list[Any]] = {}  # the last round's outputs, until the parent samples them
        self.weights: torch.Tensor | None = None  # the checksum's weights for this case's outputs (setup)
        self._digest, self._stack = digest, torch.stack

    # -- setup --------------------------------------------------------------------------------------------

    def calibrate(self) -> None:
        """The GPU measurements the timed rounds depend on; run them on an otherwise idle GPU."""
        self.cycles_per_us = self._calibrate_sleep()
        self.sleep_kind = self._check_occupy()
        self.calibrated = True

    def _calibrate_sleep(self) -> float:
        cycles = 2_000_000
        s, e = self._Event(enable_timing=True), self._Event(enable_timing=True)
        self._sleep(1000)
        self._sync()
        self._record(s)
        self._sleep(cycles)
        self._record(e)
        self._sync()
        ms = self._elapsed(s, e)
        # Calibrated on an idle GPU the SM clock may be low (345 MHz seen on the H200), which would make every
        # later sleep far too short at boost clock. Assume at least 2 GHz: sleeps are then never shorter
        # than asked, at most a few times longer on a slow clock.
        return max(cycles / max(ms * 1e3, 1.0), 2000.0)

    def _occupy(self, us: float) -> None:
        if triton is None:
            raise RuntimeError("Triton is not installed")
        _occupy_kernel[(self.occupy_grid,)](int(us * 1000), num_warps=self.occupy_warps)

    def _check_occupy(self) -> str:
        """Use the whole-device sleep if it compiles and really holds the device: a tiny kernel on a side stream,
        launched right behind a 300 us sleep, must not finish before the sleep does."""
        try:
            self._occupy(10)  # compile
            make_stream: Callable[[torch.device], torch.cuda.Stream] = torch.cuda.Stream
            side = make_stream(self.device)
            with torch.cuda.stream(side):
                # Load the side kernel now: a first launch can wait tens of ms for lazy module loading (6.9 and
                # 30.7 ms seen on the H200), long after any sleep, which would make this check pass by accident.
                self._zero(self.flush[:256])
            self._sync()
            s, e_sleep, e_side = (self._Event(enable_timing=True) for _ in range(3))
            self._record(s)
            self._occupy(300)
            self._record(e_sleep)
            with torch.cuda.stream(side):
                self._zero(self.flush[:256])
                self._record(e_side)
            self._sync()
            t_sleep, t_side = self._elapsed(s, e_sleep), self._elapsed(s, e_side)
        except Exception as e:  # no Triton, no NVIDIA GPU, inline PTX refused: keep torch's one-thread sleep
            self._occupy_ok = False
            return (
                f"one-thread sleep (whole-device sleep failed: {type(e).__name__}: "
                f"{str(e).splitlines()[0][:120] if str(e) else ''})"
            )
        self._occupy_ok = t_side >= 0.9 * t_sleep
        if self._occupy_ok:
            return (
                f"whole-device sleep ({self.occupy_grid} x {32 * self.occupy_warps} threads; a side-stream "
                f"kernel waited {t_side:.3f} ms behind a {t_sleep:.3f} ms sleep)"
            )
        return (
            "one-thread sleep (whole-device sleep did not hold the device: a side-stream kernel ended at "
            f"{t_side:.3f} ms, the sleep at {t_sleep:.3f} ms)"
        )

    def device_info(self) -> DeviceInfo:
        p = torch.cuda.get_device_properties(self.device)
        return {
            "name": p.name,
            # which GPU this is (a batch's baseline record is bound to it: grader/performance/baselinerecord.py)
            "uuid": str(getattr(p, "uuid", "")),
            "sms": p.multi_processor_count,
            "l2_bytes": self.l2_bytes,
            "flush_bytes": self.flush_bytes,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "pre_call_sleep": self.sleep_kind,
        }

    def _median_ms(self, fn: Callable[[], Any], reps: int) -> float:
        for _ in range(3):
            fn()
        times: list[float] = []
        for _ in range(reps):
            s, e = self._Event(enable_timing=True), self._Event(enable_timing=True)
            self._record(s)
            fn()
            self._record(e)
            self._sync()
            times.append(self._elapsed(s, e))
        times.sort()
        return times[len(times) // 2]

    def copy_bandwidth(self, nbytes: int = 2**32, reps: int = 20) -> Bandwidth:
        """Two ceilings, in bytes read + written per second:
        - copy: a device-to-device copy (1 read : 1 write), the conventional roofline;
        - read2_write1: c = a + b, GLU's own traffic mix (2 reads : 1 write). HBM serves read-heavy traffic a
          little faster than a copy, so a perfect GLU kernel can beat the copy figure; the physical floor
          uses the faster of the two so that such a kernel is never called impossible.
        """
        src = torch.empty(nbytes, dtype=torch.uint8, device=self.device).random_(0, 255)
        dst = torch.empty_like(src)
        # F821 below is a false positive: each lambda runs inside _median_ms, before the del that frees its tensors
        copy_ms = self._median_ms(lambda: dst.copy_(src), reps)  # noqa: F821
        del src, dst
        n = nbytes // 3 // 4
        a = torch.randn(n, device=self.device)
        b, c = torch.randn_like(a), torch.empty_like(a)
        add_ms = self._median_ms(lambda: torch.add(a, b, out=c), reps)  # noqa: F821
        del a, b, c
        torch.cuda.empty_cache()
        return {
            "bytes_per_s": 2 * nbytes / (copy_ms * 1e-3),
            "read2_write1_bytes_per_s": 3 * n * 4 / (add_ms * 1e-3),
            "nbytes": nbytes,
        }

    def setup(self, fns: dict[str, Callable[..., Any]], p: SetupRequest) -> SetupReply:
        """Make the case's input sets and warm every function up. Returns compile and warm-up facts."""
        self.pristine, self.work = [], []
        self.weights = None
        torch.cuda.empty_cache()
        # Every timed output's weighted checksum is taken right after its call, inside the round: an answer
        # produced later (when the parent asks for samples) cannot change it (docs/SECURITY.md).
        self.weights = digest_weights(int(p["n_out"]), int(p["digest_seed"]), self.device)
        # p["inputs"]: per input of the op, its case (shape) and one seed per set (grader/operands.timing_seeds).
        specs = p["inputs"]
        cases = [SimpleNamespace(**d["case"]) for d in specs]
        self.cols = [c.shape[-1] for c in cases]
        for k in range(len(specs[0]["seeds"])):  # seeds mixed with the secret by the parent: it never comes here
            bases = []
            for c, d in zip(cases, specs, strict=True):
                x = make_input_seeded(c, self.device, d["seeds"][k])
                bases.append(x._base if x._base is not None else x)
            self.pristine.append(bases)
            self.work.append([b.clone() for b in bases])
        out: SetupReply = {"compile_s": {}, "warmup_calls": {}}
        wanted = p.get("names")
        for name, fn in fns.items():
            if wanted is not None and name not in wanted:
                continue  # not timed on this case (a baseline whose median a batch's record gives)
            xs = self._views(self.work[0])
            t0 = _perf_counter()
            fn(*xs)  # JIT / autotune / torch.compile happen here, never in a timed region
            self._sync()
            out["compile_s"][name] = _perf_counter() - t0
            n, t_end = 0, _perf_counter() + p["warmup_ms"] / 1e3
            held = []  # as many live outputs as a round keeps, so the allocator's cache has their blocks
            while _perf_counter() < t_end or n < 3:
                held.append(fn(*self._views(self.work[n % len(self.work)])))
                held = held[-p.get("calls_per_round", 5) :]
                # Each call waited for: the warm-up lasts warmup_ms of the GPU's time. Unsynced, the host would
                # queue ~1000 launches in warmup_ms and the sync after would wait for all of them (a 29 ms
                # kernel's warm-up took 30 s on the H200).
                self._sync()
                n += 1
            del held
            out["warmup_calls"][name] = n
        return out

    def _views(self, bases: list[torch.Tensor]) -> list[torch.Tensor]:
        """A call's arguments: each input's buffer, cut to its columns where the case pads its rows."""
        return [b[..., :c] if b.shape[-1] != c else b for b, c in zip(bases, self.cols, strict=True)]

    # -- timed rounds ---------------------------------------------------------------------------------------

    def round(self, fns: dict[str, Callable[..., Any]], p: RoundRequest) -> RoundReply:
        """Time each named function on the given call plan, a list of (set index, scale).

        The outputs are kept until `samples`: which calls and elements get verified is decided by the parent
        and sent only after the round, so code under test cannot tell a checked call from an unchecked one.
        Each output's weighted checksum is taken as soon as its call is over (after the device-wide sync, outside
        both clocks), so what the output held then is what the parent checks, not what it holds later.
        """
        # 1 ms of GPU sleep ahead of each timed call: Python launchers (Triton's, torch.compile's guards, a
        # ctypes binding) take 20-200 us on the host, and any of it not hidden behind the sleep lands in the
        # event interval. 100 us was measured not to be enough (medians of launch-heavy kernels spread 5-12%).
        sleep_us = p.get("sleep_us", 1000)
        sleep_cycles = int(sleep_us * self.cycles_per_us)
        result: RoundReply = {}
        self.kept = {}
        for name in p["names"]:
            fn = fns[name]
            ev, host, outs, sums = [], [], [], []
            for k, scale in p["plan"]:
                for pristine, work in zip(self.pristine[k], self.work[k], strict=True):
                    self._mul(pristine, scale, out=work)  # fresh contents at a known pointer
                xs = self._views(self.work[k])
                self._zero(self.flush)  # evict L2
                self._sync()  # the host clock starts from an idle GPU: only fn's work is in its interval
                if self._occupy_ok:  # keep the GPU busy (all of it) while the host launches fn
                    self._occupy(sleep_us)
                else:
                    self._sleep(sleep_cycles)
                s, e = self._Event(enable_timing=True), self._Event(enable_timing=True)
                self._record(s)
                t0 = _perf_counter()
                y = fn(*xs)
                self._record(e)
                self._sync()  # device-wide: waits for every stream, not just ours
                t1 = _perf_counter()
                ev.append(self._elapsed(s, e))
                host.append((t1 - t0) * 1e3)
                outs.append(y)
                assert self.weights is not None, "time_setup first"
                sums.append(self._digest(y, self.weights))  # done before the next call's sync, outside its clocks
            self.kept[name] = outs
            result[name] = {"event_ms": ev, "host_ms": host, "digest": [float(d) for d in self._stack(sums).tolist()]}
        return result

    def samples(self, p: SamplesRequest) -> SamplesReply:
        """Values of the last round's outputs at the parent's indices: {name: [(call, idx), ...]}. Frees them."""
        out = {name: [_sample(self.kept[name][j], idx) for j, idx in wants] for name, wants in p.items()}
        self.kept = {}
        return out


def _sample(y: Any, idx: torch.Tensor) -> Any:
    if not isinstance(y, torch.Tensor):
        return f"returned {type(y).__name__}, not a tensor"
    flat = y.reshape(-1)
    if flat.numel() <= int(idx.max()):
        return f"output has {flat.numel()} elements, fewer than expected"
    return flat[idx.to(flat.device)].to("cpu")
