"""Build a CUDA source for the CPU: the trusted half of the CUDA-on-CPU layer (grader/child/cudacpu/).

The build, as the grade's untrusted identity in its scratch: the one-program check (grader/cuda/cudacpu_program.py),
the launches rewritten and the preprocessed unit scanned for what the layer cannot run (grader/cuda/cudacpu_source.py),
then the unit compiled with the layer's header forced in and linked into the harness, with the sanitizers where their
runtimes exist. Also the compute-sanitizer harness (nvcc). Why a layer of our own, the steps and the platforms:
docs/architecture.md ("The CUDA-on-CPU layer").
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader import textscan
from grader.cuda import build, cudacpu_program, runner
from grader.cuda.build import (
    MAX_SOURCE_BYTES,
    BuildFor,
    BuildRequest,
    PartBuild,
    State,
    _read_output,
    _scrub,
    error_lines,
)
from grader.cuda.cudacpu_program import CUDA_HEADERS, GPU_GRADES_IT, STD_HEADERS, ident_char
from grader.cuda.cudacpu_source import MAX_UNIT_BYTES, rewrite_launches, unsupported

if TYPE_CHECKING:
    from grader.identity import Scratch

LAYER = Path(__file__).resolve().parents[1] / "child" / "cudacpu"
SANITIZE = ("-fsanitize=address,undefined,alignment", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")
# g++ on an ELF platform: cudacpu.h puts the __device__ and __constant__ variables, and only them, in .noinit and
# .persistent; this link script (INSERT: the default script does the rest) gathers both sections between two symbols
# on 64 KiB boundaries (every page size of Linux's platforms divides it), pages of their own that host code cannot
# touch between launches (grader/child/cudacpu/device_memory.h). It is written into each build directory (_stage):
# the layer's folder ships only the file kinds the image, the wheel and the handout list. -fsanitize-sections keeps
# those variables AddressSanitizer's globals (an access past a __device__ array is reported, and a host access names
# the variable), which a variable in an explicit section otherwise is not.
DEVICE_VARIABLES_SCRIPT_NAME = "cudacpu_device.ld"
DEVICE_VARIABLES_SCRIPT = """SECTIONS
{
  .cudacpu_device :
  {
    . = ALIGN(65536);
    cudacpu_device_begin = .;
    *(.noinit .noinit.*)
    *(.persistent .persistent.*)
    . = ALIGN(65536);
    cudacpu_device_end = .;
  }
}
INSERT AFTER .data;
"""
DEVICE_VARIABLES_LINK = (f"-Wl,-T,{DEVICE_VARIABLES_SCRIPT_NAME}",)
DEVICE_VARIABLES_SANITIZE = ("-fsanitize-sections=.noinit,.persistent",)
BASE = ("-std=c++17", "-O1", "-g", "-w", "-pthread")
HARNESS = "kernel.cpu"  # the built executable's default name in the scratch's libs/ (the pipeline names it per part)
EXE = ".exe" if sys.platform == "win32" else ""  # what MinGW's g++ (and nvcc on Windows) add to an executable's name


# What a student reads beside every CUDA correctness result earned on the CPU.
CPU_NOTE = (
    "run on this CPU by the grader's CUDA-on-CPU layer (AddressSanitizer and UBSan on, the grid run in three "
    "orders); these correctness points count as on a GPU, and the GPU grade re-checks everything"
)


@dataclass
class CpuBuild:
    """The old record of build_cpu (kept while callers move to PartBuild); State is grader/cuda/build.py's."""

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


# -- the layer's own macros (what one_program checks a source against) ------------------------------------------


_layer_macro_cache: dict[tuple[str, float], frozenset[str]] = {}


