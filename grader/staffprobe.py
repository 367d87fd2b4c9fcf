"""What the untrusted uid can reach of the staff's files, found by asking it.

Anything found makes the grade unofficial, with a reason naming what was reachable, from where, and the fix. A
probe that fails or answers nonsense makes it unofficial too (it fails closed).

Why: docs/SECURITY.md, "Modules: the why", grader/staffprobe.py.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader import identity
from grader.cuda import build
from grader.problem.spec import Problem

GRADER_DIR = Path(__file__).resolve().parent
STAFF_PREFIX = "solution_"  # every staff solution's name (spec.yaml `staff:`; MANIFEST.in and setup.py prune these)
INCLUDE_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")
NVCC_FLAG_ENV = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")
SYSTEM_INCLUDE = ("/usr/local/include", "/usr/include")
MAX_REPLY_BYTES = 64 * 1024
MAX_FOUND = 64
TIMEOUT_S = 60.0

# Runs as the untrusted uid. argv[1]: JSON {"staff": [names], "prefix": STAFF_PREFIX, "problems": [names],
# "trusted": [modules], "include": [[folder, how]], "max": MAX_FOUND}. Prints one JSON list of [kind, name, path,
# where]. Never raises: a finder or a package that fails is skipped, as the worker's own import of it would fail.
_SCRIPT = r"""
import importlib.util, json, os, sys
a = json.loads(sys.argv[1])
found = []
def opens(p):
    try:
        os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK))
        return True
    except OSError:
        return False
def spec(name):
    try:
        return importlib.util.find_spec(name)
    except Exception:
        return None
def add(kind, name, path, where):
    if len(found) < a["max"] and [kind, name, path, where] not in found:
        found.append([kind, name, path, where])
staff = set(a["staff"])
def is_staff(n):
    return n.startswith(a["prefix"]) or n in staff
s = spec("reference")
for loc in list(getattr(s, "submodule_search_locations", None) or []):
    try:
        problems = sorted(os.listdir(loc))[:1000]
        problems = [p for p in a["problems"] if p in problems] + [p for p in problems if p not in a["problems"]]
    except OSError:
        continue
    for p in problems:
        d = os.path.join(loc, p)
        try:
            names = sorted(os.listdir(d))[:1000] if os.path.isdir(d) else []
        except OSError:
            continue
        for n in names:
            if is_staff(n) and opens(os.path.join(d, n)):
                shown = "reference.%s.%s" % (p, n[:-3]) if n.endswith(".py") else "reference/%s/%s" % (p, n)
                add("reference", shown, os.path.join(d, n), loc)
if s is not None:
    for p in a["problems"]:
        for n in a["staff"]:
            m = spec("reference.%s.%s" % (p, n.split(".")[0]))
            if m is not None and m.origin and opens(m.origin):
                add("reference", m.name, m.origin, os.path.dirname(os.path.dirname(m.origin)))
for name in a["trusted"]:
    m = spec(name)
    if m is not None:
        add("trusted", name, m.origin or "", ", ".join(m.submodule_search_locations or []) or m.origin or "")
for p in a["hidden"]:
    if os.path.lexists(p):
        add("view", p, p, "the box")
for d, how in a["include"]:
    bases = [d] + [os.path.join(d, p) for p in a["problems"]] + [os.path.join(d, "reference", p) for p in a["problems"]]
    for base in bases:
        try:
            names = sorted(n for n in os.listdir(base) if is_staff(n))[:50] if os.path.isdir(base) else []
        except OSError:
            continue
        for n in names:
            if opens(os.path.join(base, n)):
                add("include", n, os.path.join(base, n), how)
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Found:
    """One staff or trusted file the untrusted uid could reach: kind 'reference' (importable), 'trusted' (a grader
    module other than grader.child importable) or 'include' (in a folder a build of the student's source searches)."""

    kind: str
    name: str
    path: str
    where: str  # the folder (or finder location, or include variable) it was reached through


def trusted_modules() -> list[str]:
    """`grader.<name>` for every module and package of the trusted grader (all of grader/ but child/)."""
    names = set()
    for p in GRADER_DIR.iterdir():
        stem = p.name[:-3] if p.name.endswith(".py") else p.name
        if p.name.startswith(("_", ".")) or stem == "child":
            continue
        if (p.is_file() and p.name.endswith(".py")) or (p.is_dir() and (p / "__init__.py").is_file()):
            names.add(f"grader.{stem}")
    return sorted(names)


def include_dirs(env: dict[str, str]) -> list[tuple[str, str]]:
    """(folder, how it is searched) for every include folder a build of the student's source searches besides its
    own fresh build folder, with the worker's environment `env`: the compilers' include variables, -I in nvcc's
    flag variables, the CUDA toolkit's include folder and the system's."""
    out: list[tuple[str, str]] = []
    for var in INCLUDE_ENV:
        out += [(d, var) for d in env.get(var, "").split(os.pathsep) if d]
    for var in NVCC_FLAG_ENV:
        try:
            words = shlex.split(env.get(var, ""))
        except ValueError:
            words = env.get(var, "").split()
        for i, w in enumerate(words):
            if w in ("-I", "--include-path", "-isystem") and i + 1 < len(words):
                out.append((words[i + 1], var))
            elif w.startswith("-I") and len(w) > 2:
                out.append((w[2:], var))
            elif w.startswith(("--include-path=", "-isystem")) and len(w) > len("-isystem"):
                out.append((w.split("=", 1)[-1] if "=" in w else w[len("-isystem") :], var))
    cuda = [env.get("CUDA_HOME", ""), env.get("CUDA_PATH", ""), "/usr/local/cuda"]
    nvcc = build.find_nvcc()
    if nvcc is not None:  # (often a wrapper script: /usr/local/cuda is the usual home then)
        cuda.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    out += [(str(Path(c) / "include"), "the CUDA toolkit's include folder") for c in cuda if c]
    out += [(d, "the system's include path") for d in SYSTEM_INCLUDE]
    first: dict[str, str] = {}
    for d, how in out:
        first.setdefault(d, how)
    return list(first.items())


