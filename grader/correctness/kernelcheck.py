"""Which kernels did the submission launch? Classifies what torch.profiler saw during one call.

The worker records, around one call of the submission: the ATen ops called on the host, and (on a GPU) the
device kernels launched. This module, in the trusted parent, decides:
- violation: an ATen *compute* op or kernel (F.glu, torch.sigmoid, mul, ...) did the work, not the student's
  own kernel; the part's points are forfeit;
- warning: ATen memory traffic (a copy or fill), e.g. x.contiguous() on a strided input: legal, but it is
  an extra pass over memory that the contract says to avoid;
- ok: only the student's own kernels.
It is also lecture 6's fusion lesson in one number: how many kernels did one call launch?
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice

from grader.child.kernelnames import MEMORY_OPS
from grader.results import VIOLATION, WARNING, Code, Finding

# Kernel and op names come from the profiler, and a kernel's name is the student's to choose: every pattern here is
# an alternation of fixed words (or one anchored \w* run), linear in the name; the lists are walked once, with sets
# and counters (a list.index or .count per name was quadratic in the number of launches).
ATEN_KERNEL = re.compile(r"\bat::|\bat_cuda_detail|cub::|cutlass|cublas|gemm|nvjet", re.IGNORECASE)
ATEN_MEMORY_KERNEL = re.compile(r"copy|fill|memset|memcpy|Memcpy|Memset|CatArrayBatched", re.IGNORECASE)
# Device activity that is a copy engine's, not a kernel's ("Memcpy DtoH (Device -> Pageable)", "Memset (Device)").
COPY_ACTIVITY = re.compile(r"^(Memcpy|Memset)\b", re.IGNORECASE)
HOST_TRANSFER = re.compile(r"^Memcpy (HtoD|DtoH|HtoH)\b|Pageable|Pinned|Managed", re.IGNORECASE)
# Runtime/driver calls that give a kernel host memory to work in, or move data to the host: the work then happens
# on the CPU, and a kernel only copies.
HOST_MEMORY_API = re.compile(
    r"^(cudaHostAlloc|cudaMallocHost|cudaHostRegister|cudaMallocManaged|cudaHostGetDevicePointer|cudaMemPrefetchAsync|"
    r"cuMemHostAlloc|cuMemAllocHost|cuMemHostRegister|cuMemAllocManaged|cuMemHostGetDevicePointer|cuMemPrefetchAsync|"
    r"cuMemcpyDtoH\w*|cuMemcpyHtoD\w*)$"
)


@dataclass
class KernelReport:
    kernels: list[str] = field(default_factory=list)  # device kernels, in launch order (GPU only)
    violations: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    triton_launches: int | None = None  # launches of the file's own @triton.jit functions (counted in the worker)

    @property
    def ok(self) -> bool:
        return not self.violations

    def violation(self, code: Code, text: str) -> None:
        self.violations.append(Finding(code, text, VIOLATION))

    def warning(self, code: Code, text: str) -> None:
        self.warnings.append(Finding(code, text, WARNING))

    def text(self) -> str:
        lines = ["VIOLATION: " + v.text for v in self.violations]
        if self.kernels:
            counts = Counter(self.kernels)  # in first-launch order
            shown = ", ".join(f"{k} x{n}" for k, n in islice(counts.items(), MAX_LISTED))
            more = f", and {len(counts) - MAX_LISTED} more kernels" if len(counts) > MAX_LISTED else ""
            lines.append(f"{len(self.kernels)} kernel launch(es) per call: {shown}{more}")
        else:
            lines.append("no device kernels recorded (CPU run: host ops checked instead)")
        if self.triton_launches is not None:
            lines.append(f"{self.triton_launches} launch(es) of this file's @triton.jit kernels per call")
        lines += ["warning: " + w.text for w in self.warnings]
        return "\n".join(lines)


MAX_LISTED = 20  # names listed in one finding; the rest are counted


def short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def _listed(names: list[str], sep: str = ", ") -> str:
    """At most MAX_LISTED names, each shortened, and how many more there were."""
    more = f", and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    return sep.join(short(n) for n in names[:MAX_LISTED]) + more


def classify(
    kind: str,
    ops: list[str],
    kernels: list[str],
    jit_names: list[str],
    triton_launches: int | None = None,
    runtime: list[str] | None = None,
    device_profiled: bool = False,
) -> KernelReport:
    """kind: "triton" | "cuda". ops: host ATen op names (without "aten::"). kernels: device activity (kernels and
    copies). jit_names: the student's @triton.jit function names (Triton kernels launch under those names).
    runtime: CUDA runtime/driver calls seen on the host. device_profiled: the call ran on a GPU under the device
    profiler, so an empty kernel list means no kernel ran (on a CPU it means nothing)."""
    transfers = sorted({k for k in kernels if COPY_ACTIVITY.match(k) and HOST_TRANSFER.search(k)})
    kernels = [k for k in kernels if not COPY_ACTIVITY.match(k)]
    rep = KernelReport(kernels=[short(k) for k in kernels], triton_launches=triton_launches)
    _host_side(rep, transfers, sorted({r for r in runtime or [] if HOST_MEMORY_API.match(r)}))
    _host_ops(rep, kind, ops, kernels)
    _device_kernels(rep, kind, kernels, jit_names)
    _own_kernel(rep, kind, kernels, jit_names, triton_launches, device_profiled)
    return rep


def _host_side(rep: KernelReport, transfers: list[str], host_api: list[str]) -> None:
    """Work moved to the host: copies between host and device memory, or host memory given to a kernel."""
    if transfers:
        rep.violation(
            Code.HOST_TRANSFER,
            "data moved between host and device memory during the call ("
            + ", ".join(short(t, 50) for t in transfers[:3])
            + "): the work must be done on the GPU by your kernel, not on the CPU",
        )
    if host_api:
        rep.violation(
            Code.HOST_MEMORY,
            "the call used host memory through the CUDA API ("
            + ", ".join(host_api[:4])
            + "): the work must be done on the GPU by your kernel, in device memory",
        )


def _host_ops(rep: KernelReport, kind: str, ops: list[str], kernels: list[str]) -> None:
    """The host's ATen ops: a compute op is a violation, a copy a warning."""
    compute_ops = sorted({o for o in ops if o not in MEMORY_OPS})
    if compute_ops:
        rep.violation(
            Code.TORCH_COMPUTE,
            "PyTorch computed part of the result: aten::"
            + _listed(compute_ops, ", aten::")
            + ". The work must be done by your own kernel (no torch math: no torch.nn.functional op, torch.exp or *)",
        )
    copies = sorted({o for o in ops if o in ("copy_", "clone", "contiguous", "_to_copy")})
    if copies and kind == "triton" and not kernels:
        pass  # on the CPU interpreter, Triton itself copies results back with aten::copy_: not the student's
    elif copies:
        rep.warning(
            Code.EXTRA_COPY,
            "an extra copy of a tensor (aten::"
            + ", aten::".join(copies)
            + "): a strided x must be read in place, not copied",
        )


