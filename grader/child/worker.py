"""The untrusted side: a spawned child process that imports one submission and runs it on request.

The trusted parent (grader/sandbox.py) never imports student code. It sends inputs here, gets outputs back and
checks them itself against a truth this process never sees. Everything in this file runs next to student code,
so nothing here is trusted for *correctness*: it only moves tensors and reports what happened.

Protocol: the parent sends (command, payload) tuples; each gets exactly one reply ("ok", value) or
("error", one-line message, detail, category, own frames): the detail holds the whole traceback (report.md shows
it), the last field the same with only the submission's own frames (what a terminal shows).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

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


# The folder this package was imported from (the grade's scratch, when the grader runs it): tracebacks name the
# grader's and the submission's files relative to it, not by this machine's paths.
_LIB_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRATCH_RO = os.path.dirname(_LIB_ROOT)


def _tail(tb: str, lines: int = 12) -> str:
    text = "\n".join(tb.rstrip().splitlines()[-lines:])
    return text.replace(_LIB_ROOT + os.sep, "").replace(os.path.join(_SCRATCH_RO, "submission") + os.sep, "")


_TRITON_AT = re.compile(r"^at \d+:\d+:$")  # how Triton's CompilationError starts: a location, then source
# The most of an exception's line a reply carries. The line is a lost point's reason in every report, so it is kept
# whole (a hint's sentence runs past 300 characters) and, when even this is exceeded, cut between words, never inside
# one ("mask it: tl." was what a cut at 300 left of a hint, before the ", at <file> line N" that follows it).
GIST_MAX = 2000


def _cut_at_word(text: str, limit: int = GIST_MAX) -> str:
    """grader/textscan.py cut_at_word, here again: this package imports nothing of the trusted grader."""
    if len(text) <= limit:
        return text
    at = max(text.rfind(" ", 0, limit + 1), text.rfind("\t", 0, limit + 1))
    inside = at < limit // 2
    kept = (text[:limit] if inside else text[:at]).rstrip()
    left = len(text) - len(kept)
    return kept + f" [... {left} more characters{' (cut inside a word)' if inside else ''}]"


def _gist(e: BaseException) -> str:
    """The informative line of an exception's message: the first, except for Triton's compile errors, which
    start with a location and a source excerpt and end with the reason."""
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if _TRITON_AT.match(lines[0].strip()):
        reason = [ln for ln in lines[1:] if ln.strip().strip("^")]
        return _cut_at_word(reason[-1].strip() if reason else lines[0])
    return _cut_at_word(lines[0])


def _student_line(chain: list[BaseException], source: str | None) -> str:
    """', at glu_triton.py line N': the deepest frame in the submission's file, searched from the root cause out.
    Triton's interpreter runs a kernel as Python compiled with the file's name and line numbers, so a kernel's
    own line is found too."""
    check = sys.modules.get(f"{__package__}.interpcheck")  # imported by CPU workers only
    if not source or (check is not None and isinstance(chain[-1], check.OutOfBounds)):
        # The interpreter's bounds check (interpcheck.py) raises at the end of the launch, and its message already
        # names each faulting load/store line: the launch line would point the student at the wrong line.
        return ""
    for x in reversed(chain):
        frames = [f for f in traceback.extract_tb(x.__traceback__) if f.filename == source]
        if frames:
            return f", at {os.path.basename(source)} line {frames[-1].lineno}"
    return ""


def explain_error(e: BaseException, tb: str, source: str | None = None) -> tuple[str, str, str]:
    """`explain`, for a reply: a UserError is its own one line."""
    if isinstance(e, UserError):
        return str(e), e.detail, e.detail
    return explain(e, tb, source)


FULL_TRACEBACK_LINES = 200  # of the full traceback kept for report.md (the wire caps a string at 64 KiB)


def _is_wrapper(outer: BaseException, inner: BaseException) -> bool:
    """outer only re-raises inner: its message is inner's repr (Triton's interpreter: InterpreterError(repr(e)),
    once per @triton.jit call level, so a helper's error arrives wrapped twice) or inner's message."""
    msg = str(outer).strip()
    return msg in (repr(inner), str(inner).strip()) or (bool(_gist(inner)) and _gist(inner) in _gist(outer))


def _student_frames(chain: list[BaseException], source: str | None) -> str:
    """The traceback's frames in the submission's own file (from the outermost exception to the root cause, each
    frame once), named by the file's base name: what the student can act on. '' when there are none."""
    if not source:
        return ""
    seen: set[tuple[int, str]] = set()
    frames = []
    for x in chain:
        for f in traceback.extract_tb(x.__traceback__):
            if f.filename == source and (f.lineno or 0, f.name) not in seen:
                seen.add((f.lineno or 0, f.name))
                frames.append(f)
    if not frames:
        return ""
    for f in frames:
        f.filename = os.path.basename(source)
    return "".join(traceback.format_list(frames)).rstrip()


