"""Build a CUDA source file (a student's glu_cuda.cu or the staff solution) into a shared library with nvcc, and the
record every CUDA build returns (grader/cuda/part.py is the one build step that dispatches to this and the CPU
layer's builds, grader/cuda/cudacpu.py).

Why: docs/architecture.md, "Modules: the why", grader/cuda/build.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from grader import identity, textscan
from grader.child.launches import ARCH
from grader.cuda import runner

if TYPE_CHECKING:
    from grader.identity import Scratch

DEFAULT_ARCH = f"sm_{ARCH}"  # the course GPUs' architecture, in one place: grader/child/launches.py
BASE_FLAGS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo")
NVCC_MISSING = "nvcc not found: install the CUDA toolkit or set CUDA_HOME"
_TMP_SUFFIX = ".tmp.so"


# -- the record of a build ------------------------------------------------------------------------------------------


class BuildFor(StrEnum):
    """What a CUDA part is built into."""

    LIBRARY = "library"  # nvcc: the shared library the torch binding loads on a GPU (cached by content)
    CPU_LAYER = "cpu layer"  # g++/clang++: the CUDA-on-CPU layer's harness, for a machine without a GPU
    SANITIZER = "sanitizer"  # nvcc: the harness compute-sanitizer runs, exact-size buffers


class State(StrEnum):
    OK = "ok"
    NO_COMPILER = "no compiler"  # no nvcc (LIBRARY, SANITIZER) or no g++ / clang++ (CPU_LAYER) here
    NEEDS_GPU = "needs a GPU"  # uses what the CPU layer cannot run faithfully, or what it does not know
    FAILED = "failed"  # does not compile (for the CPU layer: as C++, and there was no nvcc to say it is valid CUDA)


@dataclass(frozen=True)
class BuildRequest:
    """What to build: one CUDA part's source, for one grade."""

    src: Path  # the .cu file (read with a cap)
    part: str  # the part's name (the spec's implementation): names the harness, <part>.cpu / <part>.sanitizer
    entry: str  # the spec's entry symbol (the harnesses call it)
    inputs: int = 1  # how many inputs the spec's entry takes (the harnesses' signature)
    timeout_s: float = 180.0  # the whole build's limit (the spec's limits.build_s)
    scratch: Scratch | None = None  # the grade's: compilers run as its untrusted uid; None only in tests
    arch: str | None = None  # a real architecture such as "sm_90" (None: DEFAULT_ARCH)
    cache_dir: Path | None = None  # LIBRARY: where libraries are cached (None: default_cache_dir())
    nvcc_ok: bool = True  # CPU_LAYER: nvcc compiled it, so a failure here is the layer's limit, not the student's
    build_dir: Path | None = None  # the harnesses' build directory without a scratch (tests)
    out_name: str | None = None  # the harness's file name in libs/ (None: <part>.cpu, <part>.sanitizer)

    def harness_name(self, built: BuildFor) -> str:
        """The harness's file name in libs/ (before EXE): out_name, else <part>.cpu or <part>.sanitizer."""
        if self.out_name is not None:
            return self.out_name
        return f"{self.part}.{'cpu' if built == BuildFor.CPU_LAYER else built.value}"


@dataclass
class PartBuild:
    """What a build of a CUDA part left, whatever it was built for."""

    built: BuildFor
    state: State
    artifact: Path | None  # the library (in the cache) or the harness executable (in the scratch's libs/), when OK
    text: str  # for the student, machine paths replaced: nvcc's log (LIBRARY, SANITIZER) or, for the CPU layer,
    # what was built and how, or why not
    seconds: float
    compiler: str = ""  # "nvcc", "g++", "clang++" (empty when there was none)
    cached: bool = False  # LIBRARY: the library came from the cache
    sanitized: bool = False  # CPU_LAYER: built with AddressSanitizer and UBSan
    constructs: list[str] = field(default_factory=list)  # CPU_LAYER: "__syncthreads (glu_cuda.cu:42)", ...
    command: list[str] = field(default_factory=list)  # LIBRARY: the nvcc command, with machine paths replaced

    @property
    def ok(self) -> bool:
        return self.state == State.OK

    def errors(self) -> str:
        """The log's error lines (with the source lines quoted under them), else its last 20 lines: what a report
        shows of a failed build."""
        return "\n".join(error_lines(self.text) or self.text.strip().splitlines()[-20:])


@dataclass
class BuildResult:
    """The old record of build_cuda (kept while callers move to PartBuild)."""

    ok: bool
    lib: Path | None  # the built (or cached) library; None when the build failed
    log: str  # nvcc's output with machine paths replaced; safe to show to students
    seconds: float
    cached: bool
    command: list[str] = field(default_factory=list)  # the nvcc command, with machine paths replaced