def layer_macros(cxx: str) -> frozenset[str] | None:
    """Every macro the layer's build defines before and around the student's code: the compiler's predefined ones
    (with the layer's flags, sanitizers included) and those of the layer's header and of every header a kernel may
    include. Staff files only, run as the grader and cached per compiler; None when the compiler cannot list them."""
    key = (cxx, os.stat(cxx).st_mtime) if os.path.exists(cxx) else (cxx, 0.0)
    if key in _layer_macro_cache:
        return _layer_macro_cache[key]
    with tempfile.TemporaryDirectory(prefix="cudacpu-macros-") as tmp:
        probe = Path(tmp) / "probe.cpp"
        probe.write_text(
            "".join(f"#if __has_include(<{h}>)\n#include <{h}>\n#endif\n" for h in sorted(STD_HEADERS | CUDA_HEADERS))
        )
        flags = [*BASE, f"-I{LAYER / 'include'}", f"-I{LAYER}", "-include", "cudacpu.h", "-dM", "-E", probe.name]
        done = None
        # With the sanitizers' flags first (their macros are the build's); a compiler that refuses them (MSYS2's
        # g++) builds without them, and is asked without them.
        for sanitize in (SANITIZE, ()):
            try:
                done = runner.run([cxx, *sanitize, *flags], cwd=tmp, timeout_s=120.0, limit=8 << 20)
            except OSError:
                return None
            if done.returncode == 0 and not done.truncated:
                break
        else:
            return None
    assert done is not None
    names = set()
    for line in done.output.splitlines():
        if line.startswith("#define "):
            rest = line[len("#define ") :]
            end = 0
            while end < len(rest) and ident_char(rest[end]):
                end += 1
            names.add(rest[:end])
    found = frozenset(names)
    _layer_macro_cache[key] = found
    return found


# -- the build -------------------------------------------------------------------------------------------------


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


def _run_step(cmd: list[str], cwd: Path, scratch: Scratch | None, timeout_s: float) -> tuple[int, str]:
    """One compiler step of a harness build, through the one runner (grader/cuda/runner.py) as the grade's untrusted
    identity in `cwd`: (exit status, -1 on a timeout, its whole process group killed; output with the machine's
    directories replaced, and a line on a timeout)."""
    ran = runner.run(cmd, cwd=cwd, timeout_s=timeout_s, scratch=scratch)
    scrub = [(str(cwd), "")] + ([(str(scratch.root), "<scratch>/")] if scratch is not None else [])
    if ran.returncode is None:
        return -1, _scrub(ran.output, scrub) + f"\n{Path(cmd[0]).name} timed out after {timeout_s:g} s"
    return ran.returncode, _scrub(ran.output, scrub)


