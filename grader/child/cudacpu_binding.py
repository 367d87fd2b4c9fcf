"""Call a CUDA row kernel built for the CPU (grader/cudacpu.py) on CPU tensors: the CUDA-on-CPU twin of
cuda_binding.CudaRowKernel, with the same ABI and the same messages for the library's return codes.

Each call runs the harness executable (grader/child/cudacpu/harness.cpp) once: x goes in on its stdin as exactly
the elements the kernel may read, and y comes back, from a buffer of exactly its size that the harness poisoned with
all-ones bytes. The harness runs the launch in more than one order (blocks and threads forward, reversed, and in
a seeded permutation) and compares the outputs: a difference is a race. x comes back too and is written into the
caller's tensor, so that a kernel that writes into its input is caught by the grader's input check.

A sanitizer report (AddressSanitizer: out of bounds; UBSan: misaligned or other undefined behaviour) ends the
harness; it is turned here into one line naming the student's file and line, and a category the parent reads
(never its text).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import re
import struct
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from .cuda_binding import DTYPE_CODES, KernelCallError, describe_return_code, missing_symbol_message

# Every call runs forward first (its output is the one returned), then reversed and a seeded permutation (the next
# call, another permutation): any difference between orders is reported as a race by the call that saw it.
ORDERS: tuple[tuple[str, ...], ...] = (("0", "1", "2:{seed}"), ("0", "2:{seed}"))
GPU_ORDERS: tuple[tuple[str, ...], ...] = (("0",),)  # under compute-sanitizer: the GPU's own order, one run
ORDER_NAMES = {"0": "forward", "1": "reversed", "2": "shuffled"}
ASAN_OPTIONS = "detect_leaks=0:abort_on_error=0:exitcode=86:print_summary=1:halt_on_error=1:allocator_may_return_null=1"
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1:exitcode=87"
_HEADER = struct.Struct("<6q")
_REPLY = struct.Struct("<5q")
MAX_REPORT = 16000


class CpuKernelError(KernelCallError):
    """A call failed in a way the parent must tell apart: `category` is one of worker.CATEGORIES."""

    def __init__(self, line: str, category: str, detail: str = ""):
        super().__init__(line)
        self.category = category
        self.detail = detail


_BUFFERS = re.compile(r"cudacpu-buffers x=(0x[0-9a-f]+|\(nil\)|0)\+(\d+) y=(0x[0-9a-f]+|\(nil\)|0)\+(\d+)")
_ASAN = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)(?: on (?:unknown )?address (0x[0-9a-f]+))?")
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.MULTILINE)
_UBSAN = re.compile(r"^(?:.*/)?([^/\s:]+):(\d+):(\d+): runtime error: (.*)$", re.MULTILINE)
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (.+?) (?:\S*/)?([^/\s:]+):(\d+)(?::\d+)?$", re.MULTILINE)


def _addr(hexaddr: str) -> int:
    return int(hexaddr, 16) if hexaddr.startswith("0x") else 0


def explain_report(stderr: str, source: str) -> tuple[str, str]:
    """(one line, category) for a sanitizer report on the harness's stderr; ("", "") when there is none."""
    buffers: list[tuple[str, int, int]] = []
    for b in _BUFFERS.finditer(stderr):
        buffers = [
            ("x (the input)", _addr(b.group(1)), int(b.group(2))),
            ("y (the output)", _addr(b.group(3)), int(b.group(4))),
        ]
    frames = [f for f in _FRAME.finditer(stderr) if f.group(2) == source]
    where = f"{source}:{frames[0].group(3)} in {frames[0].group(1)}" if frames else f"{source} (line unknown)"
    m = _ASAN.search(stderr)
    if m:
        kind = m.group(1)
        access = _ACCESS.search(stderr)
        what = f"{access.group(1).lower()} of {access.group(2)} bytes" if access else "an access"
        addr = _addr(m.group(2) or "")
        near = ""
        for name, start, size in buffers:
            if start and start - 4096 <= addr < start:
                near = f", {start - addr} bytes before {name}"
            elif start and start + size <= addr < start + size + 4096:
                near = f", {addr - start - size} bytes past the end of {name} ({size} bytes)"
        if kind in ("heap-buffer-overflow", "stack-buffer-overflow", "global-buffer-overflow", "SEGV"):
            return f"out of bounds: {what} at {where}{near} (AddressSanitizer: {kind})", "out-of-bounds"
        return f"memory error: {what} at {where}{near} (AddressSanitizer: {kind})", "out-of-bounds"
    u = _UBSAN.search(stderr)
    if u:
        at = f"{u.group(1)}:{u.group(2)}" if u.group(1) == source else where
        # UBSan's own report line (the sanitizer's documented format, not a grader stage's words): its check name
        # is what says which kind of undefined behaviour it found.
        ub = re.sub(r"address 0x[0-9a-f]+ ", "address ", u.group(4).strip())  # the same words in every run
        if "misaligned" in ub:
            return f"misaligned access at {at}: {ub} (UBSan)", "misaligned"
        return f"undefined behaviour at {at}: {ub} (UBSan)", "undefined-behavior"
    return "", ""


