"""Grade the same submission N times on this GPU; the score must be identical every time and every
implementation's per-case median must spread by <= 1% ((max - min) / min across runs).

    python scripts/stability.py [--runs 5] [--out DIR] [-- grader args, default: --staff]

Exit 0 when both hold, 1 otherwise. Prints one line per run, a spread table, and each student kernel's
wall-clock excess per call against the slack of the grader's wall-clock check (and how often it was re-timed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from grader.performance import wall_slack_ms  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("stability-runs"))
    ap.add_argument("--max-spread", type=float, default=0.01)
    ap.add_argument("grader_args", nargs="*", default=["--staff"])
    a = ap.parse_args()
    scores, medians, excess = [], {}, {}
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
            for name, d in c["impls"].items():
                slack = wall_slack_ms(d["event"]["median"])
                excess.setdefault((case, name), []).append((d.get("wall_excess_ms", 0.0), slack, d.get("first_pass", {}).get("retimes", 0)))
        print(f"run {i}: rc={rc} score={res['score']} / {res['max_score']} wall={wall:.1f} s phases={res['extra_data']['phases_s']}", flush=True)
    ok = len(set(scores)) == 1
    print(f"\nscores: {scores} -> {'identical' if ok else 'DIFFERENT'}")
    print(f"{'case':<16} {'implementation':<10} {'min ms':>9} {'max ms':>9} {'spread':>8}")
    for (case, name), ms in sorted(medians.items()):
        spread = (max(ms) - min(ms)) / min(ms)
        bad = spread > a.max_spread
        ok &= not bad
        print(f"{case:<16} {name:<10} {min(ms):9.4f} {max(ms):9.4f} {100 * spread:7.2f}%{'  <-- over' if bad else ''}")
    # The wall-clock check's margin on correct kernels: how close each came to being re-timed (a first pass over
    # the slack) and how often it was.
    print(f"\n{'case':<16} {'implementation':<10} {'wall excess ms per call (min..max)':>36} {'slack':>7} {'re-timed (twice)':>17}")
    for (case, name), xs in sorted(excess.items()):
        ex = [x for x, _, _ in xs]
        once, twice = sum(r >= 1 for _, _, r in xs), sum(r >= 2 for _, _, r in xs)
        print(f"{case:<16} {name:<10} {min(ex):+17.4f} .. {max(ex):+.4f}{'':>7} {xs[0][1]:7.3f} {once:>5} of {len(xs)} ({twice})")
    print("STABLE" if ok else "UNSTABLE")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
