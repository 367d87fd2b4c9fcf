"""Build a CUDA source file (a student's glu_cuda.cu or the staff solution) into a shared library with nvcc.

Builds are cached by content: the key is the SHA-256 of the source bytes, the nvcc flags and `nvcc --version`,
and the library lives at `<cache_dir>/<key>.so`. A library is only ever published whole: nvcc writes a
temporary file in the cache directory which is then renamed over the final name (os.replace is atomic on one
file system). There are no lock files, so a build that is killed half-way leaves at worst a stray temporary
file (swept later) and never blocks another build; two processes building the same key both succeed and the
last rename wins with identical content.

Student errors (a syntax error, nvcc missing, a build that hangs) never raise: they come back as
`BuildResult(ok=False, log=...)`. Logs are student-facing, so the grading machine's directories are replaced
(`/grading/sub123/glu_cuda.cu(42): error` reads `glu_cuda.cu(42): error`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import textscan
from grader.child.launches import ARCH

if TYPE_CHECKING:
    from grader.identity import Scratch

DEFAULT_ARCH = f"sm_{ARCH}"  # the course GPUs' architecture, in one place: grader/child/launches.py
BASE_FLAGS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo")
NVCC_MISSING = "nvcc not found: install the CUDA toolkit or set CUDA_HOME"
_TMP_SUFFIX = ".tmp.so"


@dataclass
class BuildResult:
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


def default_cache_dir() -> Path:
    """$GRADER_CACHE, else $XDG_CACHE_HOME/kernel-grader, else ~/.cache/kernel-grader."""
    if os.environ.get("GRADER_CACHE"):
        return Path(os.environ["GRADER_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "kernel-grader"
    return Path.home() / ".cache" / "kernel-grader"


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


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """nvcc runs cicc/ptxas/gcc as children: kill the whole process group, not only nvcc."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


MAX_LIB_BYTES = 256 * 1024 * 1024
MAX_SOURCE_BYTES = 16 * 1024 * 1024  # a submission's whole size cap (grader/identity.py); a kernel is a few kB
MAX_LOG_BYTES = 256 * 1024  # of a compiler's output: what is past it is read and thrown away, never held


MAX_WRITE_BYTES = 1 << 30  # the largest file a compiler may write (a preprocessed unit, an object, a library)


def _write_capped(cmd: list[str]) -> list[str]:
    """`cmd` under a file-size limit (POSIX sh's `ulimit -f`, in 512-byte blocks): a macro bomb that makes the
    preprocessor write gigabytes is stopped at MAX_WRITE_BYTES (SIGXFSZ) instead of filling the disk until the
    build's timeout. Where there is no POSIX shell (Windows), `cmd` as it is."""
    sh = shutil.which("sh") if os.name == "posix" else None
    if sh is None:
        return cmd
    return [sh, "-c", f'ulimit -f {MAX_WRITE_BYTES // 512} && exec "$@"', cmd[0], *cmd]