def explain(e: BaseException, tb: str, source: str | None = None) -> tuple[str, str, str]:
    """(one line, detail, full traceback) for an exception raised while running the submission.

    Libraries wrap errors ("raise X from cause"): Triton's interpreter re-raises every kernel error as an
    InterpreterError, and its compiler reports an error inside a @triton.jit helper as a CompilationError at the
    call site. The reason is then in the innermost cause, which a traceback's last lines do not show. So the line
    names the root cause too (a pure wrapper, however deep, is dropped from it), and the detail starts with its whole
    message (a compile error's source excerpt), then the whole traceback (report.md shows it). The third value is
    the same with only the submission's own frames ('' when it has none): what a terminal shows a student, for
    whom the grader's and Triton's frames are noise."""
    chain = [e]
    while len(chain) < 10:
        last = chain[-1]
        nxt = last.__cause__ or (None if last.__suppress_context__ else last.__context__)
        if nxt is None or any(nxt is c for c in chain):
            break
        chain.append(nxt)
    root = chain[-1]
    at = _student_line(chain, source)
    full = _tail(tb, FULL_TRACEBACK_LINES)
    mine = _student_frames(chain, source)
    own = f"{mine}\n{type(root).__name__}: {_gist(root)}" if mine else ""
    # The outermost exception that is more than a wrapper of the next one: its own words are worth a line.
    top = 0
    while top + 1 < len(chain) and _is_wrapper(chain[top], chain[top + 1]):
        top += 1
    head = chain[top]
    line = f"{type(head).__name__}: {_gist(head)}"
    if head is not root:
        line += f" (caused by {type(root).__name__}: {_gist(root)})"
    root_lines = str(root).strip().splitlines()
    if len(root_lines) <= 1:  # already all in the line
        return line + at, full, own
    cause = f"root cause, {type(root).__name__}:\n" + "\n".join(root_lines[:20]) + "\n\n"
    return line + at, cause + full, cause + own if own else ""


def _poison_cpu_allocations(torch: Any) -> None:
    """On a CPU, fill every new floating-point tensor from torch.empty and its kin with the grader's poison (0xFF
    bytes, the all-ones NaN that grader/correctness/check.py recognises as never written).

    On a GPU, _poison_allocator makes the caching allocator hand back poisoned memory. malloc gives no such
    promise: memory a kernel never wrote held zeros from a fresh page or an earlier call's values, so a missing
    mask failed with different values on every run (and a regrade told the student something else) and its
    "never written" hint came and went. Installed before the submission is imported, so `from torch import empty`
    gets these too; a submission that undoes it only makes its own unwritten outputs unpredictable again."""
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


