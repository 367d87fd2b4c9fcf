"""Grade the same submission N times on this GPU; the score must be identical every time and every
implementation's per-case median must spread by <= 1% ((max - min) / min across runs).

    python scripts/stability.py [--runs 5] [--out DIR] [-- grader args, default: --staff]

Exit 0 when both hold, 1 otherwise. Prints one line per run and a spread table last.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("stability-runs"))
    ap.add_argument("--max-spread", type=float, default=0.01)
    ap.add_argument("grader_args", nargs="*", default=["--staff"])
    a = ap.parse_args()
    scores, medians = [], {}
    for i in range(a.runs):
        out = a.out / f"run{i}"
        t0 = time.monotonic()
        rc = subprocess.run([sys.executable, "-m", "grader", "grade", "--out", str(out), *a.grader_args], stdout=subprocess.DEVNULL).returncode
        wall = time.monotonic() - t0
        res = json.loads((out / "results.json").read_text())
        scores.append(res["score"])
        perf = res["extra_data"]["performance"]
        for case, c in perf.get("cases", {}).items():
            for kind in ("baselines", "impls"):
                for name, d in c[kind].items():
                    medians.setdefault((case, name), []).append(d["effective_ms"])
        print(f"run {i}: rc={rc} score={res['score']} / {res['max_score']} wall={wall:.1f} s phases={res['extra_data']['phases_s']}", flush=True)
    ok = len(set(scores)) == 1
    print(f"\nscores: {scores} -> {'identical' if ok else 'DIFFERENT'}")
    print(f"{'case':<16} {'implementation':<10} {'min ms':>9} {'max ms':>9} {'spread':>8}")
    for (case, name), ms in sorted(medians.items()):
        spread = (max(ms) - min(ms)) / min(ms)
        bad = spread > a.max_spread
        ok &= not bad
        print(f"{case:<16} {name:<10} {min(ms):9.4f} {max(ms):9.4f} {100 * spread:7.2f}%{'  <-- over' if bad else ''}")
    print("STABLE" if ok else "UNSTABLE")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
