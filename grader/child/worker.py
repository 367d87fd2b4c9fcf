"""The untrusted side: a spawned child process that imports one submission and runs it on request.

It runs next to student code, so nothing here is trusted for *correctness*: it only moves tensors and reports what
happened (docs/architecture.md#workers). `main` reads (command, request) messages and answers each with one reply
through the `Worker.handlers` table (one handler per grader/child/wire.py COMMANDS name). The Worker is split by
what each part touches: `Submission` (the imported code), `CaseRunner` (correctness calls), `TimingCommands`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .errors import (  # noqa: F401  (explain, _error: imported from here by tests and older callers)
    UserError,
    _error,
    category_of,
    explain,
    explain_error,
)
from .hostprofile import _HostProfile, _stderr_muted
from .timingcmds import CompileOnFirstCall, TimingCommands

if TYPE_CHECKING:
    from .timing import Timer

# Trusted clocks, taken before any student import (a submission may patch the time module later).
_perf_counter = time.perf_counter
_monotonic = time.monotonic
_RUNTIME_CALL = re.compile(r"^(cuda|cu)[A-Z]\w*$")  # cudaLaunchKernel, cudaMemcpyAsync, cuMemHostAlloc, ...
_SNAPSHOT_MARK = "grader::snapshot:" + os.urandom(8).hex()
_TENSOR: Any = None  # torch.Tensor, bound in Worker() before any student import
_EMPTY_LIKE: Any = None
_COPY: Any = None


def _clone_to_cpu(out: Any) -> Any:
    """A CPU copy of a contiguous tensor's memory, with functions bound before the submission was imported."""
    dst = _EMPTY_LIKE(out, device="cpu")
    _COPY(dst, out)
    return dst


def _poison_cpu_allocations(torch: Any) -> None:
    """On a CPU, fill every new floating-point tensor from torch.empty and its kin with the grader's poison (0xFF
    bytes, the all-ones NaN that grader/correctness/check.py recognises as never written). Why:
    docs/architecture.md#workers."""
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}

    def poisoned(make: Callable[..., Any]) -> Callable[..., Any]:
        def make_poisoned(*args: Any, **kwargs: Any) -> Any:
            t = make(*args, **kwargs)
            if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.numel() and t.device.type == "cpu":
                t.view(ints[t.element_size()]).fill_(-1)  # all bits set, whatever the strides
            return t

        return make_poisoned

    for name in ("empty", "empty_like", "empty_strided"):
        setattr(torch, name, poisoned(getattr(torch, name)))
    for name in ("new_empty", "new_empty_strided"):
        setattr(torch.Tensor, name, poisoned(getattr(torch.Tensor, name)))


