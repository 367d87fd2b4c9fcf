"""The red-team gate (scripts/audit.py, `nox -s audit`): the exploit corpus graded as official autograder grades in
the container's layout. Full tier: CI runs it on every change (as root, so submission code runs as separate uids)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AUDIT = ROOT / "scripts" / "audit.py"
root_only = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="the audit needs root")


def _audit(*args: str, timeout: int = 3600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "EXPLOIT_"))}
    return subprocess.run([sys.executable, str(AUDIT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def test_the_audit_refuses_to_prove_nothing_when_not_root():
    """As an ordinary user no grade can be official (no separate uid): the gate says so and exits 2, never 0."""
    if hasattr(os, "getuid") and os.getuid() == 0:
        r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable,
                            str(AUDIT), "--only", "nan_wildcard"], cwd="/", capture_output=True, text=True,
                           timeout=120, check=False)  # fmt: skip
    else:
        r = _audit("--only", "nan_wildcard", timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "run as root" in r.stderr


@pytest.mark.slow
@root_only
def test_the_gate_fails_on_an_exploit_that_keeps_points(tmp_path):
    """A corpus of one 'exploit' that is simply the staff Triton solution, allowed 0 points: the gate must fail it
    (kept 24 points), so a real exploit that starts winning cannot pass unseen."""
    corpus = tmp_path / "corpus"
    (corpus / "honest_kernel").mkdir(parents=True)
    shutil.copy2(ROOT / "reference" / "glu" / "solution_triton.py", corpus / "honest_kernel" / "glu_triton.py")
    os.chmod(tmp_path, 0o755)
    r = _audit("--corpus", str(corpus), "--open-traversal", timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if "honest_kernel" in x)
    assert line.startswith("FAIL") and "kept" in line and "the audit allows 0" in line, line


@pytest.mark.slow
@root_only
def test_every_exploit_of_the_corpus_holds_in_an_official_grade():
    r = _audit("--open-traversal")
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-3000:]
