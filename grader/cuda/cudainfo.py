"""What the compiler says about a CUDA kernel, for CPU grades: registers, spills, and global access widths.

On a machine without a GPU the CUDA part cannot be run or timed. The compiler's own report still answers the
first questions of lecture 6's "read what costs no device time":
- Are the global loads and stores 16 bytes wide? (`ld.global.v4.f32` / `.v4.u32` in the PTX.) The handout's
  first speed hint; a GLU kernel at the roofline needs them.
- Does anything spill to local memory? (ptxas -v: "bytes spill stores".)
- How many registers per thread? (Occupancy.)
One 0-point row, '<part> / compiler report'. It is informational only, and never fails: if nvcc or ptxas
cannot produce the report, it says why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import textscan
from grader.cuda import runner
from grader.cuda.build import BASE_FLAGS, DEFAULT_ARCH, find_nvcc

if TYPE_CHECKING:
    from grader.identity import Scratch

# The PTX and ptxas's log are the student's (kernel names, inline asm text): each pattern is matched on one line,
# with .match from the line's first non-blank character or searched from a fixed word, and none can backtrack
# super-linearly. (A `^\s*` under MULTILINE, as these once were, runs from every line start over every blank line
# after it: quadratic on a PTX of blank lines, which an asm("\n\n...") puts there.)
# ld.global[.nc][.L1::...][.v2|.v4].<type><bits> and st.global[...]: vector width x element bits = bytes moved.
# The modifiers `(\.[...]+)*?` split one way only ('.' is outside the class), and the tail is tried once per split.
_ACCESS = re.compile(r"(?:@!?%p\d+\s+)?(ld|st)\.global((?:\.[a-zA-Z0-9_:]+)*?)\.([bsuf])(8|16|32|64)\b")
_ENTRY = re.compile(r"(?:\.(?:visible|weak)\s+)?\.entry\s+(\S+?)\s*\(")
_PTXAS_FN = re.compile(r"ptxas info\s*: (?:Compiling entry function|Function properties for) '?([\w$]+)'?")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
# (?<!\d): start at a run's first digit only; from every digit of a long run (a kernel named k000...) \d+ would
# run to the run's end and back, quadratic.
_PTXAS_SPILL = re.compile(r"(?<!\d)(\d+) bytes spill stores, (\d+) bytes spill loads")
MAX_PTX_BYTES = 32 * 1024 * 1024  # the PTX of a GLU kernel is tens of kB; the parent reads no more than this
MAX_DEMANGLED_BYTES = 1024 * 1024  # c++filt's output for the kernel names (a demangler can expand a name a lot)


@dataclass
class KernelInfo:
    name: str
    loads: Counter[int] = field(default_factory=Counter)  # bytes per access -> count of instructions
    stores: Counter[int] = field(default_factory=Counter)
    registers: int | None = None
    spill_bytes: int = 0

    def line(self) -> str:
        def widths(c: Counter[int]) -> str:
            return ", ".join(f"{b} B x{n}" for b, n in sorted(c.items(), reverse=True)) or "none"

        regs = f"{self.registers} registers" if self.registers is not None else "registers ?"
        spill = f"{self.spill_bytes} bytes spilled" if self.spill_bytes else "no spills"
        return f"{self.name}: {regs}, {spill}; global loads {widths(self.loads)}; stores {widths(self.stores)}"


def _short(name: str) -> str:
    """'void (anonymous namespace)::k<float, 1>(float const*, ...)' -> 'k<float, 1>': the argument list is the
    same for every instantiation, the template arguments are what tell them apart."""
    name = name.replace("(anonymous namespace)::", "")
    if name.startswith("void "):
        name = name[5:]
    depth = 0
    for i, ch in enumerate(name):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def _demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        r = runner.run([tool], cwd=None, timeout_s=10, limit=MAX_DEMANGLED_BYTES, input="\n".join(names).encode())
    except (OSError, subprocess.SubprocessError):
        return {n: n for n in names}
    if r.returncode != 0 or r.truncated:
        return {n: n for n in names}
    out = r.output.splitlines()
    return (
        {n: (_short(d.strip()) or n) for n, d in zip(names, out, strict=True)}
        if len(out) == len(names)
        else {n: n for n in names}
    )


def parse_ptx(ptx: str) -> dict[str, KernelInfo]:
    """Access widths per .entry function of a PTX file (each function's body runs to the next .entry), in one pass
    over its lines."""
    out: dict[str, KernelInfo] = {}
    k: KernelInfo | None = None
    for raw in ptx.splitlines():
        line = raw.lstrip()
        if line.startswith((".visible", ".weak", ".entry")):
            m = _ENTRY.match(line)
            if m:
                k = out.setdefault(m.group(1), KernelInfo(m.group(1)))
                continue
        if k is None or not line.startswith(("ld.", "st.", "@")):
            continue
        a = _ACCESS.match(line)
        if a:
            op, mods, _, bits = a.groups()
            vec = 4 if ".v4" in mods else 2 if ".v2" in mods else 1
            (k.loads if op == "ld" else k.stores)[vec * int(bits) // 8] += 1
    return out


def parse_ptxas(log: str, kernels: dict[str, KernelInfo]) -> None:
    """Registers and spills from `ptxas -v`, into the matching kernels."""
    current = None
    for line in log.splitlines():
        m = _PTXAS_FN.search(line)
        if m:
            current = kernels.get(m.group(1))
            continue
        if current is None:
            continue
        if (r := _PTXAS_REGS.search(line)) is not None:
            current.registers = int(r.group(1))
        if (s := _PTXAS_SPILL.search(line)) is not None:
            current.spill_bytes = max(current.spill_bytes, int(s.group(1)) + int(s.group(2)))


def report(
    src: Path, arch: str | None = None, timeout_s: float = 120.0, scratch: Scratch | None = None
) -> tuple[str, dict[str, Any]]:
    """(text, extra) of the compiler report for `src`; text starts with 'could not' when there is none.
    With a grade's `scratch` (grader/identity.py), nvcc and ptxas run as its untrusted identity, in its home."""
    nvcc = find_nvcc()
    if nvcc is None:
        return "could not produce a compiler report: nvcc not found", {}
    arch = arch or DEFAULT_ARCH
    kernels = _compile(nvcc, src, arch, timeout_s, scratch)
    if isinstance(kernels, str):
        return f"could not produce a compiler report: {kernels}", {}
    if not kernels:
        return "could not produce a compiler report: no __global__ kernel in the PTX", {}
    names = _demangle(list(kernels))
    for k in kernels.values():
        k.name = names.get(k.name, k.name)
    return _summary(list(kernels.values()), arch), _extra(list(kernels.values()))


def _compile(nvcc: str, src: Path, arch: str, timeout_s: float, scratch: Scratch | None) -> dict[str, KernelInfo] | str:
    """The kernels of `nvcc -ptx`, with ptxas -v's registers and spills where ptxas is beside nvcc; or why not. Both
    tools run through the one runner (grader/cuda/runner.py: capped output, the grade's uid); the PTX is read with
    a cap before it is read."""
    flags = [f for f in BASE_FLAGS if f not in ("-shared", "-Xcompiler", "-fPIC")]
    cwd = scratch.home if scratch is not None else None
    with tempfile.TemporaryDirectory(prefix="grader-ptx-", dir=scratch.home / "build" if scratch else None) as tmp:
        if scratch is not None and scratch.identity.separated:
            os.chown(tmp, scratch.identity.uid, scratch.identity.gid)
        ptx_path = Path(tmp) / "k.ptx"
        try:
            ran = runner.run(
                [nvcc, *flags, f"-arch={arch}", "-ptx", "-o", str(ptx_path), str(src)],
                cwd=cwd,
                timeout_s=timeout_s,
                scratch=scratch,
            )
            if ran.timed_out:
                return f"nvcc -ptx timed out after {timeout_s:g} s"
            if ran.returncode != 0 or not ptx_path.is_file():
                return "nvcc -ptx failed"
            ptx, cut = textscan.read_capped(ptx_path, MAX_PTX_BYTES)
            if cut:
                return f"the PTX is larger than {MAX_PTX_BYTES >> 20} MiB"
            kernels = parse_ptx(ptx)
            ptxas = Path(nvcc).with_name("ptxas")
            if ptxas.is_file():
                cmd = [str(ptxas), "-v", f"-arch={arch}", "-O3", "-o", str(Path(tmp) / "k.cubin"), str(ptx_path)]
                parse_ptxas(runner.run(cmd, cwd=cwd, timeout_s=timeout_s, scratch=scratch).output, kernels)
        except (OSError, subprocess.SubprocessError) as e:
            return type(e).__name__
    return kernels


def _summary(kernels: list[KernelInfo], arch: str) -> str:
    wide = any(16 in k.loads for k in kernels)
    n_wide = sum(16 in k.loads for k in kernels)
    regs = [k.registers for k in kernels if k.registers is not None]
    spills = sum(k.spill_bytes > 0 for k in kernels)
    summary = (
        f"{len(kernels)} kernel(s); 16-byte global loads in {n_wide}; "
        f"{f'up to {max(regs)} registers' if regs else 'registers unknown'}; "
        f"{f'{spills} spill to local memory' if spills else 'no spills'}"
    )
    lines = [summary, f"nvcc -ptx and ptxas -v for {arch}, per kernel:"] + [f"  {k.line()}" for k in kernels]
    if not wide:
        lines.append(
            "hint: no 16-byte (v4) global loads. A memory-bound kernel near the copy roofline moves 16 bytes per "
            "access where h and the row stride allow it: see the handout's 'Hints for speed'."
        )
    if any(k.spill_bytes for k in kernels):
        lines.append(
            "hint: registers spill to local memory (slow): simplify the kernel or drop __launch_bounds__ limits."
        )
    return "\n".join(lines)


def _extra(kernels: list[KernelInfo]) -> dict[str, Any]:
    return {
        "wide_loads": any(16 in k.loads for k in kernels),
        "kernels": [
            {
                "name": k.name,
                "registers": k.registers,
                "spill_bytes": k.spill_bytes,
                "loads": dict(k.loads),
                "stores": dict(k.stores),
            }
            for k in kernels
        ],
    }