class Worker:
    def __init__(self, device: str, timing: bool = False):
        import torch

        global _TENSOR, _EMPTY_LIKE, _COPY
        _TENSOR, _EMPTY_LIKE, _COPY = torch.Tensor, torch.empty_like, torch.Tensor.copy_
        self.torch = torch
        self.device = torch.device(device)
        self.fn: Callable[[Any], Any] | None = None
        self.module: Any = None  # the imported Triton submission
        self.source: str | None = None  # its file, to point error messages at the student's line
        self.fns: dict[str, Callable[[Any], Any]] = {}  # what timing rounds call, by name
        self.jit_names: list[str] = []  # the submission's @triton.jit kernels (launch names)
        self.launches: _LaunchCounter | None = None
        self.name = "?"
        self.timer = None  # grader.timing.Timer, in timing workers only (it binds CUDA events before student code)
        self.spin_s = 0.0  # while timing: busy-wait this long for the next request (see spin_wait)
        if self.device.type == "cuda":
            init: Callable[[], None] = torch.cuda.init  # torch leaves it unannotated
            init()
        else:
            _poison_cpu_allocations(torch)
        if self.device.type == "cuda" and timing:
            from .timing import Timer

            # Bound now, before any code under test is imported; calibrated in load(), also before that import,
            # because this worker may start while the correctness stage still has kernels on the GPU.
            self.timer = Timer(self.device, calibrate=False)

    # -- commands -------------------------------------------------------------------------------------------

    def prepare(self, p: dict[str, Any]) -> dict[str, dict[str, float]]:
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
        self._load_reference(p)
        from types import SimpleNamespace

        from .inputs import make_input_seeded

        torch = self.torch
        out: dict[str, dict[str, float]] = {}
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

    def _load_reference(self, p: dict[str, Any]) -> None:
        """Trusted baselines (the parent's reference module), timed in their own process."""
        import importlib.util

        spec = importlib.util.spec_from_file_location("_reference_baselines", p["path"])
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        torch = self.torch
        for name, b in p["baselines"].items():
            fn = getattr(mod, b.get("fn") or b["compile"])
            self.fns[name] = torch.compile(fn, dynamic=False) if "compile" in b else fn

    def load(self, p: dict[str, Any]) -> str:
        """Import a Triton module or load a CUDA library; p describes which (see sandbox.load_payload)."""
        self.name = p["display"]
        if self.timer is not None and not self.timer.calibrated:
            self.timer.calibrate()
        if p["kind"] == "reference":
            if not self.fns:  # else `prepare` imported (and compiled) them already
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

    def run(self, p: dict[str, Any]) -> dict[str, Any]:
        """Run one correctness case twice on the same input; return both outputs and the input afterwards.

        Each output is checked and copied (a snapshot of its memory) while the call's profiler is still on: an
        output must be a plain torch.Tensor with no torch function or dispatch mode active, so nothing can compute
        it later, when the grader reads it, and work a background thread does after the call is not in the copy.
        On a GPU the profiler records device activity too, per call ("call_kernels"): the parent checks every
        call, not only the kernel check's, so a submission cannot do the work differently when it is watched.
        An error in the call still reports the ATen ops seen until then ("raised"): the parent fails the case and
        counts the ops, so raising after PyTorch did the work hides nothing."""
        self._poison(True)
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
            before = self.launches.count if self.launches else 0
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
                    line, detail, own = explain_error(e, traceback.format_exc(), self.source)
                    raised = [line, detail, category_of(e, line), own]
            secs.append(_perf_counter() - t0)
            ops |= seen
            runtime |= device["runtime"]
            call_kernels.append(device["kernels"][:200])
            launches += (self.launches.count - before) if self.launches else 0
            if raised is not None:
                break
            metas.append(meta)
            outs.append(copy)
        reply = {
            "ops": sorted(ops),
            "triton_launches": launches if self.launches else None,
            "call_kernels": call_kernels if self.device.type == "cuda" else None,
            "runtime": sorted(runtime)[:200],
        }
        if raised is not None:
            return {**reply, "raised": raised}
        after = {"extra_after": [b.to("cpu") for b in extra]} if extra else {}
        return {**reply, "outs": outs, "meta": metas[0], "x_after": base.to("cpu"), "seconds": secs, **after}

    @contextlib.contextmanager
    def _host_ops(self) -> Iterator[tuple[set[str], Callable[[Any, dict[str, Any]], Any], dict[str, Any]]]:
        """Names of the ATen ops called inside the block (profiler, every thread; its stderr chatter muted), and
        `snapshot(out, meta)`, the grader's copy of an output, taken inside the block. The memory ops of that copy
        are not the submission's, and are left out; any compute op is counted wherever it ran. On a GPU, also the
        device activity (kernels, copies) and CUDA runtime/driver calls that began before the snapshot: the
        submission's own, not the copy's."""
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
        """The profiler of one correctness call: host ops, and device activity on a GPU (`.events()`).

        On a CPU, the autograd profiler that torch.profiler.profile wraps, with the same settings (Kineto, host
        activity only): the same events, without torch.profiler's first-use import of torch._inductor (0.8-1.1 s
        in every worker, before its first case's answer)."""
        from torch.profiler import ProfilerActivity, profile

        if self.device.type == "cuda":
            return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        return _HostProfile()

    def kernels(self, p: dict[str, Any]) -> dict[str, Any]:
        """Profile one call: host ATen ops, device kernels (names, launch order), CUDA runtime/driver calls.

        The warm-up call (JIT and autotuning happen there, outside the device profile) is watched by the host
        profiler too. An error in either call is reported with the ops seen until then ("raised"), and the parent
        fails the check closed."""
        self._poison(False)  # profile the submission's launches, not the grader's NaN fill
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
                raised = list(explain_error(e, traceback.format_exc(), self.source)[:2])
        ops |= seen
        if raised is not None:
            return {
                "ops": sorted(ops),
                "kernels": [],
                "runtime": [],
                "jit_names": self.jit_names,
                "triton_launches": None,
                "raised": raised,
            }
        before = self.launches.count if self.launches else 0
        raised = None
        with _stderr_muted(), self._profiler() as prof:
            try:
                self._call(*args)
                self._sync()
            except Exception as e:
                raised = list(explain_error(e, traceback.format_exc(), self.source)[:2])
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
        launched = (self.launches.count - before) if self.launches else None
        out = {
            "ops": sorted(ops),
            "kernels": kernels[:1000],
            "runtime": sorted(runtime)[:200],
            "jit_names": self.jit_names,
            "triton_launches": launched,
        }
        if raised is not None:
            out["raised"] = raised
        return out

    def profile(self, p: dict[str, Any]) -> dict[str, Any]:
        """`grader profile` (advisory, never graded): the inputs made here from p["inputs"]; one call
        records its Triton launches (kernel, grid, constexprs, options); on a GPU, the median time of a call
        (triton.testing.do_bench: warmed up, L2 flushed, synchronized) and the torch.profiler table and per-kernel
        totals of p["reps"] calls."""
        from types import SimpleNamespace

        from .inputs import make_input_seeded

        self._poison(False)
        # p["inputs"] (grader/operands.timing_seeds): every input of the op, each from its first seed.
        xs = [make_input_seeded(SimpleNamespace(**d["case"]), self.device, int(d["seeds"][0])) for d in p["inputs"]]
        if self.launches is not None:
            self.launches.grids = []
        try:
            self._call(*xs)
            self._sync()
        finally:
            grids = (self.launches.grids or []) if self.launches is not None else []
            if self.launches is not None:
                self.launches.grids = None
        out: dict[str, Any] = {"launches": grids, "jit_names": list(self.jit_names)}
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

    def time_setup(self, p: dict[str, Any]) -> dict[str, Any]:
        assert self.timer is not None and self.timer.calibrated, "timing needs a CUDA device and a loaded worker"
        self._poison(False)
        self.spin_s = float(p.get("spin_s", 0.0))
        return self.timer.setup(self.fns, p)

    def time_round(self, p: dict[str, Any]) -> dict[str, Any]:
        assert self.timer is not None
        return self.timer.round(self.fns, p)

    def time_samples(self, p: dict[str, Any]) -> dict[str, Any]:
        assert self.timer is not None
        return self.timer.samples(p)

    def copy_bandwidth(self, p: dict[str, Any]) -> dict[str, Any]:
        assert self.timer is not None
        return {**self.timer.copy_bandwidth(**p), **self.timer.device_info()}

    # -- helpers --------------------------------------------------------------------------------------------

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

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _poison_allocator(self, nbytes: int) -> None:
        """Fill the memory the next allocation of this size will most likely get with NaN.

        The grader cannot poison a buffer the student allocates, but PyTorch's caching allocator (GPU) and
        malloc (CPU, small sizes) hand a just-freed block of the same size to the next request. So unwritten
        outputs show up as NaN instead of as stale, possibly correct, values.
        """
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