class Submission:
    """The code a worker runs: its import (`load`), its call (`_call`), and the launches it made."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.device = device
        self.fn: Callable[[Any], Any] | None = None
        self.module: Any = None  # the imported Triton submission
        self.source: str | None = None  # its file, to point error messages at the student's line
        self.fns: dict[str, Callable[[Any], Any]] = {}  # what timing rounds call, by name
        self.jit_names: list[str] = []  # the submission's @triton.jit kernels (launch names)
        self.launches: _LaunchCounter | None = None
        self.name = "?"

    def _load_reference(self, p: dict[str, Any]) -> None:
        """Trusted baselines (the parent's reference module), timed in their own process."""
        import importlib.util

        spec = importlib.util.spec_from_file_location("_reference_baselines", p["path"])
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name, b in p["baselines"].items():
            if name not in self.fns:  # `prepare` loaded some: their compiled code stays (cached per function object)
                fn = getattr(mod, b.get("fn") or b["compile"])
                self.fns[name] = CompileOnFirstCall(self.torch, fn, self.fns, name) if "compile" in b else fn

    def load(self, p: dict[str, Any]) -> str:
        """Import a Triton module or load a CUDA library; p says which (grader/correctness/stage.py Target.payload)."""
        self.name = p["display"]
        if p["kind"] == "reference":
            if set(p["baselines"]) - set(self.fns):  # `prepare` loaded those it compiled (all, or the control)
                self._load_reference(p)
            return "loaded"
        if p["kind"] == "triton":
            import importlib.util

            path = p["path"]
            spec = importlib.util.spec_from_file_location("submission_" + p["impl"], path)
            assert spec and spec.loader
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            try:
                spec.loader.exec_module(mod)
            except SyntaxError as e:
                raise UserError(f"{p['display']} does not parse: {e.msg} at line {e.lineno}", "load") from None
            except Exception as e:  # an import-time error in the student's module
                raise UserError(f"importing {p['display']} failed: {type(e).__name__}: {e}", "load") from e
            fn = getattr(mod, p["entry"], None)
            if fn is None or not callable(fn):
                raise UserError(
                    f"{p['display']} has no function '{p['entry']}'; keep the name and signature from the stub", "load"
                )
            self.fn = fn
            self.module = mod
            self.source = path
            self.jit_names = _jit_names(mod)
            self.launches = _LaunchCounter(_jit_functions(mod), record=os.environ.get("TRITON_INTERPRET") == "1")
        else:
            from .cuda_binding import CudaRowKernel, KernelCallError

            half = p["out_cols"] == "half"
            cols: Callable[[int], int] = (lambda c: c // 2) if half else (lambda c: c)
            try:
                if p.get("cpu_layer") or p.get(
                    "sanitizer"
                ):  # an executable, run once per call (grader/cuda/cudacpu.py)
                    from .cudacpu_binding import CpuRowKernel

                    self.fn = CpuRowKernel(
                        p["lib"],
                        p["entry"],
                        cols,
                        p["handout"],
                        p["section"],
                        p["display"],
                        p.get("sanitizer") or (),
                        [str(i[0]) for i in p.get("inputs", [["x"]])],  # the spec's inputs: the entry's signature
                    )
                elif len(p.get("inputs", ["x"])) > 1:  # the ABI follows the spec's inputs (grader/child/cuda_abi.py)
                    from .cuda_abi import CudaMultiKernel

                    self.fn = CudaMultiKernel(p["lib"], p["entry"], p["inputs"], cols, p["handout"], p["section"])
                else:
                    self.fn = CudaRowKernel(p["lib"], p["entry"], cols, p["handout"], p["section"])
            except KernelCallError as e:
                raise UserError(str(e), "load") from None
        self.fns = {p["impl"]: self._call}
        return "loaded"

    def _poison(self, on: bool) -> None:
        """Only the grader's CUDA binding has the switch (see CudaRowKernel.poison)."""
        if self.fn is not None and hasattr(self.fn, "poison"):  # (None has no such attribute either)
            self.fn.poison = on

    def _call(self, *xs: Any) -> Any:
        assert self.fn is not None, "load first"
        try:
            return self.fn(*xs)
        except NotImplementedError as e:
            raise UserError(f"not implemented: {e}", "not-implemented") from None
        except Exception as e:
            from .cuda_binding import KernelCallError

            if isinstance(e, KernelCallError):
                # The CPU layer's errors say what they are (a sanitizer report, a race): keep that for the parent.
                raise UserError(str(e), getattr(e, "category", "call"), getattr(e, "detail", "")) from None
            raise

    def launch_records(self, p: Any) -> list[dict[str, Any]]:
        """How this process launched the submission's @triton.jit kernels so far (interpreter only). p == "take":
        those since the last "take", and start again (the parent merges each case's records itself)."""
        out = list(self.launches.records.values()) if self.launches else []
        if p == "take" and self.launches:
            self.launches.records = {}
        return out

    def gpu_compile(self, p: dict[str, Any]) -> dict[str, Any]:
        """Import the submission without the interpreter and compile each launch in p["launches"] for a GPU."""
        from . import launches as gpucompile

        if os.environ.get("TRITON_INTERPRET") == "1":
            raise RuntimeError("gpu_compile needs a worker started with compile_only=True (no interpreter)")
        self.load(p)
        return gpucompile.compile_launches(_jit_functions(self.module), p["launches"])


class CaseRunner:
    """The correctness commands: each runs the submission's calls under the profiler and reports what it saw."""

    def __init__(self, torch: Any, device: Any, sub: Submission) -> None:
        self.torch = torch
        self.device = device
        self.sub = sub
        self._call = sub._call  # the name the calls' traceback lines show (`out = self._call(*args)`)

    def run(self, p: dict[str, Any]) -> dict[str, Any]:
        """Run one correctness case twice on the same input; return both outputs and the input afterwards. Each
        output is checked and copied while the call's profiler is still on; an error still reports the ops seen
        until then ("raised"). Why: docs/architecture.md#workers."""
        self.sub._poison(True)
        base = p["base"].to(self.device)
        x = base[..., : p["cols"]] if p["cols"] != base.shape[-1] else base
        extra = [e["base"].to(self.device) for e in p.get("extra", [])]  # inputs past the first (spec `inputs:`)
        args = [
            x,
            *(
                b[..., : e["cols"]] if e["cols"] != b.shape[-1] else b
                for b, e in zip(extra, p.get("extra", []), strict=True)
            ),
        ]
        out_nbytes = p["out_numel"] * base.element_size()
        outs, metas, secs, ops = [], [], [], set()
        call_kernels: list[list[str]] = []
        runtime: set[str] = set()
        launches = 0
        raised: list[str] | None = None
        for _ in range(2):
            self._poison_allocator(out_nbytes)
            before = self.sub.launches.count if self.sub.launches else 0
            t0 = _perf_counter()
            # Every correctness call runs under the profiler (host ops; device activity on a GPU), so a submission
            # that does the work with PyTorch or on the host except when it sees a profiler gains nothing: it always
            # sees one here.
            with self._host_ops() as (seen, snapshot, device):
                try:
                    out = self._call(*args)
                    self._sync()
                    meta = self._meta(out)
                    copy = snapshot(out, meta)
                except Exception as e:
                    line, detail, own = explain_error(e, traceback.format_exc(), self.sub.source)
                    raised = [line, detail, category_of(e, line), own]
            secs.append(_perf_counter() - t0)
            ops |= seen
            runtime |= device["runtime"]
            call_kernels.append(device["kernels"][:200])
            launches += (self.sub.launches.count - before) if self.sub.launches else 0
            if raised is not None:
                break
            metas.append(meta)
            outs.append(copy)
        reply = {
            "ops": sorted(ops),
            "triton_launches": launches if self.sub.launches else None,
            "call_kernels": call_kernels if self.device.type == "cuda" else None,
            "runtime": sorted(runtime)[:200],
        }
        if raised is not None:
            return {**reply, "raised": raised}
        after = {"extra_after": [b.to("cpu") for b in extra]} if extra else {}
        return {**reply, "outs": outs, "meta": metas[0], "x_after": base.to("cpu"), "seconds": secs, **after}

    @contextlib.contextmanager
    def _host_ops(self) -> Iterator[tuple[set[str], Callable[[Any, dict[str, Any]], Any], dict[str, Any]]]:
        """Names of the ATen ops called inside the block, `snapshot(out, meta)` (the grader's copy of an output,
        whose memory ops are left out), and on a GPU the device activity and CUDA calls that began before the
        snapshot (docs/architecture.md#workers)."""
        from torch.profiler import record_function

        from .kernelnames import MEMORY_OPS

        seen: set[str] = set()
        device: dict[str, Any] = {"kernels": [], "runtime": set()}
        marks: list[bool] = []

        def snapshot(out: Any, meta: dict[str, Any]) -> Any:
            if meta.get("type") != "Tensor" or not meta.get("plain") or not meta.get("contiguous"):
                return self.torch.empty(0)  # the parent fails the case on the meta; nothing to read
            with record_function(_SNAPSHOT_MARK):
                marks.append(True)
                return _clone_to_cpu(out)

        with _stderr_muted(), self._profiler() as prof:
            yield seen, snapshot, device
        events = sorted(prof.events(), key=lambda e: e.time_range.start)
        start = min((e.time_range.start for e in events if e.name == _SNAPSHOT_MARK), default=None)
        for e in events:
            before_copy = start is None or e.time_range.start < start
            if e.name.startswith("aten::"):
                name = e.name[len("aten::") :]
                if not before_copy and name in MEMORY_OPS:
                    continue
                seen.add(name)
            elif not before_copy:
                continue  # the grader's copy of the output (its device-to-host memcpy), not the submission's
            elif _RUNTIME_CALL.match(e.name):
                device["runtime"].add(e.name)
            elif str(getattr(e, "device_type", "")).rsplit(".", 1)[-1] == "CUDA":
                device["kernels"].append(e.name)

    def _profiler(self) -> Any:
        """The profiler of one correctness call: host ops, and device activity on a GPU (`.events()`); on a CPU,
        `_HostProfile` (the same events without importing torch._inductor: docs/architecture.md#workers)."""
        from torch.profiler import ProfilerActivity, profile

        if self.device.type == "cuda":
            return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        return _HostProfile()

    def kernels(self, p: dict[str, Any]) -> dict[str, Any]:
        """Profile one call: host ATen ops, device kernels (names, launch order), CUDA runtime/driver calls; the
        warm-up call too, by the host profiler. An error in either reports the ops seen until then ("raised")."""
        self.sub._poison(False)  # profile the submission's launches, not the grader's NaN fill
        base = p["base"].to(self.device)
        x = base[..., : p["cols"]] if p["cols"] != base.shape[-1] else base
        extra = [e["base"].to(self.device) for e in p.get("extra", [])]  # inputs past the first (spec `inputs:`)
        args = [
            x,
            *(
                b[..., : e["cols"]] if e["cols"] != b.shape[-1] else b
                for b, e in zip(extra, p.get("extra", []), strict=True)
            ),
        ]
        ops: set[str] = set()
        with self._host_ops() as (seen, _, _device):
            try:
                self._call(*args)  # compile/JIT outside the device profile
                self._sync()
                raised = None
            except Exception as e:
                raised = list(explain_error(e, traceback.format_exc(), self.sub.source)[:2])
        ops |= seen
        if raised is not None:
            return {
                "ops": sorted(ops),
                "kernels": [],
                "runtime": [],
                "jit_names": self.sub.jit_names,
                "triton_launches": None,
                "raised": raised,
            }
        before = self.sub.launches.count if self.sub.launches else 0
        raised = None
        with _stderr_muted(), self._profiler() as prof:
            try:
                self._call(*args)
                self._sync()
            except Exception as e:
                raised = list(explain_error(e, traceback.format_exc(), self.sub.source)[:2])
        kernels: list[str] = []
        runtime: set[str] = set()
        for ev in sorted(prof.events(), key=lambda ev: ev.time_range.start):
            dev = str(getattr(ev, "device_type", "")).rsplit(".", 1)[-1]
            if ev.name.startswith("aten::"):
                ops.add(ev.name[len("aten::") :])
            elif _RUNTIME_CALL.match(ev.name):
                runtime.add(ev.name)  # a CUDA runtime or driver API call, on the host
            elif dev == "CUDA":
                kernels.append(ev.name)  # device activity: kernels, and memcpy/memset (classified by the parent)
        launched = (self.sub.launches.count - before) if self.sub.launches else None
        out = {
            "ops": sorted(ops),
            "kernels": kernels[:1000],
            "runtime": sorted(runtime)[:200],
            "jit_names": self.sub.jit_names,
            "triton_launches": launched,
        }
        if raised is not None:
            out["raised"] = raised
        return out

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _poison_allocator(self, nbytes: int) -> None:
        """Fill the memory the next allocation of this size will most likely get with NaN (docs/architecture.md#workers:
        unwritten outputs show up as NaN instead of as stale, possibly correct, values)."""
        if nbytes <= 0:
            return
        # 0xFF bytes are NaN in float32, float16 and bfloat16 alike (all-ones exponent, non-zero mantissa).
        buf = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        buf.fill_(255)
        del buf

    def _meta(self, out: Any) -> dict[str, Any]:
        torch = self.torch
        if not isinstance(out, torch.Tensor):
            return {"type": type(out).__name__}
        modes = torch._C._len_torch_function_stack() + torch._C._len_torch_dispatch_stack()
        return {
            "type": "Tensor",
            # A subclass, or an active torch function/dispatch mode, could compute values when they are read.
            "plain": type(out) is _TENSOR and modes == 0 and not out.requires_grad,
            "subclass": type(out).__name__ if type(out) is not _TENSOR else "",
            "modes": int(modes),
            "shape": list(out.shape),
            "dtype": str(out.dtype).replace("torch.", ""),
            "device_type": out.device.type,
            "contiguous": bool(out.is_contiguous()),
            "stride": list(out.stride()),
        }


class Worker:
    """One worker process's state, in three parts, and the table `main` dispatches through."""

    def __init__(self, device: str, timing: bool = False):
        import torch

        global _TENSOR, _EMPTY_LIKE, _COPY
        _TENSOR, _EMPTY_LIKE, _COPY = torch.Tensor, torch.empty_like, torch.Tensor.copy_
        self.torch = torch
        self.device = torch.device(device)
        self.sub = Submission(torch, self.device)
        self.cases = CaseRunner(torch, self.device, self.sub)
        from .profilecmd import Profiler

        self.timing = TimingCommands(torch, self.device, self.sub)
        self.profiler = Profiler(self.cases)
        if self.device.type == "cuda":
            init: Callable[[], None] = torch.cuda.init  # torch leaves it unannotated
            init()
        else:
            _poison_cpu_allocations(torch)
        if self.device.type == "cuda" and timing:
            from .timing import Timer

            # Bound now, before any code under test is imported; calibrated in load(), also before that import,
            # because this worker may start while the correctness stage still has kernels on the GPU.
            self.timing.timer = Timer(self.device, calibrate=False)
        # One handler per grader/child/wire.py COMMANDS name (main checks that both name the same commands).
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "prepare": self.timing.prepare,
            "load": self.load,
            "run": self.cases.run,
            "kernels": self.cases.kernels,
            "profile": self.profiler.profile,
            "launch_records": self.sub.launch_records,
            "gpu_compile": self.sub.gpu_compile,
            "time_setup": self.timing.time_setup,
            "time_round": self.timing.time_round,
            "time_samples": self.timing.time_samples,
            "copy_bandwidth": self.timing.copy_bandwidth,
        }

    def load(self, p: dict[str, Any]) -> str:
        """Calibrate the timer (once, before any code under test is imported), then `Submission.load`."""
        timer = self.timing.timer
        if timer is not None and not timer.calibrated:
            timer.calibrate()
        return self.sub.load(p)

    def prepare(self, p: dict[str, Any]) -> dict[str, dict[str, float]]:
        return self.timing.prepare(p)

    @property
    def timer(self) -> Timer | None:
        return self.timing.timer

    @timer.setter
    def timer(self, value: Timer | None) -> None:
        self.timing.timer = value

    @property
    def fns(self) -> dict[str, Callable[[Any], Any]]:
        return self.sub.fns

    @property
    def source(self) -> str | None:
        return self.sub.source

    @property
    def spin_s(self) -> float:
        return self.timing.spin_s

    def _host_ops(self) -> Any:
        return self.cases._host_ops()


_JIT_TYPES = ("JITFunction", "InterpretedFunction")  # the second is what @triton.jit gives under TRITON_INTERPRET


def _jit_functions(mod: Any) -> list[Any]:
    """The @triton.jit functions a module defines (through @autotune / @heuristics wrappers)."""
    found = []
    for v in vars(mod).values():
        seen = 0
        while v is not None and seen < 5:
            if type(v).__name__ in _JIT_TYPES:
                found.append(v)
                break
            v = getattr(v, "fn", None)
            seen += 1
    return found


def _jit_names(mod: Any) -> list[str]:
    return sorted({f.fn.__name__ for f in _jit_functions(mod)})


class _LaunchCounter:
    """Counts launches of the submission's own Triton kernels by wrapping each function's `run` (compiled and
    interpreted alike); with record=True (the interpreter) also keeps each launch as data for the GPU compile check
    (grader/correctness/gpucompile.py). Why: docs/architecture.md#workers."""

    def __init__(self, funcs: list[Any], record: bool = False):
        from . import launches as gpucompile

        self.count = 0
        self.records: dict[str, dict[str, Any]] = {}
        self.grids: list[dict[str, Any]] | None = None  # while a list: each launch's grid (profilecmd.Profiler)

        # A closure per function, not default arguments: a kernel parameter may have any name, and every
        # keyword argument of a launch must reach the original `run`.
        def wrap(f: Any, original: Any) -> Callable[..., Any]:
            def run(*args: Any, **kwargs: Any) -> Any:
                self.count += 1
                if self.grids is not None and len(self.grids) < gpucompile.MAX_LAUNCHES:
                    self.grids.append(gpucompile.describe_grid(f, args, kwargs))
                if record and len(self.records) < gpucompile.MAX_LAUNCHES:
                    d = gpucompile.describe_launch(f, args, kwargs)
                    if d is not None:
                        self.records.setdefault(repr(d), d)
                return original(*args, **kwargs)

            return run

        for f in funcs:
            f.run = wrap(f, f.run)


def spin_wait(conn: Any, seconds: float) -> bool:
    """Busy-wait up to `seconds` for the parent's next message; True when one is waiting. Why (a timing worker's
    wake-up costs the wall-clock check): docs/architecture.md#workers."""
    end = _monotonic() + seconds
    while _monotonic() < end:
        if conn.poll(0):
            return True
    return False


def main(conn: Any, device: str, timing: bool = False, compile_only: bool = False) -> None:
    """Entry point of the spawned child. compile_only: a CPU worker for grader/correctness/gpucompile.py, which imports
    the submission with Triton's compiler instead of its interpreter (even if the parent's environment sets it)."""
    try:
        os.setsid()  # own process group: the parent kills the whole group, forks included
    except OSError:
        pass
    if compile_only:
        import warnings

        os.environ.pop("TRITON_INTERPRET", None)
        # Triton 3.9 warns once per process that its fp-fusion default will change: noise in a grader's output.
        warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION", category=UserWarning)
    elif device == "cpu":
        import warnings

        # The interpreter runs kernels in numpy, which warns on exp overflow and inf*0 (our saturating and inf/NaN
        # cases do that on purpose): expected noise for every submission.
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.")
        # Must be set before any @triton.jit is decorated, i.e. before the student module is imported.
        os.environ["TRITON_INTERPRET"] = "1"
        from . import interpcheck

        interpcheck.install()  # out-of-bounds loads and stores fail their case instead of corrupting this process
    from . import wire  # imports torch: only once privileges are dropped and the interpreter switch is set

    # Replies in the b"R" format (wire.reply_bytes) for every worker; requests in `dumps`' format, a timing worker's
    # in multiprocessing's (wire.timing_worker says why).
    end = wire.timing_worker if timing else wire.correctness_worker
    try:
        w = Worker(device, timing)
        assert set(w.handlers) == set(wire.COMMANDS), "worker.py handlers and wire.py COMMANDS name the same commands"
    except Exception as e:
        end.send(conn, _error(f"worker could not start: {type(e).__name__}: {e}", traceback.format_exc()))
        return
    end.send(conn, ("ok", "ready"))
    handlers = w.handlers
    while True:
        try:
            cmd, payload = end.recv(conn)
        except (EOFError, OSError, ValueError, TypeError, wire.MalformedMessage):
            return
        if cmd == wire.EXIT:
            return
        handler = handlers.get(cmd) if type(cmd) is str else None
        try:
            if handler is None:
                raise UserError(f"no worker command {str(cmd)[:80]!r}", "call")
            value = handler(payload)
            end.send(conn, ("ok", value))
        except UserError as e:
            end.send(conn, _error(str(e), "", e.category))
        except Exception as e:
            line, detail, own = explain(e, traceback.format_exc(), w.source)
            end.send(conn, _error(line, detail, category_of(e, line), own))
        if w.spin_s:
            spin_wait(conn, w.spin_s)
