"""Where a correct kernel's wall-clock excess comes from: the process it runs in, or the code.

Benches the GLU staff kernels beside a control, `ctl`: the eager baseline's own `F.glu`, timed in an untrusted
worker exactly like a submission, so the function is the trusted one and only the process differs. Each bench is
`python3 -m grader bench --staff` on a copy of reference/glu/spec.yaml with `ctl` added; by default two with a
separate uid (run as root) and one with `GRADER_SAME_UID=1`. Prints, per bench and case, the baselines' overhead
per call and each implementation's event median, overhead and excess per call over the baselines (what the
wall-clock check compares to its slack), its first pass and re-timings.

On a GPU host (the figures are from an H200), from the repository root, as root for the separate-uid benches:

    python3 scripts/wallprobe.py [--out DIR] [--benches sep,sep,same]
    python3 scripts/wallprobe.py --summary DIR/sep1 DIR/sep2 DIR/same3    # print the table again from results

Backs docs/performance.md "A worker process carries an offset of its own" (the same trusted function drifts by
-0.06 to +0.13 ms per call from one process to the next; hence a re-timing starts new worker processes, and the
fixed part of the wall-clock slack, WALL_SLACK_MS = 0.08 ms). The variant spec and the control's file are written
beside reference/glu/spec.yaml (so the spec's relative paths resolve) and removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GLU = ROOT / "reference" / "glu"
SPEC = GLU / "spec_wallprobe.yaml"
CTL = GLU / "wallprobe_ctl.py"
CTL_SOURCE = '''"""wallprobe's control: the eager baseline's own op, timed in an untrusted worker like a submission."""

import torch


def glu_triton(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.glu(x, dim=-1)
'''


def write_probe_spec() -> None:
    """reference/glu/spec.yaml with a `ctl` implementation after the Triton one (its staff file is CTL)."""
    spec = yaml.safe_load((GLU / "spec.yaml").read_text())
    impls: dict[str, object] = {}
    for name, impl in spec["implementations"].items():
        impls[name] = impl
        if name == "triton":
            impls["ctl"] = {**impl, "file": "ctl_eager.py", "staff": CTL.name}
    spec["implementations"] = impls
    CTL.write_text(CTL_SOURCE)
    SPEC.write_text(yaml.safe_dump(spec, sort_keys=False))


def summary(dirs: list[Path]) -> None:
    for d in dirs:
        try:
            r = json.loads((d / "results.json").read_text())
        except (OSError, ValueError) as e:
            print(d, "no results", e)
            continue
        perf = r["extra_data"]["performance"]
        print(f"== {d}")
        for case, c in perf.get("cases", {}).items():
            base = c.get("baseline_overhead_ms", float("nan"))
            bo = {n: round(v.get("overhead_ms", 0), 4) for n, v in c["baselines"].items()}
            print(f"  {case}: base overhead {base:.4f} per-baseline {bo}")
            for n, v in c["impls"].items():
                fp = v.get("first_pass", {})
                print(
                    f"    {n:8s} ev {v['event']['median']:.4f} oh {v.get('overhead_ms', 0):.4f}"
                    f" excess {v.get('wall_excess_ms', 0):+.4f} first {fp.get('wall_excess_ms', float('nan')):+.4f}"
                    f" retimes {fp.get('retimes', 0)} flags {len(v.get('flags', []))}"
                )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("wallprobe-out"))
    ap.add_argument("--benches", default="sep,sep,same", help="comma-separated: sep (separate uid) or same")
    ap.add_argument("--summary", type=Path, nargs="+", metavar="DIR", help="only print the table of these benches")
    a = ap.parse_args()
    if a.summary:
        summary(a.summary)
        return 0
    kinds = [k for k in a.benches.split(",") if k]
    if not kinds or any(k not in ("sep", "same") for k in kinds):
        ap.error("--benches takes sep and same, comma-separated")
    a.out.mkdir(parents=True, exist_ok=True)
    dirs = []
    write_probe_spec()
    try:
        for i, kind in enumerate(kinds, 1):
            out = a.out / f"{kind}{i}"
            env = dict(os.environ, GRADER_SAME_UID="1") if kind == "same" else None
            cmd = [sys.executable, "-m", "grader", "bench", "--problem", str(SPEC), "--staff", "--out", str(out)]
            with open(a.out / f"{kind}{i}.log", "w") as log:
                rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
            print(f"bench {kind}{i}: rc={rc}", flush=True)
            dirs.append(out)
    finally:
        SPEC.unlink(missing_ok=True)
        CTL.unlink(missing_ok=True)
    summary(dirs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
