"""Kernel containment for a grade's untrusted processes: each one starts in a bubblewrap box.

What a box holds ends with the box. Where no box can be made, `support()` says why in one line and the
grade records its containment as "container" or "none"; only "box" and "container" grades can be official.

Why: docs/SECURITY.md, "Modules: the why", grader/box.py.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import platform
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BOX, CONTAINER, NONE = "box", "container", "none"
CONTAINMENTS = (BOX, CONTAINER, NONE)
DECLARE_ENV = "GRADER_CONTAINMENT"  # "container": the deployment runs one grade per container (image, Gradescope)
BWRAP_ENV = "GRADER_BWRAP"  # the bwrap to use (default: bwrap on PATH); a path that does not exist turns boxes off
BIND_ENV = "GRADER_BOX_BIND"  # more read-only folders to show in the box (os.pathsep-separated), for odd layouts
SEED_UID = 1_999_999  # only for support()'s trial box: a uid that owns nothing
TMPFS_BYTES = 256 << 20  # each of /tmp, /var/tmp, /dev/shm in a box (counted in the grade's cgroup memory)
RLIMITS = {  # per box; NPROC counts the uid's processes and threads machine-wide (the uid is the grade's alone)
    "RLIMIT_NPROC": 4096,
    "RLIMIT_NOFILE": 16384,
    "RLIMIT_FSIZE": 1 << 30,
    "RLIMIT_CORE": 0,
}
PIDS_MAX = 4096  # the grade's cgroup: processes and threads of all its boxes together
_GRADER_DIR = Path(__file__).resolve().parent
_SYSTEM_RO = ("/usr", "/etc", "/sys")
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

# The launcher, run as root by `python -I -S -c`: joins the grade's cgroup, sets the rlimits and the umask, hands
# the seccomp program to bwrap on an fd, then becomes bwrap. Joining before exec means no process of the box ever
# runs outside the cgroup. argv[1]: JSON {"procs": [cgroup.procs files], "rlimits": {name: n}, "seccomp": hex}.
_LAUNCHER = r"""
import json, os, resource, sys
c = json.loads(sys.argv[1])
for p in c["procs"]:
    with open(p, "w") as f:
        f.write(str(os.getpid()))
for name, n in c["rlimits"].items():
    resource.setrlimit(getattr(resource, name), (n, n))