def _device_kernels(rep: KernelReport, kind: str, kernels: list[str], jit_names: list[str]) -> None:
    """Every distinct device kernel: PyTorch's compute kernels are violations, its memory kernels a warning, and in
    a Triton part a kernel that is not one of the file's @triton.jit functions is a violation."""
    jit = set(jit_names)
    foreign = aten = 0  # every distinct name is checked; the first MAX_LISTED of each finding are listed
    for k in dict.fromkeys(kernels):  # each distinct name once: the findings do not depend on how often it ran
        if kind == "cuda" and ATEN_MEMORY_KERNEL.search(k) and ATEN_KERNEL.search(k):
            continue  # the grader's own binding fills the output with NaN before calling the library
        if ATEN_KERNEL.search(k):
            if ATEN_MEMORY_KERNEL.search(k):
                if not any(w.code in (Code.EXTRA_COPY, Code.TORCH_MEMORY_KERNEL) for w in rep.warnings):
                    rep.warning(
                        Code.TORCH_MEMORY_KERNEL,
                        f"a PyTorch memory kernel ran ({short(k, 60)}): an extra pass over memory",
                    )
            else:
                aten += 1
                if aten <= MAX_LISTED:
                    rep.violation(Code.TORCH_COMPUTE, f"a PyTorch compute kernel ran: {short(k)}")
        elif kind == "triton" and jit and k not in jit:
            foreign += 1
            if foreign > MAX_LISTED:
                continue
            rep.violation(
                Code.FOREIGN_KERNEL,
                f"kernel {short(k)} is not one of this file's @triton.jit functions ({_listed(jit_names)})",
            )
    if aten > MAX_LISTED:
        rep.violation(Code.TORCH_COMPUTE, f"and {aten - MAX_LISTED} more PyTorch compute kernels")
    if foreign > MAX_LISTED:
        rep.violation(Code.FOREIGN_KERNEL, f"and {foreign - MAX_LISTED} more kernels that are not this file's")


def _own_kernel(
    rep: KernelReport,
    kind: str,
    kernels: list[str],
    jit_names: list[str],
    triton_launches: int | None,
    device_profiled: bool,
) -> None:
    """Did the part's own kernel run: a Triton file's @triton.jit kernel, a CUDA library's __global__ kernel?"""
    jit = set(jit_names)
    if kind == "triton" and not jit_names:
        rep.violation(
            Code.NO_JIT_KERNEL, "this file defines no @triton.jit kernel: the Triton part must compute with Triton"
        )
    elif kind == "triton" and triton_launches == 0:
        rep.violation(
            Code.JIT_NOT_LAUNCHED,
            "no @triton.jit kernel of this file was launched during the call: the work was done some other way",
        )
    elif kind == "triton" and kernels and jit and not any(k in jit for k in kernels):
        rep.violation(Code.FOREIGN_KERNEL, "none of the device kernels is one of this file's @triton.jit functions")
    if kind == "cuda" and (kernels or device_profiled) and all(ATEN_KERNEL.search(k) for k in dict.fromkeys(kernels)):
        rep.violation(
            Code.NO_OWN_KERNEL,
            "no kernel from your library ran on the GPU during the call (an empty or copy-only "
            "kernel list): the CUDA part must compute with its own __global__ kernel",
        )
