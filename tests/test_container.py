"""The container's run conditions, without a Docker engine (issue 16 item 5).

`docker run --read-only --tmpfs /scratch ...` gives the grader: the image's environment (its ENV lines), a
read-only tree (the build context .dockerignore lets in), one writable folder (/scratch: TMPDIR, HOME, the caches),
the results folder, and, as root, a separate unprivileged uid for student code. These tests run the image's own
ENTRYPOINT + CMD (the driver check included) under those conditions on this machine: the Dockerfile's paths
(/scratch, /opt/venv, /grader, /submission, /results, the key) are mapped onto temporary folders and this Python.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instructions(kind: str) -> list[str]:
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    return [line.split(None, 1)[1] for line in text.splitlines() if line.strip().upper().startswith(kind + " ")]


def image_env(mapping: dict[str, str]) -> dict[str, str]:
    """The image's ENV lines, in order (later ones see earlier ones: $PATH), with `mapping`'s prefixes replaced."""
    env: dict[str, str] = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    for line in _instructions("ENV"):
        for word in shlex.split(line):
            name, _, value = word.partition("=")
            value = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)
            env[name] = value
    for name, value in env.items():
        parts = value.split(":") if name == "PATH" else [value]
        for i, p in enumerate(parts):
            for src, dst in mapping.items():
                if p == src or p.startswith(src + "/"):
                    parts[i] = dst + p[len(src):]
        env[name] = ":".join(parts)
    return env


def entry_command() -> list[str]:
    (entry,) = _instructions("ENTRYPOINT")
    (cmd,) = _instructions("CMD")
    return json.loads(entry) + json.loads(cmd)


def _build_context(dst: Path) -> None:
    """The files .dockerignore lets into the image (its `!` lines), copied to `dst`."""
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        if line.startswith("!"):
            pattern = line[1:] + ("/*" if line.endswith("**") else "")  # Path.glob's "**" matches folders only
            for p in ROOT.glob(pattern):
                if p.is_file() and "__pycache__" not in p.parts:
                    (dst / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(p, dst / p.relative_to(ROOT))


def test_the_image_has_every_problem_s_public_parts_and_no_staff_solution(tmp_path):
    """What .dockerignore lets in: each problem's spec, words (hints.yaml: the advice, failure patterns and static
    checks a grade reads) and reference.py; never a staff solution."""
    _build_context(tmp_path)
    for spec in sorted(ROOT.glob("reference/*/spec.yaml")):
        for f in ("spec.yaml", "hints.yaml", "reference.py", "__init__.py"):
            assert (tmp_path / "reference" / spec.parent.name / f).is_file(), f"reference/{spec.parent.name}/{f}"
    assert not list(tmp_path.rglob("solution_*"))


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def _unused_uid() -> int:
    used = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                used.add(os.stat(f"/proc/{pid}").st_uid)
            except OSError:
                pass
    import pwd

    while True:
        uid = random.randint(1_800_000, 1_899_999)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in used:
                return uid


def _gid_of(p: Path) -> int | None:
    try:
        return p.lstat().st_gid
    except OSError:
        return None  # gone already: removed, so not left behind


def _read_only_root(*writable: Path) -> list[str]:
    """A prefix that runs a command as `docker run --read-only` would: in a private mount namespace where `/` is
    read-only except `writable` (bind mounts: the scratch and OUT), so a write anywhere else fails, for root too.
    [] where no mount namespace can be made here (not root, no unshare): then only the checks after the run hold."""
    if os.getuid() != 0 or shutil.which("unshare") is None:
        return []
    binds = " && ".join(f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(p))}" for p in writable)
    script = f'{binds} && mount -o remount,ro,bind / && exec "$@"'
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "read-only-root"]
    outside, inside = (shlex.quote(str(writable[0].parent / ".ro-probe")), shlex.quote(str(writable[0] / ".ro-probe")))
    probe = subprocess.run([*prefix, "sh", "-c", f"! touch {outside} 2>/dev/null && touch {inside}"],
                           capture_output=True, check=False)
    for p in (writable[0].parent, writable[0]):
        Path(p, ".ro-probe").unlink(missing_ok=True)
    return prefix if probe.returncode == 0 else []


def _fake_nvidia_smi(bin_dir: Path, driver: str | None) -> None:
    bin_dir.mkdir(exist_ok=True)
    f = bin_dir / "nvidia-smi"
    f.write_text("#!/bin/sh\n" + (f"echo {driver}\n" if driver else "echo 'NVIDIA-SMI has failed' >&2; exit 9\n"))
    f.chmod(0o755)


@pytest.mark.parametrize(("driver", "message"), [
    ("580.65.06", None),
    ("575.57.08", "NVIDIA driver 575.57.08 is too old for this CUDA 13.0 image (needs >= 580)"),
    ("none", "no NVIDIA GPU visible"),
    (None, "no NVIDIA GPU visible"),  # nvidia-smi fails (container toolkit without a GPU)
])
def test_entrypoint_checks_the_driver_in_one_line(tmp_path, driver, message):
    bin_dir = tmp_path / "bin"
    if driver != "none":
        _fake_nvidia_smi(bin_dir, driver)
    env = image_env({"/opt/venv": sys.prefix, "/scratch": str(tmp_path)})
    env["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"  # no real nvidia-smi on this PATH
    cmd = [*json.loads(_instructions("ENTRYPOINT")[0]), "--help"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert "autograde" in r.stdout  # the grader ran after the check
    lines = [l for l in r.stderr.splitlines() if l.startswith("kernel-grader:")]
    if message is None:
        assert lines == [], r.stderr
    else:
        assert len(lines) == 1 and message in lines[0], r.stderr


@pytest.mark.slow
def test_entry_command_grades_with_a_read_only_tree_and_a_writable_scratch_only(request):
    """The image's ENTRYPOINT + CMD (+ --device cpu), its ENV, a read-only tree, a writable scratch, as root a
    separate uid: exit 0, results.json in OUT, and nothing written anywhere but the scratch and OUT. As root the
    whole filesystem but the scratch and OUT is read-only (a private mount namespace), as with --read-only."""
    if os.getuid() == 0:
        request.getfixturevalue("separated")  # the separate uid must be able to reach this machine's Python
    # Under /tmp (1777), not pytest's 0700 tmp_path: the separate uid must reach the scratch, as /scratch in the image.
    base = Path(tempfile.mkdtemp(prefix="glu-container-"))
    try:
        os.chmod(base, 0o755)
        tree, sub, out, scratch, secret = (base / n for n in ("grader", "submission", "results", "scratch", "secret"))
        tree.mkdir()
        _build_context(tree)
        assert (tree / "grader" / "__main__.py").is_file() and not (tree / "tests").exists()
        sub.mkdir()
        # A submission that works (the staff solution, kept out of the image's tree): its code really runs, as the
        # separate uid, with Triton's interpreter and caches in the scratch.
        shutil.copy2(ROOT / "reference" / "glu" / "solution_triton.py", sub / "glu_triton.py")
        shutil.copy2(ROOT / "reference" / "glu" / "solution_cuda.cu", sub / "glu_cuda.cu")
        out.mkdir()
        scratch.mkdir()
        os.chmod(scratch, 0o1777)  # --tmpfs /scratch:mode=1777
        secret.mkdir(mode=0o700)
        key = secret / "grader_key"
        r = subprocess.run([sys.executable, "-m", "grader", "keygen", "--out", str(key)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        for p in (tree, sub):  # chmod -R a-w
            for dirpath, _dirs, files in os.walk(p):
                for n in files:
                    os.chmod(os.path.join(dirpath, n), 0o444)
                os.chmod(dirpath, 0o555)

        mapping = {"/opt/venv": sys.prefix, "/scratch": str(scratch), "/grader": str(tree), "/submission": str(sub),
                   "/results": str(out), "/run/secrets/grader_key": str(key)}
        env = image_env(mapping)
        # No fallback: TMPDIR, HOME and the caches are the scratch's (the image's ENV), never this machine's.
        assert env["TMPDIR"] == str(scratch) and env["HOME"] == str(scratch)
        assert env["GRADER_CACHE"].startswith(str(scratch) + "/")
        grade_uid = _unused_uid() if os.getuid() == 0 else None
        if grade_uid is not None:
            env["GRADER_STUDENT_UID"] = str(grade_uid)
        env["CUDA_VISIBLE_DEVICES"] = ""
        cmd = [a for a in entry_command()]
        cmd = cmd[:-len(json.loads(_instructions("CMD")[0]))] + [
            mapping.get(a, a) for a in json.loads(_instructions("CMD")[0])] + ["--device", "cpu"]
        (workdir,) = _instructions("WORKDIR")
        assert workdir.strip() == "/grader"

        watched = [Path(tempfile.gettempdir()), Path.home()]
        before_tree, before_base = _snapshot(tree), set(os.listdir(base))
        before = {w: set(os.listdir(w)) for w in watched}
        cache_dirs = [Path.home() / d for d in (".triton", ".cache", ".config/matplotlib", ".nv")]
        before_caches = {d: _snapshot(d) if d.is_dir() else None for d in cache_dirs}

        read_only = _read_only_root(scratch, out)
        r = subprocess.run([*read_only, *cmd], cwd=tree, env=env, capture_output=True, text=True,
                           timeout=300, check=False)
        assert r.returncode == 0, f"read-only root: {bool(read_only)}\n" + r.stdout[-3000:] + r.stderr[-3000:]
        assert "kernel-grader: no NVIDIA GPU visible" in r.stderr  # the start-up check, then the grade
        results = json.loads((out / "results.json").read_text())
        assert results["score"] > 0 and results["tests"]
        assert not (tree / "reference" / "glu" / "solution_triton.py").exists()
        if os.getuid() == 0:  # root, the key, a separate uid: the grade is official, hence signed
            assert results["extra_data"].get("signature"), r.stdout[-2000:]

        assert _snapshot(tree) == before_tree, "the grader wrote into its (read-only) tree"
        assert set(os.listdir(base)) == before_base
        assert set(os.listdir(sub)) == {"glu_triton.py", "glu_cuda.cu"}
        assert os.listdir(secret) == ["grader_key"]
        for w in watched:  # nothing new of the grade's in /tmp or this user's home (other tests may add their own)
            new = set(os.listdir(w)) - before[w]
            ours = [n for n in new if n.startswith(("grade-", "tmp", "torchinductor", "triton", ".triton", "matplotlib"))]
            if grade_uid is not None:  # a grade's folders are its uid's group: another grader running on this
                # machine at the same time (a second test run) makes grade-* folders of its own in /tmp
                ours = [n for n in ours if not n.startswith("grade-") or _gid_of(w / n) == grade_uid]
            assert not ours, f"written outside the scratch: {w}: {ours}"
        for d, snap in before_caches.items():
            if snap is not None:
                assert {k for k in _snapshot(d) if "kernel-grader" in k or "triton" in k or "inductor" in k} == \
                       {k for k in snap if "kernel-grader" in k or "triton" in k or "inductor" in k}, d
            else:
                assert not d.exists() or d.name == ".cache", f"{d} created outside the scratch"
    finally:
        for dirpath, dirs, _files in os.walk(base):
            for n in dirs:
                try:
                    os.chmod(os.path.join(dirpath, n), 0o755)
                except OSError:
                    pass
        shutil.rmtree(base, ignore_errors=True)


def test_the_image_compiles_the_grader_to_bytecode_after_copying_it():
    """The container's root is read-only and PYTHONDONTWRITEBYTECODE is set: Python code without .pyc files in the
    image is compiled from source by every process of every grade. The Dockerfile compiles what it copies of the
    grader and the references, after copying it."""
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()]
    run = next(i for i, ln in enumerate(lines) if ln.startswith("RUN") and "compileall" in ln)
    assert {"grader", "reference"} <= set(lines[run].split())
    copied = [i for i, ln in enumerate(lines) if ln.startswith(("COPY grader", "COPY reference"))]
    assert len(copied) == 2 and max(copied) < run