os.umask(0o077)
argv = sys.argv[2:]
if c["seccomp"]:
    fd = os.memfd_create("grader-seccomp", 0)
    os.write(fd, bytes.fromhex(c["seccomp"]))
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    argv = [str(fd) if a == "@SECCOMP_FD@" else a for a in argv]
os.execv(argv[0], argv)
"""


# -- seccomp -------------------------------------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# keyctl, add_key, request_key by architecture (the kernel's syscall tables)
_KEYRING_CALLS = {"x86_64": (250, 248, 249), "aarch64": (219, 217, 218)}
_X32_BIT = 0x40000000
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050001  # SECCOMP_RET_ALLOW; SECCOMP_RET_ERRNO | EPERM
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> bytes:
    """A classic-BPF seccomp filter (struct sock_filter[], what bwrap --seccomp reads) that fails the keyring calls
    with EPERM, and every system call of another architecture or of the x32 ABI, and allows the rest. Empty where
    the architecture is not known here (the box then runs without the filter, and says so nowhere else: keyrings are
    the only thing it guards, and the fresh uid per grade guards them too)."""
    m = machine or platform.machine()
    if m not in _AUDIT_ARCH:
        return b""
    calls = _KEYRING_CALLS[m]
    # 0 ld arch; 1 arch ok? -> 3; 2 ret EPERM; 3 ld nr; [4 x32? -> deny]; calls -> deny; ret ALLOW; deny: ret EPERM
    prog = [_insn(_LD_W_ABS, 0, 0, 4), _insn(_JEQ_K, 1, 0, _AUDIT_ARCH[m]), _insn(_RET_K, 0, 0, _RET_EPERM)]
    prog.append(_insn(_LD_W_ABS, 0, 0, 0))
    checks = [(_JGE_K, _X32_BIT)] if m == "x86_64" else []
    checks += [(_JEQ_K, c) for c in calls]
    for i, (code, k) in enumerate(checks):
        prog.append(_insn(code, len(checks) - i, 0, k))  # to the deny at the end, past the rest and the allow
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    prog.append(_insn(_RET_K, 0, 0, _RET_EPERM))
    return b"".join(prog)


# -- cgroups -------------------------------------------------------------------------------------------------------

_CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass
class Cgroup:
    """One grade's cgroup: a folder in each hierarchy that has the controller (v2: one folder), its limits written.
    Every box of the grade joins it (the launcher writes its pid to `procs`); `close` kills what is left in it and
    removes it."""

    dirs: list[Path]

    @property
    def procs(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    @classmethod
    def make(cls, name: str, memory_max: int, root: Path = _CGROUP_ROOT) -> Cgroup | str:
        """The grade's cgroup, or why there is none (a line)."""
        if (root / "cgroup.controllers").is_file():
            return cls._v2(name, memory_max, root)
        return cls._v1(name, memory_max, root)

    @classmethod
    def _v2(cls, name: str, memory_max: int, root: Path) -> Cgroup | str:
        parent = root / "kernel-grader"
        try:
            have = set((root / "cgroup.controllers").read_text().split())
            if not {"pids", "memory"} <= have:
                return f"cgroup v2 without the pids and memory controllers (has: {' '.join(sorted(have)) or 'none'})"
            parent.mkdir(exist_ok=True)
            for d in (root, parent):
                if not {"pids", "memory"} <= set((d / "cgroup.subtree_control").read_text().split()):
                    (d / "cgroup.subtree_control").write_text("+pids +memory")
            d = parent / name
            d.mkdir()
            (d / "pids.max").write_text(str(PIDS_MAX))
            (d / "memory.max").write_text(str(memory_max))
            if (d / "memory.swap.max").exists():
                (d / "memory.swap.max").write_text("0")
        except OSError as e:
            return f"cannot make a cgroup v2 under {root} ({e.strerror or e}): a container's own cgroup holds processes"
        return cls([d])

    @classmethod
    def _v1(cls, name: str, memory_max: int, root: Path) -> Cgroup | str:
        made: list[Path] = []
        try:
            for ctl, limits in (
                ("pids", {"pids.max": PIDS_MAX}),
                ("memory", {"memory.limit_in_bytes": memory_max}),
            ):
                if not (root / ctl / "cgroup.procs").is_file():
                    raise FileNotFoundError(f"no cgroup v1 {ctl} hierarchy at {root / ctl}")
                d = root / ctl / f"kernel-grader-{name}"
                d.mkdir()
                made.append(d)
                for f, v in limits.items():
                    (d / f).write_text(str(v))
        except OSError as e:
            Cgroup(made).close()
            return f"cannot make a cgroup v1 ({e.strerror or e})"
        return cls(made)

    def close(self) -> int:
        """Kill every process left in the cgroup (none, when every box ended as it should) and remove it. Membership
        is the kernel's: a process of the grade cannot leave it. Returns how many were killed."""
        killed = 0
        for d in self.dirs:
            if (d / "cgroup.kill").exists():
                try:
                    (d / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            for _ in range(200):
                pids = _read_pids(d / "cgroup.procs")
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        killed += 1
                    except OSError:
                        pass
                time.sleep(0.01)
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # the last killed processes are still being torn down
        return killed


def _read_pids(p: Path) -> list[int]:
    try:
        return [int(x) for x in p.read_text().split() if x.isdigit()]
    except OSError:
        return []


def memory_max() -> int:
    """The grade's memory cap: GRADER_BOX_MEMORY_MB, else three quarters of this machine's memory (the host, and the
    grader beside the grade, keep the rest)."""
    raw = os.environ.get("GRADER_BOX_MEMORY_MB", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw) << 20
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 << 30
    return int(total * 3 // 4)


# -- the view ------------------------------------------------------------------------------------------------------


def _existing(paths: Iterable[str | Path | None]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if not p:
            continue
        q = Path(os.path.abspath(p))
        if q != Path("/") and q.exists() and q not in out:
            out.append(q)
    return out


def under(p: Path, d: Path) -> bool:
    """Whether `p` is `d` or lies inside it."""
    return p == d or d in p.parents


def _outermost(paths: list[Path]) -> list[Path]:
    """`paths` without those inside another of them, outermost first."""
    keep = [p for p in paths if not any(q != p and under(p, q) for q in paths)]
    return sorted(keep, key=lambda p: (len(p.parts), str(p)))


_ASK_PATHS = r"""
import json, site, sys, sysconfig
names = ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude")
paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
paths += [sysconfig.get_paths().get(n) for n in names] + list(site.getsitepackages()) + sys.path
print(json.dumps([p for p in paths if p]))
"""


def interpreter_paths(executable: str | None = None) -> list[Path]:
    """What the workers' interpreter (`python -s`, this one's executable) needs, as it says itself: its prefixes (a
    venv's and the base Python's), standard library, site-packages and include folder (Triton compiles a launcher
    against Python.h), and what .pth files add to its sys.path (a venv whose torch is another environment's); and
    the folders of the executable and of what it links to. A folder in it that must stay hidden (a checkout named
    by a .pth) is covered by View.hidden."""
    exe = executable or sys.executable
    return _existing([*_ask_paths(exe), *_link_chain(exe)])


def _link_chain(path: str, hops: int = 40) -> list[str]:
    """The folders of `path` and of every link on its way to the file (each hop must resolve in the box too)."""
    out, p = [], os.path.abspath(path)
    for _ in range(hops):
        out.append(os.path.dirname(p))
        if not os.path.islink(p):
            break
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    out.append(os.path.dirname(os.path.realpath(path)))
    return out


@functools.lru_cache(maxsize=8)
def _ask_paths(exe: str) -> tuple[str, ...]:
    try:
        # the worker's flags and environment (grader/identity.py worker_env), less its PYTHONPATH (the scratch's)
        env = {k: os.environ[k] for k in ("PATH", "LD_LIBRARY_PATH", "SYSTEMROOT") if k in os.environ}
        env.update({"PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        r = subprocess.run(
            [exe, "-s", "-c", _ASK_PATHS],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env=env,
            check=False,
        )
        data = json.loads(r.stdout[: 1 << 20]) if r.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, ValueError):
        data = []
    if not isinstance(data, list):
        data = []
    if not data:  # it could not say (then the worker will not start either): what this interpreter has
        data = [sys.prefix, sys.base_prefix, *sys.path]
    return tuple(str(p) for p in data if isinstance(p, str))


def toolkit_paths() -> list[Path]:
    """The CUDA toolkit and what Triton is pointed at, wherever they live (usually under /usr, already shown)."""
    paths: list[str | None] = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc") or (
        str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc") if "CUDA_HOME" in os.environ else None
    )
    if nvcc and os.path.exists(nvcc):
        paths.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    for var in ("TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH"):
        v = os.environ.get(var)
        if v:
            paths.append(v if os.path.isdir(v) else os.path.dirname(v))
    # what the grade's tools find on PATH (nvcc runs the host compiler from it; the CPU layer's g++ may be a
    # wrapper outside /usr, as /opt/gcc/bin on the device host was) and what they load from LD_LIBRARY_PATH
    paths += os.environ.get("PATH", "").split(os.pathsep)
    paths += os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    paths += os.environ.get(BIND_ENV, "").split(os.pathsep)
    for cxx in _compilers():
        paths += _ask_compiler(cxx)
    return _existing(paths)


def _compilers() -> list[str]:
    """The C/C++ compilers a grade's tools may run: the CPU layer's ($CXX, else g++, clang++, c++ from PATH) and
    nvcc's host compiler ($CUDAHOSTCXX, $CC), each resolved on PATH."""
    names = [os.environ.get(v, "") for v in ("CXX", "CUDAHOSTCXX", "CC")] + ["g++", "clang++", "c++"]
    found = [shutil.which(n) for n in names if n]
    return list(dict.fromkeys(f for f in found if f))


_COMPILER_OUTPUT_CAP = 1 << 16


@functools.lru_cache(maxsize=16)
def _ask_compiler(cxx: str) -> tuple[str, ...]:
    """The folders a compiler driver reads, as it says itself: its install, program and library folders
    (`-print-search-dirs`) and its include folders (`-E -v`). A toolchain whose driver is a wrapper outside /usr
    (the device host's /opt/gcc/bin/g++ passes -B and -isystem into /opt/gcc/lib) finds nothing in the box unless
    those are shown too; PATH names only its bin/. A host tool asked by the trusted side, never student input; its
    output is capped all the same, and a compiler that cannot say adds nothing."""
    env = {k: os.environ[k] for k in ("PATH", "LD_LIBRARY_PATH") if k in os.environ}
    out: list[str] = []
    try:
        r = subprocess.run(
            [cxx, "-print-search-dirs"], capture_output=True, timeout=30, stdin=subprocess.DEVNULL, env=env, check=False
        )
        for line in r.stdout[:_COMPILER_OUTPUT_CAP].decode(errors="replace").splitlines():
            key, _, rest = line.partition(": ")
            if key == "install":
                out.append(rest.strip())
            elif key in ("programs", "libraries"):
                out += rest.strip().lstrip("=").split(os.pathsep)
        r = subprocess.run(
            [cxx, "-x", "c++", "-E", "-v", "-"], input=b"", capture_output=True, timeout=30, env=env, check=False
        )
        inside = False
        for line in r.stderr[:_COMPILER_OUTPUT_CAP].decode(errors="replace").splitlines():
            if line.startswith("End of search list"):
                break
            if inside and line.startswith(" "):
                out.append(line.strip().split(" (")[0])  # Apple clang adds " (framework directory)"
            inside = inside or (line.startswith("#include <") and line.rstrip().endswith("search starts here:"))
    except (OSError, subprocess.SubprocessError):
        pass
    return tuple(p for p in out if os.path.isabs(p))


def default_hidden() -> list[Path]:
    """What the box must not show even where it lies under an allowed tree: the grader's trusted code and the
    problems' folders (the box imports only the scratch's copy of grader/child), and the checkout around them
    (tests/ holds complete kernels, reference/ every problem's staff solutions)."""
    hidden = [_GRADER_DIR, _GRADER_DIR.parent / "reference"]
    root = _GRADER_DIR.parent
    if any((root / m).exists() for m in (".git", "tests", "noxfile.py", "pyproject.toml")):
        hidden.append(root)  # a checkout (not site-packages, where grader/ and reference/ are hidden one by one)
    return _existing(hidden)


def device_nodes() -> list[str]:
    """The NVIDIA device nodes (and only those) that exist here: the GPU grade's one way to its card."""
    return sorted(p for p in glob.glob("/dev/nvidia*") if os.path.exists(p))


@dataclass
class View:
    """What a box shows, read-only: `ro`; hidden: `hidden` (each covered by an empty tmpfs, or /dev/null for a
    file, wherever it lies under `ro`)."""

    ro: list[Path]
    hidden: list[Path] = field(default_factory=list)

    def args(self) -> list[str]:
        out: list[str] = []
        # (folder, shown?) in mount order, a later one on top; the system folders are bound first (Box.argv)
        mounts: list[tuple[Path, bool]] = [(Path(d), True) for d in (*_SYSTEM_RO, *_ROOT_LINKS) if os.path.lexists(d)]
        # a folder that is a link (a PATH entry /sbin -> usr/sbin, /opt/gcc/bin -> ...) is shown as its target,
        # and as the same link where the view does not have it already
        links = [b for b in self.ro if b.is_symlink()]
        targets = [Path(os.path.realpath(b)) for b in links]
        for b in _outermost([b for b in [*self.ro, *targets] if b not in links and not _visible(b, mounts)]):
            out += [*parents(b), "--ro-bind", str(b), str(b)]
            mounts.append((b, True))
        for link in links:
            if not _visible(link, mounts):
                out += [*parents(link), "--symlink", os.readlink(link), str(link)]
                mounts.append((link, True))
        for h in sorted(self.hidden, key=lambda p: (len(p.parts), str(p))):
            if not _visible(h, mounts):
                continue  # outside every bind, or under a folder already covered
            if h.is_dir():
                out += ["--perms", "0755", "--tmpfs", str(h)]
            else:
                out += ["--ro-bind", "/dev/null", str(h)]
            mounts.append((h, False))
            # what the view needs from inside the hidden folder (a venv in a checkout's .nox/) is shown again
            for b in _outermost([b for b in self.ro if b != h and under(b, h)]):
                out += [*parents(b, below=h), "--ro-bind", str(b), str(b)]
                mounts.append((b, True))
        return out


def parents(p: Path, below: Path = Path("/")) -> list[str]:
    """bwrap arguments that make the folders on the way to `p` (below `below`) traversable, 0755: bwrap makes a
    missing one 0700 (root's), which the grade's uid could not enter. A folder that exists (a mount) is kept."""
    out: list[str] = []
    for d in reversed(p.parents):
        if d != below and under(d, below) and d != Path("/"):
            out += ["--perms", "0755", "--dir", str(d)]
    return out


def _visible(p: Path, mounts: list[tuple[Path, bool]]) -> bool:
    """Whether `p` is shown by `mounts`: the deepest mount holding it (the latest, among equals) is a bind."""
    holding = [(len(m.parts), i, shown) for i, (m, shown) in enumerate(mounts) if under(p, m)]
    return bool(holding) and max(holding)[2]


def system_args() -> list[str]:
    """/usr, /etc, /sys read-only; the root's /bin, /lib... as they are (links into usr/ on merged-usr systems)."""
    out: list[str] = []
    for d in _ROOT_LINKS:
        if os.path.islink(d):
            out += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            out += ["--ro-bind", d, d]
    return out


# -- the box -------------------------------------------------------------------------------------------------------


def bwrap_path() -> str | None:
    raw = os.environ.get(BWRAP_ENV)
    if raw:
        return raw if os.path.isfile(raw) and os.access(raw, os.X_OK) else None
    return shutil.which("bwrap")


def setpriv_path() -> str | None:
    return shutil.which("setpriv", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/bin"]))


@dataclass
class Box:
    """The box every untrusted process of one grade starts in (see the module docstring): `argv(cmd, cwd)` is the
    command line that runs `cmd` there as `uid`/`gid`, seeing `scratch` (its `writable` folder read-write) and the
    view, in the grade's `cgroup` (None: the host offers none; the rest of the box holds)."""

    bwrap: str
    setpriv: str
    uid: int
    gid: int
    scratch: Path | None  # the grade's scratch, shown read-write (its modes decide what the uid may write)
    view: View
    cgroup: Cgroup | None = None
    cgroup_why: str = ""
    devices: list[str] = field(default_factory=device_nodes)

    def argv(self, cmd: Sequence[str], cwd: Path | str | None = None) -> list[str]:
        config = {
            "procs": self.cgroup.procs if self.cgroup is not None else [],
            "rlimits": RLIMITS,
            "seccomp": seccomp_program().hex(),
        }
        inside = "/"
        if self.scratch is not None:
            here = Path(os.path.abspath(cwd)) if cwd is not None else self.scratch
            inside = str(here if under(here, self.scratch) else self.scratch)
        args = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "grader-box",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        for d in ("/tmp", "/var/tmp", "/dev/shm"):
            args += ["--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", d]
        for d in _SYSTEM_RO:
            args += ["--ro-bind-try", d, d]
        args += system_args()
        args += self.view.args()
        for node in self.devices:
            args += ["--dev-bind-try", node, node]
        if self.scratch is not None:
            args += [*parents(self.scratch), "--bind", str(self.scratch), str(self.scratch)]
        args += ["--chdir", inside]
        if config["seccomp"]:
            args += ["--seccomp", "@SECCOMP_FD@"]
        drop = [
            self.setpriv,
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
        return [sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(config), *args, "--", *drop, *cmd]

    def close(self) -> int:
        """Remove the grade's cgroup, killing whatever is left in it; returns how many it killed (0 when every box
        ended with its process, as the PID namespaces make sure)."""
        return self.cgroup.close() if self.cgroup is not None else 0


@functools.lru_cache(maxsize=1)
def support() -> str:
    """'' when this process can make boxes; else why not, in one line (said once per grade, and recorded)."""
    if not sys.platform.startswith("linux"):
        return "kernel containment (bubblewrap) needs Linux"
    if not hasattr(os, "getuid") or os.getuid() != 0:
        return "the grader is not root, so it cannot set up a box for another uid"
    bwrap = bwrap_path()
    if bwrap is None:
        how = (
            f"{BWRAP_ENV}={os.environ[BWRAP_ENV]} is not an executable"
            if os.environ.get(BWRAP_ENV)
            else "no bwrap on PATH"
        )
        return f"{how}: install bubblewrap (apt-get install bubblewrap) for kernel containment"
    setpriv = setpriv_path()
    if setpriv is None:
        return "no setpriv (util-linux) on PATH: install util-linux for kernel containment"
    argv = Box(bwrap, setpriv, SEED_UID, SEED_UID, None, View([]), devices=[]).argv(["/bin/true"])
    try:
        r = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"bubblewrap could not start ({type(e).__name__}: {e})"
    if r.returncode != 0:
        last = (r.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return f"bubblewrap cannot make a box here ({last[:200]}): a container without CAP_SYS_ADMIN?"
    return ""


def declared() -> str:
    """The containment the deployment declares when no box can be made: CONTAINER (GRADER_CONTAINMENT=container:
    this grade is alone in its container, as the image and the Gradescope zip run it) or NONE."""
    return CONTAINER if os.environ.get(DECLARE_ENV, "").strip().lower() == CONTAINER else NONE