_CS_ACCESS = re.compile(r"Invalid __(global|shared|local)__ (read|write) of size (\d+) bytes")
_CS_AT = re.compile(r"^=+\s+at (.+?) in (?:\S*/)?([^/\s:]+):(\d+)", re.MULTILINE)
_CS_ADDRESS = re.compile(r"(?:Address|Access to) 0x[0-9a-f]+ is (out of bounds|misaligned)")
# racecheck's reports: "Race reported between ..." (analysis mode) or "Potential WAW hazard detected" (hazard mode).
# Not the word "hazard" alone: its summary line, "RACECHECK SUMMARY: 0 hazards displayed", ends every clean run.
_CS_RACE = re.compile(r"Race reported between|Potential \w+ hazard detected", re.IGNORECASE)
_CS_ERROR = re.compile(r"^=+ (?:Error: )?(.+)$", re.MULTILINE)


def explain_sanitizer(log: str, source: str) -> tuple[str, str]:
    """(one line, category) for a compute-sanitizer log (memcheck or racecheck); ("", "") when it has no error."""
    at = [m for m in _CS_AT.finditer(log) if m.group(2) == source]
    where = f"{source}:{at[0].group(3)} in {at[0].group(1)}" if at else f"{source} (line unknown: build with -lineinfo)"
    access = _CS_ACCESS.search(log)
    if access:
        address = _CS_ADDRESS.search(log)
        what = f"{access.group(2)} of {access.group(3)} bytes to {access.group(1)} memory"
        if address and address.group(1) == "misaligned":
            return f"misaligned access: {what} at {where} (compute-sanitizer memcheck)", "misaligned"
        return f"out of bounds: {what} at {where} (compute-sanitizer memcheck)", "out-of-bounds"
    if _CS_RACE.search(log):
        return f"race on shared memory at {where} (compute-sanitizer racecheck)", "race"
    errors = [e.group(1).strip() for e in _CS_ERROR.finditer(log) if "SUMMARY" not in e.group(1)]
    errors = [e for e in errors if e and not e.startswith(("COMPUTE-SANITIZER", "at ", "by thread", "Saved host"))]
    # Another kind of error it reports (an invalid atomic, a bad barrier, a device-side fault): a fault of the kernel.
    return (f"compute-sanitizer: {errors[0][:300]}", "undefined-behavior") if errors else ("", "")


