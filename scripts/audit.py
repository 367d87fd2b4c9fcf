"""The red-team gate: grade every exploit of the corpus (tests/exploits/) as the autograder does, officially, and
fail on any exploit that keeps points it should not, leaks the key, or takes the grader down.

    python scripts/audit.py [--only NAME ...] [--jobs N] [--keep DIR] [--device cpu|cuda]
    nox -s audit [-- ARGS]

Each exploit is graded by the image's own entry command (`python -m grader autograde`, the Dockerfile's ENV) in the
container's layout, rebuilt on this machine without Docker: the files .dockerignore lets into the image (no staff
solutions, no tests) copied to a tree that is then made read-only, a world-writable scratch as /scratch, a fresh key
made by `grader keygen` in a 0700 folder, results in a folder of the grader's, and, as root, a separate untrusted
uid (the grader's pool) with the rest of the filesystem read-only (a private mount namespace, as `docker run
--read-only`). So the grade is official: signed, and `extra_data.official` true. An exploit passes the audit when:

1. the grader survived it: exit 0 and a results.json the grader wrote (official, and its signature verifies with
   the key: a results.json the exploit forged or edited does not);
2. it kept no more points than `tests/exploits/audit.yaml` allows it (0 unless listed: what an honest part of it
   earns, with the reason written beside the number);
3. nothing leaked: neither the key nor its derived signing key appears in any file the grade wrote or in its output,
   and no process of the grade's untrusted uid outlived the grade.

Exit 0 when every exploit passes, 1 otherwise (a table says which and why), 2 when it cannot run (not root: without
a separate uid no grade is official, so the gate would prove nothing). CI runs it in the full tier
(tests/test_audit.py). GPU exploits (gpu_*) are graded with `--device cuda` on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader import keyfile, signing  # noqa: E402

EXPLOITS = ROOT / "tests" / "exploits"
ALLOWANCES = EXPLOITS / "audit.yaml"  # in the corpus folder: what each exploit may keep
NOT_SUBMISSIONS = {"ta_poisoned_class"}  # a class folder for the TA report, audited by tests/test_exploits.py
# The corpus's hang exploits wait out a case limit: shorter limits keep the gate's run in minutes (the spec's own
# limits are what a real grade gets; these change how long a hang costs, not what a cheat can earn).
LIMITS = {"build_s": 120, "case_s": 30, "correctness_s": 150, "timing_s": 120}
GRADE_TIMEOUT_S = 900
EXPLOIT_ENV = ("EXPLOIT_OUT", "EXPLOIT_PIDFILE", "EXPLOIT_STOPFILE", "EXPLOIT_SECONDS")


@dataclass
class Verdict:
    name: str
    score: float | None = None
    allowed: float = 0.0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def dockerfile_env(mapping: dict[str, str]) -> dict[str, str]:
    """The Dockerfile's ENV lines, in order, with the image's paths replaced by `mapping`'s."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    env: dict[str, str] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for line in text.splitlines():
        if not line.strip().upper().startswith("ENV "):
            continue
        for word in shlex.split(line.split(None, 1)[1]):
            name, _, value = word.partition("=")
            env[name] = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)
    for name, value in env.items():
        parts = value.split(":") if name == "PATH" else [value]
        for i, p in enumerate(parts):
            for src, dst in mapping.items():
                if p == src or p.startswith(src + "/"):
                    parts[i] = dst + p[len(src) :]
        env[name] = ":".join(parts)
    return env


def image_tree(dst: Path) -> None:
    """What .dockerignore lets into the image (its `!` lines), copied to `dst`, with the audit's shorter limits."""
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        if line.startswith("!"):
            pattern = line[1:] + ("/*" if line.endswith("**") else "")
            for p in ROOT.glob(pattern):
                if p.is_file() and "__pycache__" not in p.parts:
                    (dst / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(p, dst / p.relative_to(ROOT))
    spec_path = dst / "reference" / "glu" / "spec.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["limits"] = {**spec.get("limits", {}), **LIMITS}
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    if list(dst.rglob("solution_*")):
        raise SystemExit("audit: the image's tree holds a staff solution (.dockerignore): fix that first")


def read_only(path: Path) -> None:
    for dirpath, _dirs, files in os.walk(path):
        for n in files:
            os.chmod(os.path.join(dirpath, n), 0o444)
        os.chmod(dirpath, 0o555)


def read_only_root_prefix(*writable: Path) -> list[str]:
    """Run a command with `/` read-only but `writable` (a private mount namespace); [] where that cannot be made."""
    if shutil.which("unshare") is None:
        return []
    binds = " && ".join(f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(p))}" for p in writable)
    script = f'{binds} && mount -o remount,ro,bind / && exec "$@"'
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "audit-read-only"]
    r = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    return prefix if r.returncode == 0 else []