def find_nvcc() -> str | None:
    """nvcc from PATH, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc; None if none is executable."""
    found = shutil.which("nvcc")
    if found:
        return found
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc")
    candidates.append(Path("/usr/local/cuda/bin/nvcc"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def nvcc_flags(arch: str | None) -> list[str]:
    """The flags every build uses; `arch` is a real architecture such as "sm_90" (None: DEFAULT_ARCH)."""
    return [*BASE_FLAGS, f"-arch={arch or DEFAULT_ARCH}"]


# The grader's cache root lives in grader/identity.py (which also keeps the uid pool's locks under it); the name
# stays here for the build's callers.
default_cache_dir = identity.default_cache_dir


def gpu_arch() -> str | None:
    """ "sm_XY" for the current CUDA device, or None when torch sees no GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


_version_cache: dict[tuple[str, float], str] = {}


def nvcc_version(nvcc: str) -> str:
    """`nvcc --version` output (part of the cache key: a new compiler must not reuse old libraries)."""
    key = (nvcc, os.stat(nvcc).st_mtime)
    if key not in _version_cache:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=True)
        _version_cache[key] = out.stdout
    return _version_cache[key]


def cache_key(source: bytes, flags: list[str], version: str) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags).encode(), version.encode()):
        h.update(len(part).to_bytes(8, "little"))  # length-prefixed, so the parts cannot run into each other
        h.update(part)
    return h.hexdigest()[:32]


def _scrub(text: str, replacements: list[tuple[str, str]]) -> str:
    """Replace machine directories in nvcc output (longest first, so nested directories go first). Linear in the
    text: str.replace, and _strip_tmpxft over each whitespace-free run."""
    for old, new in sorted(replacements, key=lambda p: -len(p[0])):
        if old and old not in ("/", "."):
            text = text.replace(old.rstrip("/") + "/", new)
    # nvcc's intermediate files (/tmp/tmpxft_...) can appear in host-compiler messages.
    if _TMPXFT not in text:
        return text
    return "".join(_strip_tmpxft(run) if _TMPXFT in run else run for run in _SPACES.split(text))


_TMPXFT = "/tmpxft_"
_SPACES = re.compile(r"(\s+)")  # one character class, kept by the split: cannot backtrack
_TMP_NAME = re.compile(r"[\w.-]+")  # one character class, matched at one position
_PATH_BREAK = re.compile(r"[\w.]")  # a '/' after one of these does not start a path


def _strip_tmpxft(run: str) -> str:
    r"""In one whitespace-free run, `<...>/dir/tmpxft_0001-6.cpp1.ii` -> `<...>tmpxft_0001-6.cpp1.ii`: the directories
    from the first path start (a '/' after neither a word character nor '.') through the last `/tmpxft_<name>`.
    This is what `re.sub(r"(?<![\w.])/\S*/(tmpxft_[\w.-]+)", r"\1", text)` did, but that pattern backtracks over
    `\S*` from every '/' and took minutes on a log of slashes; here each character is looked at a bounded number of
    times."""
    q = len(run)
    while True:
        q = run.rfind(_TMPXFT, 0, q)
        if q < 0:
            return run
        name = _TMP_NAME.match(run, q + 1 + len("tmpxft_"))
        if name is not None:
            break
    p = run.find("/", 0, q)  # the path's first '/': before q (the pattern has a '/' before `\S*/tmpxft_`)
    while p > 0 and _PATH_BREAK.match(run, p - 1):
        p = run.find("/", p + 1, q)
    if p < 0:
        return run  # no '/' before q starts a path: neither does one before an earlier `/tmpxft_`
    return run[:p] + run[q + 1 :]


def _sweep_stale_temps(cache_dir: Path, older_than_s: float) -> None:
    """Remove temporaries left by killed builds. Only old ones: a young one may belong to a live build."""
    now = time.time()
    for p in cache_dir.glob(f"*{_TMP_SUFFIX}"):
        try:
            if now - p.stat().st_mtime > older_than_s:
                p.unlink()
        except OSError:
            pass  # raced with its owner or another sweeper; either way it is not ours to worry about


MAX_LIB_BYTES = 256 * 1024 * 1024
MAX_SOURCE_BYTES = 16 * 1024 * 1024  # a submission's whole size cap (grader/identity.py); a kernel is a few kB
MAX_LOG_BYTES = runner.MAX_LOG_BYTES  # of a compiler's output (grader/cuda/runner.py)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cached(lib: Path) -> bool:
    """A cached library counts only if its bytes still hash to what was recorded when it was built."""
    try:
        want = lib.with_suffix(".sha256").read_text().strip()
        return lib.is_file() and _digest(lib.read_bytes()) == want
    except OSError:
        return False


def _read_output(path: Path) -> bytes:
    """The library nvcc wrote, read without following links (the build directory belongs to the untrusted uid,
    which could have put a link to a file only the grader may read there)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or st.st_size > MAX_LIB_BYTES:
            raise OSError(f"not a plain library file of at most {MAX_LIB_BYTES >> 20} MiB")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_LIB_BYTES + 1)
    finally:
        os.close(fd)


def build_cuda(
    src: Path, *, cache_dir: Path, arch: str | None = None, timeout_s: float = 180.0, scratch: Scratch | None = None
) -> BuildResult:
    """build_library under its old name and record (kept while callers move to grader/cuda/part.py's build_part)."""
    b = build_library(
        BuildRequest(Path(src), "", "", timeout_s=timeout_s, scratch=scratch, arch=arch, cache_dir=Path(cache_dir))
    )
    return BuildResult(b.ok, b.artifact, b.text, b.seconds, b.cached, b.command)


def build_library(req: BuildRequest) -> PartBuild:
    """Compile `req.src` into `<cache_dir>/<key>.so`, or return the cached library. Never raises for bad sources.

    With a scratch (a grade's, grader/identity.py), nvcc runs as the grade's untrusted identity in its build
    directory, with its environment: an `#include` of a file the grader can read but the student cannot fails.
    The library is then copied into the cache by this (trusted) process with its SHA-256 beside it, and a cached
    library whose bytes no longer match is rebuilt."""
    start = time.monotonic()
    src = req.src.resolve()
    flags = nvcc_flags(req.arch)

    def result(
        state: State, lib: Path | None, log: str, cached: bool = False, shown: list[str] | None = None
    ) -> PartBuild:
        compiler = "" if state == State.NO_COMPILER else "nvcc"
        seconds = time.monotonic() - start
        return PartBuild(BuildFor.LIBRARY, state, lib, log, seconds, compiler, cached, command=shown or [])

    nvcc = find_nvcc()
    if nvcc is None:
        return result(State.NO_COMPILER, None, NVCC_MISSING)
    source, why = _source_or_why(src)
    if why is not None:
        return result(State.FAILED, None, why)
    try:
        version = nvcc_version(nvcc)
    except (OSError, subprocess.SubprocessError) as e:
        return result(State.FAILED, None, f"nvcc found but `nvcc --version` failed: {e}")
    key = cache_key(source, flags, version)
    lib = _cache_dir(req.cache_dir) / f"{key}.so"
    shown = ["nvcc", *flags, "-o", f"<cache>/{key}.so", src.name]
    if _cached(lib):
        return result(State.OK, lib, f"cached: {key}.so", True, shown)
    job = _Job(src, source, lib, [nvcc, *flags], req.timeout_s)
    ok, log = _compile_untrusted(job, req.scratch) if req.scratch is not None else _compile_trusted(job)
    return result(State.OK if ok else State.FAILED, lib if ok else None, log, False, shown)


def _source_or_why(src: Path) -> tuple[bytes, str | None]:
    """(the source's bytes, None), or (b"", why it is not built): unreadable, or larger than MAX_SOURCE_BYTES."""
    try:
        source, too_big = textscan.read_capped_bytes(src, MAX_SOURCE_BYTES)
    except OSError as e:
        return b"", f"cannot read {src.name}: {e.strerror}"
    if too_big:
        return b"", f"{src.name} is larger than {MAX_SOURCE_BYTES >> 20} MiB: not built (make it smaller)"
    return source, None


def _cache_dir(cache_dir: Path | None) -> Path:
    """The cache directory, made, and written only by the grader: no other user may plant a library under a key."""
    path = Path(cache_dir if cache_dir is not None else default_cache_dir()).resolve()
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path, 0o700)
    except OSError:
        pass
    return path


