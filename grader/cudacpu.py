"""Build a CUDA source for the CPU: the trusted half of the CUDA-on-CPU layer (grader/child/cudacpu/).

Why our own layer and not a maintained runtime: HIP-CPU (the one maintained CPU runtime for CUDA-like code) needs
the source ported to HIP's names and TBB with a C++17 parallel STL, runs blocks in parallel in an order it
chooses, and has no notion of the launch orders or exact-size buffers this check needs. What a GLU kernel uses is
small: the qualifiers, a launch over the grid and block, dim3 and the index variables, __half/__nv_bfloat16 with
their conversions, the float intrinsics and the vector types. That is one header (cuda_cpu.h) that g++ >= 11 and
clang >= 14 compile anywhere, with AddressSanitizer and UBSan, on Linux and macOS alike.

The build, as the grade's untrusted identity in its scratch (like nvcc's, grader/build.py):
  1. the source's `k<<<grid, block[, shm[, stream]]>>>(args)` launches are rewritten (here, as text, keeping every
     line where it was) into calls of the layer's launcher;
  2. the preprocessor runs first, and the student's own lines of its output are scanned for what the layer cannot
     run faithfully (__syncthreads, warp shuffles, atomics, inline asm, ...): those make the part "needs a GPU";
  3. the rewritten source is compiled with the layer's header forced in first and linked into the harness
     (grader/child/cudacpu/harness.cpp), with -fsanitize=address,undefined,alignment. Where the sanitizers'
     runtimes are not installed, it is built without them, and the result says so.
Platforms: Linux with g++ >= 11 or clang >= 14 (tested: g++ 12, clang 14 with libclang-rt-14-dev). macOS: Apple
clang, whose ASan and UBSan runtimes ship with the Xcode command-line tools. Windows: usually no g++ or clang++ on
PATH, and then the result says how to get one (WSL, where all of this works as on Linux, or MSYS2's g++, which has
no ASan: the build then runs without sanitizers and says so); the part is reported "needs a GPU", never a crash.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .build import _kill_group, _read_output, _scrub, error_lines

if TYPE_CHECKING:
    from .identity import Scratch

LAYER = Path(__file__).resolve().parent / "child" / "cudacpu"
SANITIZE = ("-fsanitize=address,undefined,alignment", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")
BASE = ("-std=c++17", "-O1", "-g", "-w", "-pthread")
HARNESS = "kernel.cpu"  # the built executable's default name in the scratch's libs/ (the pipeline names it per part)
EXE = ".exe" if sys.platform == "win32" else ""  # what MinGW's g++ (and nvcc on Windows) add to an executable's name


# What a student reads beside every CUDA correctness result earned on the CPU.
CPU_NOTE = (
    "run on this CPU by the grader's CUDA-on-CPU layer (AddressSanitizer and UBSan on, the grid run in three "
    "orders); these correctness points count as on a GPU, and the GPU grade re-checks everything"
)


class State(StrEnum):
    OK = "ok"
    NO_COMPILER = "no compiler"  # no g++ / clang++ here
    NEEDS_GPU = "needs a GPU"  # uses what the layer cannot run faithfully, or what it does not know
    FAILED = "failed"  # does not compile as C++ (and there was no nvcc to say whether it is valid CUDA)


@dataclass
class CpuBuild:
    state: State
    harness: Path | None  # the built executable (in the scratch's libs/), when state is OK
    text: str  # for the student: what was built and how, or why not
    compiler: str = ""
    sanitized: bool = False
    constructs: list[str] = field(default_factory=list)  # "__syncthreads (glu_cuda.cu:42)", ...
    seconds: float = 0.0


def find_compiler() -> str | None:
    """$CXX, else g++, else clang++, else c++ from PATH."""
    for name in (os.environ.get("CXX", ""), "g++", "clang++", "c++"):
        if name and (found := shutil.which(name)):
            return found
    return None


def how_to_get_a_compiler() -> str:
    if sys.platform == "win32":
        return (
            "no C++ compiler on PATH: install WSL (wsl --install) and grade there, or MSYS2's g++ "
            "(pacman -S mingw-w64-ucrt-x86_64-gcc; ASan is not available there), then grade again"
        )
    if sys.platform == "darwin":
        return "no C++ compiler on PATH: run `xcode-select --install` (Apple clang, with AddressSanitizer)"
    return "no C++ compiler on PATH: install g++ (Debian/Ubuntu: sudo apt-get install g++) or clang"


# -- 1. launches -------------------------------------------------------------------------------------------------

_SKIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
_KERNEL_TAIL = re.compile(r"[A-Za-z_][\w]*\s*$")


def _code_mask(src: str) -> list[bool]:
    """For each character: True when it is code (not in a comment, string or character literal)."""
    mask = [True] * len(src)
    for m in _SKIP.finditer(src):
        for i in range(m.start(), m.end()):
            mask[i] = False
    return mask


def _kernel_start(src: str, end: int) -> int:
    """Where the kernel expression that ends at `end` (just before `<<<`) starts: names, `::`, template args."""
    i = end
    while True:
        j = i
        while j > 0 and src[j - 1].isspace():
            j -= 1
        if j > 0 and src[j - 1] == ">":  # template arguments: back over the balanced <...>
            depth, k = 0, j - 1
            while k >= 0:
                depth += {">": 1, "<": -1}.get(src[k], 0)
                if depth == 0:
                    break
                k -= 1
            if k < 0:
                return i
            j = k
            while j > 0 and src[j - 1].isspace():
                j -= 1
        m = _KERNEL_TAIL.search(src, 0, j)
        if not m:
            return j
        j = m.start()
        if j >= 2 and src[j - 2 : j] == "::":
            i = j - 2
            continue
        return j


def _matching(src: str, start: int, mask: list[bool], open_: str, close: str) -> int:
    """The index of the `close` that balances the `open_` at `start` (-1 if none)."""
    depth = 0
    for k in range(start, len(src)):
        if not mask[k]:
            continue
        if src[k] == open_:
            depth += 1
        elif src[k] == close:
            depth -= 1
            if depth == 0:
                return k
    return -1


def rewrite_launches(src: str) -> str:
    """Every `kernel<<<cfg>>>(args)` (templates, `ns::` names, any whitespace, 2 to 4 launch parameters) becomes
    `::cudacpu::launch(::cudacpu::Config(cfg), [&](auto... a) { kernel(a...); }, args)`, on the same lines."""
    out: list[str] = []
    pos = 0
    mask = _code_mask(src)
    i = src.find("<<<")
    while i != -1:
        if not mask[i] or i < pos:
            i = src.find("<<<", i + 3)
            continue
        depth, k = 0, i + 3
        while k < len(src) - 2:
            if mask[k]:
                c = src[k]
                depth += c in "([{"
                depth -= c in ")]}"
                if depth == 0 and src.startswith(">>>", k):
                    break
            k += 1
        else:
            break
        cfg_end = k
        p = cfg_end + 3
        while p < len(src) and src[p].isspace():
            p += 1
        if p >= len(src) or src[p] != "(":
            i = src.find("<<<", i + 3)
            continue
        close = _matching(src, p, mask, "(", ")")
        if close == -1:
            break
        start = _kernel_start(src, i)
        kernel = " ".join(src[start:i].split())
        args = src[p + 1 : close]
        # Newlines in the kernel's name or between >>> and ( are kept (as newlines), so later lines do not move.
        newlines = src[start:i].count("\n") + src[cfg_end + 3 : p].count("\n")
        out.append(src[pos:start])
        out.append(
            f"::cudacpu::launch(::cudacpu::Config({src[i + 3 : cfg_end]}), "
            f"[&](auto... cudacpu_a) {{ {kernel}(cudacpu_a...); }}"
            + ("\n" * newlines)
            + (f", {args})" if args.strip() else args + ")")
        )
        pos = close + 1
        i = src.find("<<<", pos)
    out.append(src[pos:])
    return "".join(out)


# -- 2. what the layer cannot run ----------------------------------------------------------------------------------

# Each: what it is, for the student. Matched on the student's own lines of the preprocessed source (so comments
# and #if'd-out code do not count), with the layer's __shared__ left as it is.
UNSUPPORTED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("__syncthreads (block-wide barriers)", re.compile(r"\b__syncthreads\w*\b|\b__syncwarp\b|\bbarrier\.sync\b")),
    ("dynamic shared memory (extern __shared__)", re.compile(r"\bextern\s+(\w+\s+)*__shared__\b")),
    ("warp shuffles and votes", re.compile(r"\b__(shfl|ballot|any|all|activemask|match|reduce)\w*\b")),
    ("atomics", re.compile(r"\batomic[A-Z]\w*\b|\bcuda::atomic\w*\b")),
    ("inline PTX (asm)", re.compile(r"\b(__asm__|__asm|asm)\b")),
    ("__nanosleep", re.compile(r"\b__nanosleep\b")),
    ("cooperative groups", re.compile(r"\bcooperative_groups\b|\bthis_grid\b|\bgrid\.sync\b")),
    ("clock-based waits", re.compile(r"\b(clock|clock64|globaltimer)\s*\(")),
    ("memory fences", re.compile(r"\b__threadfence\w*\b")),
)
_LINEMARK = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"([^"]*)"')


def unsupported(preprocessed: str, filename: str) -> list[str]:
    """What the student's file uses that the layer cannot run faithfully: "what (file:line)", first use each."""
    found: dict[str, str] = {}
    line, mine = 0, False
    for text in preprocessed.splitlines():
        m = _LINEMARK.match(text)
        if m:
            line, mine = int(m.group(1)), os.path.basename(m.group(2)) == filename
            continue
        if mine:
            for what, pat in UNSUPPORTED:
                if what not in found and pat.search(text):
                    found[what] = f"{what} ({filename}:{line})"
        line += 1
    return list(found.values())