def must_not_see(problem: Problem) -> list[str]:
    """What a box's view must not show (grader/box.py), checked from inside it: the checkout around the grader (its
    tests/ hold complete kernels), every problem's folder under reference/ and every staff file there, the grader's
    trusted code and caches. Paths that do not exist on this machine are left out (nothing to show)."""
    from grader import box

    shown = [*box.interpreter_paths(), *box.toolkit_paths()]
    paths: list[Path] = []
    for h in [*box.default_hidden(), identity.default_cache_dir(), problem.path.parent]:
        # a folder on the way to one the box shows (the checkout, when the venv is its .nox/env) is in the view as
        # an empty folder of bwrap's: its entries are what must not be there
        if any(s != h and box.under(s, h) for s in shown):
            paths += [e for e in sorted(h.iterdir())[:200] if not any(box.under(s, e) for s in shown)]
        else:
            paths.append(h)
    for root in {problem.path.parent.parent, GRADER_DIR.parent / "reference"}:
        for d in sorted(root.iterdir())[:200] if root.is_dir() else []:
            if (d / "spec.yaml").is_file():  # a problem's folder (its siblings may be anything)
                paths += [d, *sorted(d.glob(f"{STAFF_PREFIX}*"))[:20]]
    tests = GRADER_DIR.parent / "tests"
    paths += [tests, tests / "data", tests / "exploits"]
    return sorted({str(p) for p in paths if os.path.lexists(p)})


def probe(
    scratch: identity.Scratch, staff_names: list[str], problems: list[str], hidden: list[str] | None = None
) -> list[Found] | str:
    """What of the staff's files (and of the trusted grader) the scratch's untrusted uid can reach, asked of that
    uid with the worker's interpreter, flags, environment and working directory; or, if it could not be asked, why
    not (the caller then treats the grade as not official). In a box, also whether any of `hidden` (`must_not_see`)
    is in its view: the allow-list is what keeps them out, and this checks that it holds."""
    env = scratch.env(trusted=False)
    arg = {
        "hidden": (hidden or [])[:2000] if scratch.box is not None else [],
        "max": MAX_FOUND,
        "prefix": STAFF_PREFIX,
        "staff": sorted(set(staff_names)),
        "problems": sorted(set(problems)),
        "trusted": trusted_modules(),
        "include": include_dirs(env),
    }
    cwd = scratch.home if scratch.identity.separated else scratch.root
    argv, who = scratch.untrusted([sys.executable, "-s", "-c", _SCRIPT, json.dumps(arg)], cwd)
    try:
        r = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT_S,
            **who,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if r.returncode != 0:
        last = (r.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return str(last)[:300]
    try:
        data = json.loads(r.stdout[:MAX_REPLY_BYTES])
    except ValueError:
        return "its answer was not JSON"
    if not (isinstance(data, list) and all(isinstance(x, list) and len(x) == 4 for x in data)):
        return "its answer had the wrong shape"
    if not all(isinstance(v, str) for x in data for v in x):
        return "its answer had the wrong shape"
    return [Found(*x) for x in data]


def reasons(found: list[Found] | str) -> list[str]:
    """One line per place something was reachable from, naming it and the fix (empty: nothing was)."""
    if isinstance(found, str):
        return [
            f"could not check what the student uid can import and include ({found}); an official grade needs that check"
        ]
    by_place: dict[tuple[str, str], list[Found]] = {}
    for f in found:
        by_place.setdefault((f.kind, f.where), []).append(f)
    out = []
    for (kind, where), fs in by_place.items():
        names = ", ".join(f.name for f in fs[:3]) + (f" and {len(fs) - 3} more" if len(fs) > 3 else "")
        if kind == "reference":
            out.append(
                f"{names} is importable by the student uid from {where} (an editable install of another "
                "checkout, or a .pth file or path on the grading Python's sys.path?) and readable there: "
                "uninstall it from the grading Python, or make its staff files unreadable (chmod 600)"
            )
        elif kind == "trusted":
            out.append(
                f"the grader's trusted code ({names}) is importable by the student uid from {where}: only "
                "grader.child may be (an editable install or a .pth file adds it): uninstall it from the grading "
                "Python, or install the grader without -e"
            )
        elif kind == "view":
            out.append(
                f"the box shows {names}, which it must not (the checkout, a staff file or the grader's caches): "
                f"install the grader and Python outside the course checkout, or report this as a grader bug"
            )
        else:
            out.append(
                f"the staff file {names} is readable by the student uid through {where} ({fs[0].path}): "
                "remove its folder from the include path, or make it unreadable (chmod 600)"
            )
    return out