@dataclass(frozen=True)
class _Job:
    """One library build's fixed inputs."""

    src: Path
    source: bytes
    lib: Path  # where it is published in the cache: <cache_dir>/<key>.so
    nvcc: list[str]  # nvcc and its flags
    timeout_s: float


def _then(log: str, line: str) -> str:
    return (log + "\n" if log else "") + line


def _verdict(ran: runner.Ran, scrub: list[tuple[str, str]], timeout_s: float) -> tuple[str, str | None]:
    """(nvcc's log with machine paths replaced, the line that says why it failed, or None when it exited 0)."""
    log = _scrub(ran.output, scrub).rstrip()
    if ran.timed_out:
        return log, f"nvcc timed out after {timeout_s:g} s"
    if ran.returncode != 0:
        return log, f"nvcc failed with exit status {ran.returncode}"
    return log, None


def _compile_trusted(job: _Job) -> tuple[bool, str]:
    """nvcc as this process, writing a temporary in the cache directory: (built, log)."""
    cache_dir = job.lib.parent
    _sweep_stale_temps(cache_dir, older_than_s=2 * job.timeout_s + 60)
    fd, tmp_name = tempfile.mkstemp(prefix=f"{job.lib.stem}.", suffix=_TMP_SUFFIX, dir=cache_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    # Run in the source's directory and name the source by its basename, so nvcc's diagnostics read
    # `glu_cuda.cu(42): error: ...`; _scrub catches any absolute path that still slips through.
    command = [*job.nvcc, "-o", str(tmp), job.src.name]
    scrub = [(str(job.src.parent), ""), (str(cache_dir), "<cache>/"), (tempfile.gettempdir(), "<tmp>/")]
    try:
        ran = runner.run(command, cwd=job.src.parent, timeout_s=job.timeout_s)
        log, failed = _verdict(ran, scrub, job.timeout_s)
        if failed is None and (not tmp.is_file() or tmp.stat().st_size == 0):
            failed = f"nvcc failed with exit status {ran.returncode}"
        if failed is not None:
            return False, _then(log, failed)
        _publish(job.lib, _read_output(tmp))
        return True, log
    except OSError as e:
        return False, f"could not run nvcc: {e.strerror or e}"
    finally:
        tmp.unlink(missing_ok=True)


def _publish(lib: Path, data: bytes) -> None:
    """Write a library into the cache atomically, with its hash (written first: a library never lacks one)."""
    fd, tmp = tempfile.mkstemp(prefix=f"{lib.stem}.", suffix=_TMP_SUFFIX, dir=lib.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    lib.with_suffix(".sha256").write_text(_digest(data) + "\n")
    os.replace(tmp, lib)


def _compile_untrusted(job: _Job, scratch: Scratch) -> tuple[bool, str]:
    """nvcc as the grade's untrusted identity in its build directory; the library read back without following links
    and published by this process: (built, log)."""
    build_dir = scratch.home / "build"
    staged = build_dir / job.src.name
    staged.write_bytes(job.source)
    os.chmod(staged, 0o644)
    out = build_dir / "out.so"
    command = [*job.nvcc, "-o", out.name, job.src.name]
    scrub = [(str(build_dir), ""), (str(scratch.root), "<scratch>/"), (str(job.src.parent), "")]
    try:
        ran = runner.run(command, cwd=build_dir, timeout_s=job.timeout_s, scratch=scratch)
        log, failed = _verdict(ran, scrub, job.timeout_s)
        if failed is not None:
            return False, _then(log, failed)
        try:
            data = _read_output(out)
        except OSError as e:
            return False, _then(log, f"nvcc produced no usable library ({e})")
        _publish(job.lib, data)
        return True, log
    except OSError as e:
        return False, f"could not run nvcc: {e.strerror or e}"
    finally:
        for p in (staged, out):
            try:
                p.unlink()
            except OSError:
                pass


# `file(42): error: ...` (nvcc's front end), `file:42:7: error: ...` (the host compiler), ptxas and nvcc's own
# fatal errors, and link errors.
#
# These run on a capped log (MAX_LOG_BYTES), one line at a time, and cannot backtrack super-linearly: each
# alternative starts at a fixed character ('(', ':', or the line's start) and is then a run of digits followed by a
# character that is not a digit, so an attempt ends within the digit runs next to its start.
_ERROR_RE = re.compile(
    r"(\(\d+\): (catastrophic )?error\b)|(:\d+(:\d+)?: (fatal )?error\b)|^ptxas (fatal|error)|^nvcc (fatal|error)"
    r"|undefined reference|^nvcc timed out|^nvcc not found"
)
_CONTEXT_RE = re.compile(r"^\s+\S")  # the source line (and caret line) nvcc prints under an error


def error_lines(log: str, limit: int = 20) -> list[str]:
    """The error lines of a build log, each followed by the source line(s) nvcc quotes under it, for reports."""
    lines = log.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines) and len(out) < limit:
        if _ERROR_RE.search(lines[i]):
            out.append(lines[i].rstrip())
            j = i + 1
            while j < len(lines) and j <= i + 2 and _CONTEXT_RE.match(lines[j]) and not _ERROR_RE.search(lines[j]):
                out.append(lines[j].rstrip())
                j += 1
            i = j
        else:
            i += 1
    return out[:limit]