class _HostProfile:
    """torch.profiler.profile(activities=[CPU]) as the correctness calls use it (a `with` block, then `.events()`),
    made directly from torch.autograd.profiler.profile with the arguments torch.profiler passes it."""

    def __init__(self) -> None:
        from torch.autograd import profiler as autograd_profiler

        self._prof: Any = autograd_profiler.profile(use_cpu=True, use_device=None, use_kineto=True)

    def __enter__(self) -> _HostProfile:
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._prof.__exit__(*exc)

    def events(self) -> Any:
        return self._prof.function_events


@contextlib.contextmanager
def _stderr_muted() -> Iterator[None]:
    """The profiler's C++ side prints start/stop lines on fd 2: keep them out of the grader's output."""
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


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
    """Counts launches of the submission's own Triton kernels by wrapping each function's `run`.

    `kernel[grid](...)` ends in `run` both compiled and interpreted, so this works on the CPU too, where the
    profiler sees no device kernels: a "Triton" part that never launches a Triton kernel is caught there.
    With record=True (the interpreter) it also keeps how each kernel was launched, as data, for the GPU compile
    check (grader/correctness/gpucompile.py).
    """

    def __init__(self, funcs: list[Any], record: bool = False):
        from . import launches as gpucompile

        self.count = 0
        self.records: dict[str, dict[str, Any]] = {}
        self.grids: list[dict[str, Any]] | None = None  # while a list: each launch's grid (Worker.profile)

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