def run_logged(cmd: list[str], *, cwd: Path | None, timeout_s: float, **popen: Any) -> tuple[int | None, str]:
    """Run a compiler in its own process group with stdout and stderr merged: (exit status, None on a timeout
    after the whole group was killed; its output, at most MAX_LOG_BYTES of it, with a line saying so when it was
    cut). An error bomb (a source that makes the compiler print gigabytes) costs the parent MAX_LOG_BYTES, and one
    that makes it write a huge file costs MAX_WRITE_BYTES of disk (`_write_capped`)."""
    r = textscan.capped_run(
        _write_capped(cmd),
        limit=MAX_LOG_BYTES,
        timeout_s=timeout_s,
        kill=_kill_group,
        cwd=cwd,
        start_new_session=True,
        **popen,
    )
    out = r.output + (f"\n{textscan.cut_note(MAX_LOG_BYTES)}" if r.truncated else "")
    xfsz = getattr(signal, "SIGXFSZ", None)
    if xfsz is not None and r.returncode in (-xfsz, 128 + xfsz):
        out += f"\n{Path(cmd[0]).name} stopped: a file it wrote passed {MAX_WRITE_BYTES >> 20} MiB (a macro bomb?)"
    return r.returncode, out


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
    """Compile `src` into `<cache_dir>/<key>.so`, or return the cached library. Never raises for bad sources.

    With `scratch` (a grade's, grader/identity.py), nvcc runs as the grade's untrusted identity in its build
    directory, with its environment: an `#include` of a file the grader can read but the student cannot fails.
    The library is then copied into the cache by this (trusted) process with its SHA-256 beside it, and a cached
    library whose bytes no longer match is rebuilt."""
    start = time.monotonic()
    src = Path(src).resolve()
    flags = nvcc_flags(arch)

    def result(ok: bool, lib: Path | None, log: str, cached: bool, command: list[str]) -> BuildResult:
        return BuildResult(ok, lib, log, time.monotonic() - start, cached, command)

    nvcc = find_nvcc()
    if nvcc is None:
        return result(False, None, NVCC_MISSING, False, [])
    try:
        source, too_big = textscan.read_capped_bytes(src, MAX_SOURCE_BYTES)
    except OSError as e:
        return result(False, None, f"cannot read {src.name}: {e.strerror}", False, [])
    if too_big:
        return result(
            False,
            None,
            f"{src.name} is larger than {MAX_SOURCE_BYTES >> 20} MiB: not built (make it smaller)",
            False,
            [],
        )
    try:
        version = nvcc_version(nvcc)
    except (OSError, subprocess.SubprocessError) as e:
        return result(False, None, f"nvcc found but `nvcc --version` failed: {e}", False, [])

    key = cache_key(source, flags, version)
    cache_dir = Path(cache_dir).resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:  # written only by the grader: no other user may plant a library under a key
        os.chmod(cache_dir, 0o700)
    except OSError:
        pass
    lib = cache_dir / f"{key}.so"
    shown = ["nvcc", *flags, "-o", f"<cache>/{key}.so", src.name]
    if _cached(lib):
        return result(True, lib, f"cached: {key}.so", True, shown)
    if scratch is not None:
        return _build_untrusted(src, source, key, lib, flags, nvcc, scratch, timeout_s, result, shown)

    _sweep_stale_temps(cache_dir, older_than_s=2 * timeout_s + 60)
    fd, tmp_name = tempfile.mkstemp(prefix=f"{key}.", suffix=_TMP_SUFFIX, dir=cache_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    # Run in the source's directory and name the source by its basename, so nvcc's diagnostics read
    # `glu_cuda.cu(42): error: ...`; _scrub catches any absolute path that still slips through.
    command = [nvcc, *flags, "-o", str(tmp), src.name]
    scrub = [(str(src.parent), ""), (str(cache_dir), "<cache>/"), (tempfile.gettempdir(), "<tmp>/")]
    try:
        rc, out = run_logged(command, cwd=src.parent, timeout_s=timeout_s)
        log = _scrub(out, scrub).rstrip()
        if rc is None:
            log = (log + "\n" if log else "") + f"nvcc timed out after {timeout_s:g} s"
            return result(False, None, log, False, shown)
        if rc != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            log = (log + "\n" if log else "") + f"nvcc failed with exit status {rc}"
            return result(False, None, log, False, shown)
        _publish(lib, _read_output(tmp))
        return result(True, lib, log, False, shown)
    except OSError as e:
        return result(False, None, f"could not run nvcc: {e.strerror or e}", False, shown)
    finally:
        tmp.unlink(missing_ok=True)


def _publish(lib: Path, data: bytes) -> None:
    """Write a library into the cache atomically, with its hash (written first: a library never lacks one)."""
    fd, tmp = tempfile.mkstemp(prefix=f"{lib.stem}.", suffix=_TMP_SUFFIX, dir=lib.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    lib.with_suffix(".sha256").write_text(_digest(data) + "\n")
    os.replace(tmp, lib)


def _build_untrusted(
    src: Path,
    source: bytes,
    key: str,
    lib: Path,
    flags: list[str],
    nvcc: str,
    scratch: Scratch,
    timeout_s: float,
    result: Callable[..., BuildResult],
    shown: list[str],
) -> BuildResult:
    build_dir = scratch.home / "build"
    staged = build_dir / src.name
    staged.write_bytes(source)
    os.chmod(staged, 0o644)
    out = build_dir / "out.so"
    command = [nvcc, *flags, "-o", out.name, src.name]
    scrub = [(str(build_dir), ""), (str(scratch.root), "<scratch>/"), (str(src.parent), "")]
    kwargs: dict[str, Any] = dict(scratch.identity.popen_kwargs())
    try:
        rc, log_raw = run_logged(command, cwd=build_dir, timeout_s=timeout_s, env=scratch.env(trusted=False), **kwargs)
        log = _scrub(log_raw, scrub).rstrip()
        if rc is None:
            return result(
                False, None, (log + "\n" if log else "") + f"nvcc timed out after {timeout_s:g} s", False, shown
            )
        if rc != 0:
            return result(False, None, (log + "\n" if log else "") + f"nvcc failed with exit status {rc}", False, shown)
        try:
            data = _read_output(out)
        except OSError as e:
            return result(
                False, None, (log + "\n" if log else "") + f"nvcc produced no usable library ({e})", False, shown
            )
        _publish(lib, data)
        return result(True, lib, log, False, shown)
    except OSError as e:
        return result(False, None, f"could not run nvcc: {e.strerror or e}", False, shown)
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
