"""The fast tier's list of measured-slow tests (tests/slow_measured.txt) stays true to the suite: each line names a
test function that its file still defines, and the conftest hook marks exactly those tests slow."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import SLOW_MEASURED, slow_measured

ROOT = Path(__file__).resolve().parent.parent


def test_each_measured_slow_test_still_exists():
    ids = slow_measured()
    assert ids, SLOW_MEASURED
    stale = []
    for nodeid in sorted(ids):
        path, _, name = nodeid.partition("::")
        func = re.split(r"[\[:]", name, maxsplit=1)[0]
        f = ROOT / path
        if not f.is_file() or not re.search(rf"^def {re.escape(func)}\(", f.read_text(encoding="utf-8"), re.M):
            stale.append(nodeid)
    assert not stale, f"tests/slow_measured.txt names tests that no longer exist: {stale}"


def test_a_measured_slow_test_is_deselected_by_the_fast_tier_and_selected_by_m_slow():
    """Collected from the tests/ folder (naming its file would select it in either tier: tests/conftest.py)."""
    nodeid = sorted(slow_measured())[0]
    func = re.split(r"[\[:]", nodeid.partition("::")[2], maxsplit=1)[0]
    env = {**os.environ, "CI": ""}
    base = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests", "-k", func]
    fast = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    slow = subprocess.run([*base, "-m", "slow"], cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    assert nodeid not in fast.stdout.splitlines(), fast.stdout[-2000:]
    assert nodeid in slow.stdout.splitlines(), slow.stdout[-2000:]