class UserError(Exception):
    """A problem with the submission, explained in one line for the student; `category` says which kind (one of
    wire.ERROR_CATEGORIES, sent with the error so that the parent never reads the line to decide)."""

    def __init__(self, line: str, category: str = "call", detail: str = ""):
        super().__init__(line)
        self.category = category
        self.detail = detail


_STICKY_CUDA_ERROR = re.compile(
    r"illegal (memory )?(access|address|instruction)|unspecified launch failure|device-side assert|"
    r"misaligned address|cudaErrorIllegal|cudaErrorLaunchFailure|CUDA error",
    re.IGNORECASE,
)


def category_of(e: BaseException, line: str) -> str:
    """The category of an exception raised while running the submission (one of wire.ERROR_CATEGORIES)."""
    if isinstance(e, UserError):
        return e.category
    return "cuda-fault" if _STICKY_CUDA_ERROR.search(line) else "call"


def spin_wait(conn: Any, seconds: float) -> bool:
    """Busy-wait up to `seconds` for the parent's next message; True when one is waiting.

    Why: a process blocked on a pipe lets its CPU sleep, and waking it costs up to a few hundred microseconds
    (an inter-processor interrupt; on a VM, a trip through the hypervisor). During timing the parent's clock
    over each request is compared across workers (grader/performance/rounds.py), and the baseline worker gets three
    requests in a row where a student's worker gets one, so student workers are woken more often. On the H200,
    correct staff kernels showed +0.004 to +0.07 ms per call of wall-clock "excess" without spinning, and
    -0.03 to +0.05 ms, centred near zero, with it (docs/performance.md#the-wall-clock-check).
    """
    end = _monotonic() + seconds
    while _monotonic() < end:
        if conn.poll(0):
            return True
    return False


_ERROR_LINE_MAX = 2000  # characters of an error reply's line; its detail keeps its last _ERROR_DETAIL_MAX
_ERROR_DETAIL_MAX = 16000  # (both far below the 64 KiB per string that the parent accepts: grader/wire.py)


def _error(line: str, detail: str, category: str = "call", own: str = "") -> tuple[str, str, str, str, str]:
    """An error reply, its texts capped: a submission's exception message or traceback can be any size. `own`: the
    detail with only the submission's own frames (explain)."""
    if len(line) > _ERROR_LINE_MAX:
        line = line[:_ERROR_LINE_MAX] + " [...]"
    if len(detail) > _ERROR_DETAIL_MAX:
        detail = "[...]\n" + detail[-_ERROR_DETAIL_MAX:]
    if len(own) > _ERROR_DETAIL_MAX:
        own = "[...]\n" + own[-_ERROR_DETAIL_MAX:]
    return ("error", line, detail, category, own)


def main(conn: Any, device: str, timing: bool = False, compile_only: bool = False) -> None:
    """Entry point of the spawned child. compile_only: a CPU worker for grader/correctness/gpucompile.py, which imports
    the
    submission with Triton's compiler instead of its interpreter (even if the parent's environment sets it)."""
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
    from . import wire as data_wire  # imports torch: only once privileges are dropped and the interpreter switch is set

    # Every reply in the b"R" format; requests as the parent's Sandbox sends them (see grader/wire.py).
    wire = data_wire.timing_worker if timing else data_wire.correctness_worker

    try:
        w = Worker(device, timing)
    except Exception as e:
        wire.send(conn, _error(f"worker could not start: {type(e).__name__}: {e}", traceback.format_exc()))
        return
    wire.send(conn, ("ok", "ready"))
    while True:
        try:
            cmd, payload = wire.recv(conn)
        except (EOFError, OSError, data_wire.MalformedMessage):
            return
        if cmd == "exit":
            return
        try:
            value = getattr(w, cmd)(payload)
            wire.send(conn, ("ok", value))
        except UserError as e:
            wire.send(conn, _error(str(e), "", e.category))
        except Exception as e:
            line, detail, own = explain(e, traceback.format_exc(), w.source)
            wire.send(conn, _error(line, detail, category_of(e, line), own))
        if w.spin_s:
            spin_wait(conn, w.spin_s)