def _stage(build_dir: Path, src_name: str, source: str) -> Path:
    """The layer's files and the rewritten source, in the (untrusted) build directory."""
    shutil.copytree(LAYER, build_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (build_dir / DEVICE_VARIABLES_SCRIPT_NAME).write_text(DEVICE_VARIABLES_SCRIPT)
    unit = build_dir / (src_name + ".cpp")
    # #line keeps every diagnostic, and every sanitizer report, on the student's file and line.
    # The layer's own macros (its entry point's name, the scan's switch) are undefined before the student's first
    # line: the student's file sees only what it would see under nvcc (one_program refuses the rest).
    undefs = "".join(f"#undef {m}\n" for m in ("CUDACPU_ENTRY", "CUDACPU_SCAN", *SIGNATURE_MACROS))
    unit.write_text(f'{undefs}#line 1 "{src_name}"\n' + rewrite_launches(source))
    return unit


# The entry point's signature, as the harnesses' translation unit gets it (grader/child/cudacpu/protocol.h): how many
# input pointers, output pointers and int64 shape arguments (rows, out_cols, each input's row stride) it takes.
SIGNATURE_MACROS = ("CUDACPU_INPUTS", "CUDACPU_OUTPUTS", "CUDACPU_SCALARS")


def signature_flags(inputs: int) -> list[str]:
    """-D flags for a harness whose entry follows the spec's `inputs` (grader/child/cuda_abi.py): one output, and the
    shape arguments rows, out_cols and one row stride per input."""
    if not 1 <= inputs <= 15:
        raise ValueError(f"the CUDA harnesses take 1 to 15 inputs, not {inputs}")
    return [f"-DCUDACPU_INPUTS={inputs}", "-DCUDACPU_OUTPUTS=1", f"-DCUDACPU_SCALARS={inputs + 2}"]


def build_cpu(
    src: Path,
    *,
    entry: str,
    out_name: str = HARNESS,
    scratch: Scratch | None,
    build_dir: Path | None = None,
    timeout_s: float = 180.0,
    nvcc_ok: bool = True,
    inputs: int = 1,
) -> CpuBuild:
    """build_cpu_layer under its old name and record (kept while callers move to grader/cuda/part.py's build_part)."""
    req = BuildRequest(
        src, "", entry, inputs, timeout_s, scratch, nvcc_ok=nvcc_ok, build_dir=build_dir, out_name=out_name
    )
    b = build_cpu_layer(req)
    return CpuBuild(b.state, b.artifact, b.text, b.compiler, b.sanitized, b.constructs, b.seconds)


def build_cpu_layer(req: BuildRequest) -> PartBuild:
    """Build `req.src` into the CPU harness (req.harness_name(), +EXE). Never raises for a bad source. With a
    scratch, the compiler runs as the grade's untrusted identity in a fresh directory of its root and the harness is
    copied into its libs/; without one (tests) it runs as this process in `req.build_dir`. req.nvcc_ok: nvcc compiled
    this source, so a failure to compile it here is the layer's limit, not the student's error."""
    t0 = time.monotonic()
    src = req.src

    def done(state: State, text: str, compiler: str = "", constructs: list[str] | None = None) -> PartBuild:
        return PartBuild(
            BuildFor.CPU_LAYER, state, None, text, time.monotonic() - t0, compiler, constructs=constructs or []
        )

    cxx = find_compiler()
    if cxx is None:
        return done(State.NO_COMPILER, how_to_get_a_compiler())
    source, too_big = textscan.read_capped(src, MAX_SOURCE_BYTES)
    if too_big:
        return done(State.FAILED, f"{src.name} is larger than {MAX_SOURCE_BYTES >> 20} MiB: not built")
    name = Path(cxx).name
    # One program (grader/cuda/cudacpu_program.py): a file that could tell this build from nvcc's earns nothing here.
    refused = _refusal(source, src.name, cxx)
    if refused is not None:
        return done(State.NEEDS_GPU, "needs a GPU: " + refused, name, [refused])
    bdir = fresh_dir(req.scratch, req.build_dir)
    unit = _stage(bdir, src.name, source)
    give_to_untrusted(bdir, req.scratch)

    def run(args: list[str]) -> tuple[int, str]:
        return _run_step([cxx, *args], bdir, req.scratch, max(1.0, req.timeout_s - (time.monotonic() - t0)))

    common = [*BASE, "-Iinclude", "-I.", "-include", "cudacpu.h", f"-DCUDACPU_ENTRY={req.entry}"]
    common += signature_flags(req.inputs)
    try:
        uses = _scan_unit(run, common, unit, src.name)
        if uses:
            return done(
                State.NEEDS_GPU, f"needs a GPU: the CPU layer cannot run {'; '.join(uses)} faithfully", name, uses
            )
        sanitized, errs = _link(run, common, unit, device_variables_protected(cxx))
        if errs is not None and req.nvcc_ok:
            return done(
                State.NEEDS_GPU,
                "needs a GPU: nvcc compiles it, but the CPU layer cannot (it uses CUDA the layer does not "
                f"provide); {name} says:\n" + "\n".join(errs),
                name,
            )
        if errs is not None:
            return done(State.FAILED, f"does not compile for the CPU; {name} says:\n" + "\n".join(errs), name)
        data = _read_output(bdir / ("harness" + EXE))
    except OSError as e:
        return done(State.NEEDS_GPU, f"needs a GPU: could not run {name}: {e.strerror or e}", name)
    dst = (req.scratch.libs if req.scratch is not None else bdir) / (req.harness_name(BuildFor.CPU_LAYER) + EXE)
    dst.write_bytes(data)
    os.chmod(dst, 0o755)
    runtimes = "compiler-rt (Debian/Ubuntu: libclang-rt-NN-dev)" if "clang" in name else "libasan and libubsan"
    how = "with AddressSanitizer and UBSan" if sanitized else f"WITHOUT sanitizers (install {runtimes} for them)"
    text = f"built for the CPU with {name} {how}"
    return PartBuild(BuildFor.CPU_LAYER, State.OK, dst, text, time.monotonic() - t0, name, sanitized=sanitized)


def _refusal(source: str, filename: str, cxx: str) -> str | None:
    """one_program's verdict against the layer's own macros; a refusal when the compiler cannot list them."""
    macros = layer_macros(cxx)
    if macros is None:
        return (
            f"{filename}: {Path(cxx).name} could not list its predefined macros, so the CPU layer cannot check that "
            f"it builds what nvcc builds; {GPU_GRADES_IT}"
        )
    return cudacpu_program.one_program(source, filename, macros)


def _scan_unit(run: Callable[[list[str]], tuple[int, str]], common: list[str], unit: Path, filename: str) -> list[str]:
    """Preprocess the unit (in the build directory) and list what of the student's lines the layer cannot run."""
    rc, _ = run([*common, "-DCUDACPU_SCAN", "-E", "-o", "unit.i", unit.name])
    if rc != 0:
        return []  # the compile below says why
    unit_text, cut = textscan.read_capped(unit.parent / "unit.i", MAX_UNIT_BYTES)  # capped before it is read
    too_big = [f"a preprocessed unit of more than {MAX_UNIT_BYTES} bytes (not scanned past that)"] if cut else []
    return unsupported(unit_text, filename) + too_big


def device_variables_protected(cxx: str) -> bool:
    """Whether this compiler's build puts the __device__ / __constant__ variables in pages of their own: g++ (not
    clang, which has no variable-only section attribute) on Linux (ELF, a GNU-compatible linker that takes INSERT).
    Elsewhere they stay ordinary host memory (docs/SECURITY.md, the CPU layer's limits)."""
    if not sys.platform.startswith("linux"):
        return False
    macros = layer_macros(cxx)
    return macros is not None and "__GNUC__" in macros and "__clang__" not in macros and "__ELF__" in macros


def _link(
    run: Callable[[list[str]], tuple[int, str]], common: list[str], unit: Path, device_variables: bool = False
) -> tuple[bool, list[str] | None]:
    """Compile and link the unit into the harness, with the sanitizers, else without (their runtimes may be what is
    missing): (sanitized, None), or (False, the first attempt's error lines) when neither built. device_variables:
    link the __device__ variables into pages of their own (device_variables_protected)."""
    link = [unit.name, "harness.cpp", "-o", "harness" + EXE, *(DEVICE_VARIABLES_LINK if device_variables else ())]
    sanitize = [*SANITIZE, *(DEVICE_VARIABLES_SANITIZE if device_variables else ())]
    rc, log = run([*common, *sanitize, *link])
    if rc == 0:
        return True, None
    rc_plain, _ = run([*common, *link])
    if rc_plain == 0:
        return False, None
    return False, error_lines(log) or log.strip().splitlines()[-20:]


# -- the compute-sanitizer harness (grader/correctness/sanitizer.py runs it) ----------------------------------------


def build_sanitizer_harness(req: BuildRequest) -> PartBuild:
    """The GPU harness (grader/child/cudacpu/gpu_harness.cu linked with the student's file by nvcc) in the scratch's
    libs/ as req.harness_name() (+EXE); without a scratch (tests) built in `req.build_dir` as this process. On a
    failure its text is the failing step's log (PartBuild.errors() is what to show)."""
    t0 = time.monotonic()
    nvcc = build.find_nvcc()
    if nvcc is None:
        return PartBuild(BuildFor.SANITIZER, State.NO_COMPILER, None, build.NVCC_MISSING, time.monotonic() - t0)
    src, scratch = req.src, req.scratch
    bdir = fresh_dir(scratch, req.build_dir)
    shutil.copyfile(src, bdir / src.name)
    shutil.copyfile(LAYER / "gpu_harness.cu", bdir / "gpu_harness.cu")
    shutil.copyfile(LAYER / "protocol.h", bdir / "protocol.h")
    give_to_untrusted(bdir, scratch)
    flags = ["-O3", "-std=c++17", "-lineinfo", f"-arch={req.arch or build.DEFAULT_ARCH}"]
    # Three steps, so that the entry point's name reaches the harness's translation unit only: compiled together
    # with -D, the student's file could test CUDACPU_ENTRY and be another program under the sanitizer than in the
    # graded build: the sanitizer must check the one program that was graded.
    steps = [
        [nvcc, *flags, "-c", src.name, "-o", "student.o"],
        [nvcc, *flags, f"-DCUDACPU_ENTRY={req.entry}", *signature_flags(req.inputs), "-c", "gpu_harness.cu"]
        + ["-o", "gpu_harness.o"],
        [nvcc, *flags, "student.o", "gpu_harness.o", "-o", "harness" + EXE],
    ]
    for cmd in steps:
        rc, log = _run_step(cmd, bdir, scratch, req.timeout_s)
        if rc != 0:
            return PartBuild(BuildFor.SANITIZER, State.FAILED, None, log, time.monotonic() - t0, "nvcc")
    dst = (scratch.libs if scratch is not None else bdir) / (req.harness_name(BuildFor.SANITIZER) + EXE)
    dst.write_bytes(_read_output(bdir / ("harness" + EXE)))
    dst.chmod(0o755)
    text = "built with nvcc for compute-sanitizer"
    return PartBuild(BuildFor.SANITIZER, State.OK, dst, text, time.monotonic() - t0, "nvcc")
