"""Where each grade's time went: for every results.json under a folder (a batch's OUT, single grades), the score,
the phases, and per performance case the wall time of setup / rounds / verification, the rounds, the stop reason,
and per implementation its credit, whether it stopped early and what its re-timings were.

    python3 scripts/timing_breakdown.py DIR [DIR ...]

It only reads results.json files, so it runs on any machine (CPU is enough); the grades themselves come from a GPU
host, e.g. `python3 scripts/bench_grading.py --out D --phase batch` (or `scripts/batch_gpu_check.py`, its
10-submission class), then `python3 scripts/timing_breakdown.py D/batch`. Backs docs/performance.md "Grade cost with the sanitizer pass cut, and grades sharing a GPU" (the warm-up's
queued launches, the hopeless-implementation cut and the confirmed-excess rule were each found from its output).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def one(p: Path) -> None:
    r = json.loads(p.read_text())
    e = r.get("extra_data", {})
    print(f"{p.parent.name}: score {r.get('score')} / {r.get('max_score')}  phases {e.get('phases_s')}")
    perf = e.get("performance", {})
    scalars = {k: v for k, v in perf.items() if isinstance(v, (int, float, str)) and k.endswith("_s")}
    if scalars:
        print(f"   performance: {scalars}")
    for c, d in e.get("performance", {}).get("cases", {}).items():
        impls = []
        for n, i in d.get("impls", {}).items():
            fp = i.get("first_pass") or {}
            extra = ""
            if fp:
                extra = (
                    f" retimes {fp.get('retimes', 0)} rounds {fp.get('retime_rounds')}"
                    f" confirmed_on {fp.get('confirmed_on')}"
                )
            impls.append(f"{n} {i.get('effective_ms', float('nan')):.4f} ms credit {i.get('credit')}{extra}")
        stopped = d.get("stopped_early") or []
        print(f"   {c:<14} wall {d.get('wall_s')} rounds {d.get('rounds')} stopped_early {stopped}")
        print(f"   {'':<14} stop: {str(d.get('stop'))[:110]}")
        for s in impls:
            print(f"   {'':<14} {s}")


def main() -> None:
    for d in sys.argv[1:]:
        for p in sorted(Path(d).rglob("results.json")):
            try:
                one(p)
            except (ValueError, OSError) as err:
                print(f"{p}: unreadable ({err})")


if __name__ == "__main__":
    main()