# -- 3. the build -------------------------------------------------------------------------------------------------


def fresh_dir(scratch: Scratch | None, build_dir: Path | None) -> Path:
    """A new build directory: in the scratch's root, which only the grader can write (nothing can be planted at its
    name), or `build_dir` (tests, without a scratch)."""
    if scratch is not None:
        return Path(tempfile.mkdtemp(prefix="cpubuild-", dir=scratch.root))
    assert build_dir is not None, "a build needs a scratch or a build_dir"
    build_dir.mkdir(parents=True, exist_ok=True)
    return build_dir


def give_to_untrusted(bdir: Path, scratch: Scratch | None) -> None:
    for p in [bdir, *bdir.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if scratch is not None and scratch.identity.separated:
            os.chown(p, scratch.identity.uid, scratch.identity.gid)


def run_untrusted(cmd: list[str], cwd: Path, scratch: Scratch | None, timeout_s: float) -> tuple[int, str]:
    """Run a compiler as the grade's untrusted identity (with its environment) in `cwd`: (exit status, output with
    the machine's directories replaced; -1 on a timeout, its whole process group killed)."""
    env = scratch.env(trusted=False) if scratch is not None else dict(os.environ)
    who: dict[str, Any] = dict(scratch.identity.popen_kwargs()) if scratch is not None else {}
    scrub = [(str(cwd), "")] + ([(str(scratch.root), "<scratch>/")] if scratch is not None else [])
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,
        **who,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        return -1, _scrub(out[:200_000], scrub) + f"\n{Path(cmd[0]).name} timed out after {timeout_s:g} s"
    return proc.returncode, _scrub(out[:200_000], scrub)


def _stage(build_dir: Path, src_name: str, source: str) -> Path:
    """The layer's files and the rewritten source, in the (untrusted) build directory."""
    shutil.copytree(LAYER, build_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    unit = build_dir / (src_name + ".cpp")
    # #line keeps every diagnostic, and every sanitizer report, on the student's file and line.
    unit.write_text(f'#line 1 "{src_name}"\n' + rewrite_launches(source))
    return unit


def build_cpu(
    src: Path,
    *,
    entry: str,
    out_name: str = HARNESS,
    scratch: Scratch | None,
    build_dir: Path | None = None,
    timeout_s: float = 180.0,
    nvcc_ok: bool = True,
) -> CpuBuild:
    """Build `src` into the CPU harness. Never raises for a bad source. With `scratch`, the compiler runs as the
    grade's untrusted identity in its home (build/cpu) and the harness is copied into its libs/; without one (tests)
    it runs as this process in `build_dir`. nvcc_ok: nvcc compiled this source, so a failure to compile it here is
    the layer's limit, not the student's error."""
    t0 = time.monotonic()
    cxx = find_compiler()
    if cxx is None:
        return CpuBuild(State.NO_COMPILER, None, how_to_get_a_compiler())
    source = src.read_text(errors="replace")
    bdir = fresh_dir(scratch, build_dir)
    unit = _stage(bdir, src.name, source)
    give_to_untrusted(bdir, scratch)
    name = Path(cxx).name

    def run(args: list[str]) -> tuple[int, str]:
        return run_untrusted([cxx, *args], bdir, scratch, max(1.0, timeout_s - (time.monotonic() - t0)))

    common = [*BASE, "-Iinclude", "-I.", "-include", "cuda_cpu.h", f"-DCUDACPU_ENTRY={entry}"]
    try:
        rc, log = run([*common, "-DCUDACPU_SCAN", "-E", "-o", "unit.i", unit.name])
        if rc == 0:
            uses = unsupported((bdir / "unit.i").read_text(errors="replace")[:20_000_000], src.name)
            if uses:
                return CpuBuild(
                    State.NEEDS_GPU,
                    None,
                    "needs a GPU: the CPU layer cannot run " + "; ".join(uses) + " faithfully",
                    name,
                    constructs=uses,
                    seconds=time.monotonic() - t0,
                )
        link = [unit.name, "harness.cpp", "-o", "harness" + EXE]
        rc, log = run([*common, *SANITIZE, *link])
        sanitized = rc == 0
        if rc != 0:
            rc_plain, _ = run([*common, *link])  # the sanitizers' runtimes may be what is missing
            if rc_plain != 0:
                errs = error_lines(log) or log.strip().splitlines()[-20:]
                if nvcc_ok:
                    return CpuBuild(
                        State.NEEDS_GPU,
                        None,
                        "needs a GPU: nvcc compiles it, but the CPU layer cannot (it uses CUDA the layer does not "
                        f"provide); {name} says:\n" + "\n".join(errs),
                        name,
                        seconds=time.monotonic() - t0,
                    )
                return CpuBuild(
                    State.FAILED, None, f"does not compile for the CPU; {name} says:\n" + "\n".join(errs), name
                )
        data = _read_output(bdir / ("harness" + EXE))
    except OSError as e:
        return CpuBuild(State.NEEDS_GPU, None, f"needs a GPU: could not run {name}: {e.strerror or e}", name)
    dst = (scratch.libs if scratch is not None else bdir) / (out_name + EXE)
    dst.write_bytes(data)
    os.chmod(dst, 0o755)
    runtimes = "compiler-rt (Debian/Ubuntu: libclang-rt-NN-dev)" if "clang" in name else "libasan and libubsan"
    how = "with AddressSanitizer and UBSan" if sanitized else f"WITHOUT sanitizers (install {runtimes} for them)"
    return CpuBuild(
        State.OK,
        dst,
        f"built for the CPU with {name} {how}",
        name,
        sanitized=sanitized,
        seconds=time.monotonic() - t0,
    )