def blocked_ancestors(paths: list[Path]) -> list[Path]:
    """Directories on the way to `paths` that other users cannot enter (no o+x): the untrusted uid cannot start a
    Python that lies under one (pyenv under /root, mode 0700, on CI machines)."""
    out: list[Path] = []
    for p in paths:
        for d in reversed(p.resolve().parents):
            try:
                if not os.stat(d).st_mode & 0o001 and d not in out:
                    out.append(d)
            except OSError:
                pass
    return out


def exploits(corpus: Path, only: list[str], device: str) -> list[str]:
    names = sorted(p.name for p in corpus.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    names = [n for n in names if n not in NOT_SUBMISSIONS and n != "__pycache__"]
    names = [n for n in names if n.startswith("gpu_") == (device == "cuda")]
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise SystemExit(f"audit: no exploit named {', '.join(unknown)} for --device {device} in {corpus}")
        names = [n for n in names if n in only]
    return names


def allowances(corpus: Path) -> dict[str, dict[str, object]]:
    path = corpus / ALLOWANCES.name
    data = (yaml.safe_load(path.read_text()) if path.is_file() else None) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"audit: {path} must map exploit names to {{points: N, why: ...}}")
    for name, entry in data.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("points"), (int, float)) and entry.get("why")):
            raise SystemExit(f"audit: {path}: {name} needs `points: N` and `why: ...` (why it may keep them)")
        if not (corpus / name).is_dir():
            raise SystemExit(f"audit: {path} names {name}, which is not a folder of {corpus}")
    return data


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read(512).rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def grade_one(name: str, layout: dict[str, Path], prefix: list[str], key_hex: str, device: str) -> Verdict:
    v = Verdict(name)
    work = Path(tempfile.mkdtemp(prefix=f"audit-{name}-", dir=layout["base"]))
    out, sub = work / "results", work / "submission"
    out.mkdir(mode=0o700)
    shutil.copytree(layout["corpus"] / name, sub, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    read_only(sub)
    # The exploits write the pids they leave behind here (EXPLOIT_PIDFILE), as the untrusted uid: a file it may
    # append to, in a folder it may not write.
    (work / "pids").touch()
    os.chmod(work / "pids", 0o666)
    os.chmod(work, 0o755)  # the submission copy is read by the grader (root) and copied into the grade's scratch
    env = dockerfile_env({"/scratch": str(layout["scratch"]), "/grader": str(layout["tree"])})
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env.pop("GRADER_STUDENT_UID", None)  # the grader's own pool: a uid no other live grade holds
    env.update(
        {
            "GRADER_PASS_ENV": ",".join(EXPLOIT_ENV),
            "EXPLOIT_OUT": str(out),
            "EXPLOIT_PIDFILE": str(work / "pids"),
            "EXPLOIT_STOPFILE": str(work / "stop"),
            "EXPLOIT_SECONDS": "30",
            "PYTHONPATH": str(layout["tree"]),
        }
    )
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [
        *prefix,
        sys.executable,
        "-m",
        "grader",
        "autograde",
        "--submission",
        str(sub),
        "--out",
        str(out),
        "--secret-file",
        str(layout["key"]),
        "--device",
        device,
        "--student-id",
        f"audit-{name}",
    ]
    t0 = time.monotonic()
    with open(work / "stdout", "w") as so, open(work / "stderr", "w") as se:
        proc = subprocess.Popen(cmd, cwd=layout["tree"], env=env, stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        try:
            rc = proc.wait(timeout=GRADE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            v.problems.append(f"the grade did not end within {GRADE_TIMEOUT_S} s")
    v.seconds = time.monotonic() - t0
    (work / "stop").touch()
    # 3. leftovers: every process the exploit says it left behind (EXPLOIT_PIDFILE) must be gone.
    time.sleep(0.5)
    try:
        left = [int(p) for p in (work / "pids").read_text().split() if p.isdigit()]
    except OSError:
        left = []
    alive = [p for p in left if os.path.isdir(f"/proc/{p}") and not _zombie(p)]
    if alive:
        v.problems.append(f"processes the submission started outlived the grade: {alive[:5]}")
    # 1. the grader survived and wrote an official, signed results.json.
    texts = [(work / "stdout").read_text(errors="replace"), (work / "stderr").read_text(errors="replace")]
    res = out / "results.json"
    data = None
    try:
        data = json.loads(res.read_text())
    except (OSError, ValueError) as e:
        v.problems.append(f"no results.json the grader wrote ({type(e).__name__}); exit {rc}")
    if rc != 0:
        tail = " | ".join(texts[1].strip().splitlines()[-2:])[:300]
        v.problems.append(f"the grader exited {rc}: {tail}")
    if isinstance(data, dict):
        extra = data.get("extra_data") if isinstance(data.get("extra_data"), dict) else {}
        if extra.get("official") is not True:
            v.problems.append(f"not an official grade: {extra.get('not_official_because')}")
        elif signing.verify(data, keyfile.derive(key_hex.encode()).signing) != signing.VALID:
            v.problems.append("results.json does not verify with the key: not the grader's file")
        score = data.get("score")
        v.score = float(score) if isinstance(score, (int, float)) else None
    # 2. points kept.
    allowed = float(layout["allow"].get(name, {}).get("points", 0))  # type: ignore[attr-defined]
    v.allowed = allowed
    if v.score is not None and v.score > allowed + 1e-6:
        v.problems.append(f"kept {v.score:g} points; the audit allows {allowed:g}")
    # 3. the key anywhere in what the grade wrote or printed.
    secrets = (key_hex, keyfile.derive(key_hex.encode()).signing.hex())
    for dirpath, _dirs, files in os.walk(out):
        for f in files:
            try:
                with open(os.path.join(dirpath, f), "rb") as fh:
                    texts.append(fh.read(64 * 2**20).decode(errors="replace"))
            except OSError:
                pass
    if any(s in t for s in secrets for t in texts):
        v.problems.append("the key (or its signing key) appears in the grade's files or output")
    if v.ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        v.problems.append(f"(files kept in {work})")
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="audit this exploit (repeatable)")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, (os.cpu_count() or 2))), help="grades at once")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument(
        "--open-traversal",
        action="store_true",
        help="let other users traverse (o+x, no listing) the directories on the way to this Python for the run, and "
        "restore them after (the container installs Python where every user can read it; a pyenv under /root does not)",
    )
    ap.add_argument("--corpus", type=Path, default=EXPLOITS, help="folder of exploits (default: tests/exploits)")
    ap.add_argument("--keep", type=Path, help="grade under this folder and keep it (default: a temporary one)")
    a = ap.parse_args(argv)
    if not hasattr(os, "getuid") or os.getuid() != 0:
        print(
            "audit: run as root (the container's grader is root): only then does submission code run as a separate "
            "uid and the grade is official; as another user the gate proves nothing",
            file=sys.stderr,
        )
        return 2
    import sysconfig

    blocked = blocked_ancestors([Path(sys.executable), Path(sysconfig.get_paths()["purelib"]), ROOT])
    if blocked and not a.open_traversal:
        where = ", ".join(map(str, blocked))
        print(
            f"audit: the untrusted uid cannot start this Python: other users cannot enter {where}. Install Python "
            "where every user can read it (as the container does), or pass --open-traversal to allow traversal "
            "(o+x) there for the audit's run",
            file=sys.stderr,
        )
        return 2
    saved = {d: os.stat(d).st_mode for d in blocked}
    for d in blocked:
        os.chmod(d, saved[d] | 0o001)
    try:
        return _run(a)
    finally:
        for d, mode in saved.items():
            os.chmod(d, mode)