class CpuRowKernel:
    """A row-wise kernel built for the CPU: x (..., cols) -> y (..., out_cols(cols)), as CudaRowKernel."""

    def __init__(
        self,
        harness: Path,
        symbol: str,
        out_cols: Callable[[int], int],
        handout: str,
        section: str,
        source: str,
        sanitizer: Sequence[str] = (),
    ):
        """sanitizer: a compute-sanitizer command line (path and tool options) to run a GPU harness under
        (grader/sanitizer.py); empty for the CPU layer's harness."""
        self.harness = str(harness)
        self.sanitizer = list(sanitizer)
        self.symbol = symbol
        self.out_cols = out_cols
        self.handout = handout
        self.section = section
        self.source = source  # the student's file name, as sanitizer reports and messages give it
        self.poison = True  # (the harness always poisons y: there is no timing on the CPU)
        self.calls = 0
        # Under compute-sanitizer a call costs a sanitizer start (~0.8 s on the H200) and the pass only reads what the
        # sanitizer reports: the correctness engine's second call of a case, on the same input bytes, reuses the
        # first's run (its output, clean of reports) instead of running the harness again.
        self._last: tuple[bytes, torch.Tensor, bytes] | None = None
        if not os.access(self.harness, os.X_OK):
            raise KernelCallError(f"the CPU build of {source} is missing or not executable")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.device.type != "cpu":
            raise KernelCallError(f"{self.symbol} on the CPU layer needs a CPU tensor")
        if x.dtype not in DTYPE_CODES:
            raise KernelCallError(
                f"{self.symbol} supports float32, float16 and bfloat16 tensors, not "
                + str(x.dtype).replace("torch.", "")
            )
        if x.dim() == 0:
            raise KernelCallError(f"{self.symbol} needs a tensor with at least one dimension")
        if x.stride(-1) != 1:
            x = x.contiguous()
        *lead, cols = x.shape
        rows = math.prod(lead)
        out_cols = int(self.out_cols(cols))
        try:
            x2 = x.view(rows, cols)
        except RuntimeError:
            x2 = x.contiguous().view(rows, cols)
        if rows > 1 and x2.stride(0) < cols:
            x2 = x2.contiguous()
        row_stride = x2.stride(0) if rows > 1 else cols
        # Exactly the elements the kernel may read: up to the end of the last row (not the padding after it).
        x_elems = (rows - 1) * row_stride + cols if rows > 0 else 0
        item = x.element_size()
        x_bytes = ctypes.string_at(x2.data_ptr(), x_elems * item) if x_elems else b""
        schedule = GPU_ORDERS if self.sanitizer else ORDERS
        orders = [o.format(seed=1 + self.calls) for o in schedule[self.calls % len(schedule)]]
        self.calls += 1
        header = _HEADER.pack(x_elems, rows * out_cols, rows, out_cols, row_stride, DTYPE_CODES[x.dtype])
        key = hashlib.sha256(header + x_bytes).digest() if self.sanitizer else b""
        if self._last is not None and self._last[0] == key:
            _, y_prev, x_after = self._last
            if x_elems:
                ctypes.memmove(x2.data_ptr(), x_after, x_elems * item)
            return y_prev.clone().view(*lead, out_cols)
        env = dict(os.environ, ASAN_OPTIONS=ASAN_OPTIONS, UBSAN_OPTIONS=UBSAN_OPTIONS)
        env.pop("LD_PRELOAD", None)
        # Same process group as this worker: a hung kernel is killed with it at the case's time limit.
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "sanitizer.log"
            cmd = [*self.sanitizer, "--log-file", str(log), self.harness] if self.sanitizer else [self.harness]
            proc = subprocess.run([*cmd, *orders], input=header + x_bytes, capture_output=True, env=env)
            err = proc.stderr.decode(errors="replace")[-200_000:]
            if self.sanitizer:
                report = log.read_text(errors="replace")[-200_000:] if log.is_file() else ""
                line, category = explain_sanitizer(report, self.source)
                err = report + err
            else:
                line, category = explain_report(err, self.source)
        if line:
            raise CpuKernelError(line, category, _tail(err))
        if proc.returncode != 0:
            sig = -proc.returncode if proc.returncode < 0 else 0
            what = f"signal {sig}" if sig else f"exit status {proc.returncode}"
            raise CpuKernelError(f"the kernel's CPU run ended with {what}", "call", _tail(err))
        out = proc.stdout
        y_bytes = rows * out_cols * item
        if len(out) != _REPLY.size + y_bytes + x_elems * item:
            raise CpuKernelError("the kernel's CPU run sent a reply of the wrong size", "call", _tail(err))
        status, code, index, order, launched = _REPLY.unpack_from(out)
        if status == 2:
            raise KernelCallError(missing_symbol_message(self.symbol))
        if x_elems:  # the input as the kernel left it: the grader's input check sees any store into x
            ctypes.memmove(x2.data_ptr(), out[_REPLY.size + y_bytes :], x_elems * item)
        if code != 0:
            raise KernelCallError(describe_return_code(code, self.symbol, self.handout, self.section))
        if launched == 0 and rows * out_cols > 0:
            # On a GPU the kernel check forfeits the part for this; here it is each case's failure.
            dtype = str(x.dtype).replace("torch.", "")
            raise CpuKernelError(
                f"{self.symbol} returned without launching a kernel for this {dtype} input (a missing dtype path?): "
                "every output must be computed by a __global__ kernel of your file, not on the host",
                "call",
            )
        if status == 1:
            r, c = divmod(int(index), max(out_cols, 1))
            first = ORDER_NAMES[orders[0][0]]
            other = ORDER_NAMES[orders[int(order)][0]]
            raise CpuKernelError(
                f"race: the output differs when the grid's blocks and threads run {first} and {other} (first at "
                f"row {r}, column {c}): two threads write one output element with different values, or a thread "
                "reads what another writes",
                "race",
            )
        y = torch.empty((rows, out_cols), dtype=x.dtype)
        if y_bytes:
            ctypes.memmove(y.data_ptr(), out[_REPLY.size :], y_bytes)
        if self.sanitizer:
            self._last = (key, y.clone(), bytes(out[_REPLY.size + y_bytes :]))
        return y.view(*lead, out_cols)


def _tail(text: str) -> str:
    return text if len(text) <= MAX_REPORT else "[...]\n" + text[-MAX_REPORT:]