def _run(a: argparse.Namespace) -> int:
    names = exploits(a.corpus, a.only, a.device)
    allow = allowances(a.corpus)
    jobs = 1 if a.device == "cuda" else max(1, a.jobs)  # GPU grades one at a time: timing must not share it
    base = Path(tempfile.mkdtemp(prefix="audit-", dir=a.keep))
    os.chmod(base, 0o755)
    try:
        tree, scratch, secret = base / "grader", base / "scratch", base / "secret"
        tree.mkdir()
        image_tree(tree)
        read_only(tree)
        scratch.mkdir()
        os.chmod(scratch, 0o1777)
        secret.mkdir(mode=0o700)
        key = secret / "grader_key"
        r = subprocess.run([sys.executable, "-m", "grader", "keygen", "--out", str(key)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        if r.returncode != 0:
            print(f"audit: keygen failed: {r.stderr.strip()}", file=sys.stderr)
            return 2
        key_hex = key.read_text().strip()
        prefix = read_only_root_prefix(scratch, base)
        layout = {"base": base, "tree": tree, "scratch": scratch, "key": key, "allow": allow, "corpus": a.corpus}
        print(f"audit: {len(names)} exploits, {jobs} at a time, device {a.device}, "
              f"read-only root: {'yes' if prefix else 'no (unshare unavailable)'}", flush=True)  # fmt: skip
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            verdicts = list(pool.map(lambda n: grade_one(n, layout, prefix, key_hex, a.device), names))  # type: ignore[arg-type]
    finally:
        # A failed exploit's folder is kept for a person to read (its path is in the table); else nothing is left.
        if a.keep is None and not any(p.is_dir() for p in base.glob("audit-*")):
            shutil.rmtree(base, ignore_errors=True)
    width = max(len(v.name) for v in verdicts) if verdicts else 10
    for v in verdicts:
        score = "-" if v.score is None else f"{v.score:g}"
        print(f"{'ok  ' if v.ok else 'FAIL'} {v.name:<{width}} score {score:>6} (allowed {v.allowed:g}) "
              f"{v.seconds:6.1f} s  {'; '.join(v.problems)}")  # fmt: skip
    bad = [v for v in verdicts if not v.ok]
    print(
        f"audit: {len(verdicts) - len(bad)} of {len(verdicts)} exploits held"
        + (f"; FAILED: {', '.join(v.name for v in bad)}" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
