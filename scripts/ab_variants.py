"""Grade the staff solutions with several variants of the *grader's* code, interleaved on one machine, and print
what each variant does to the grade's cost and to the wall-clock check: per grade the wall time, phases and score,
and per case the baselines' and each kernel's overhead per call (the parent's clock over a timing request, less the
event times reported) and each kernel's excess over the baselines (what the wall-clock check compares to its slack).

On a GPU host (the figures are from an H200), from the repository root, with P a folder of patches against this
tree (`git diff > P/change.patch`):

    python3 scripts/ab_variants.py --variant A= --variant B=P/prepare.patch --variant C=P/transport.patch \\
        --variant D=P/prepare.patch+P/transport.patch --order B,A,C,D,B,A,C,D --out ab-variants [--budget-s 480]

Backs docs/performance.md "Why the timing workers' requests use multiprocessing's format" and the run-27 row of
"Grade cost" (run 27 in docs/performance.md#measurement-log). Run 27's two patches apply to commit 11aa418 only and
were deleted from the tree in commit 6308257. To rerun run 27 itself, check out 11aa418 and take them from the
history: `git show 1534c4f:docs/experiments/prepare.patch > P/prepare.patch` (and transport.patch).

Each variant is a copy of this tree (under --out) with its patches applied (`git apply`); an empty list is the tree
as it is. Compiler caches (Triton, Inductor, nvcc by content) are shared, so only the first grade is cold. Grades
stop being started once --budget-s has passed, so a device call's time limit is never hit mid-grade.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.performance import wall_slack_ms  # noqa: E402


def make_tree(name: str, patches: list[str], out: Path) -> Path:
    dst = out / f"tree_{name}"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(".git", ".nox", "__pycache__", "grade-results", out.name))
    for p in patches:
        r = subprocess.run(["git", "apply", str((ROOT / p).resolve())], cwd=dst, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"variant {name}: {p} did not apply: {r.stderr.strip()}")
    return dst


def summarize(name: str, res: dict, wall: float) -> list[str]:
    ed = res["extra_data"]
    perf = ed.get("performance", {})
    lines = [f"{name}: score {res['score']} / {res['max_score']}  wall {wall:.1f} s  phases {ed.get('phases_s')}  load {perf.get('load_wall_s', '-')}"]
    for case, c in perf.get("cases", {}).items():
        base = " ".join(f"{n} {d.get('overhead_ms', float('nan')):.4f}" for n, d in c["baselines"].items())
        impls = []
        for n, d in c["impls"].items():
            slack = wall_slack_ms(d["event"]["median"])
            mark = " RETIMED" if "first_pass" in d else ""
            impls.append(f"{n} {d.get('overhead_ms', float('nan')):.4f} (excess {d.get('wall_excess_ms', 0):+.4f} / slack {slack:.3f}{mark})")
        lines.append(f"   {case:<14} baselines: {base} | {' '.join(impls)} | rounds {c['rounds']} {c['wall_s']}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True, help="NAME=PATCH[+PATCH...] (NAME= for the tree as is)")
    ap.add_argument("--order", required=True, help="comma-separated variant names, one grade each")
    ap.add_argument("--out", type=Path, default=Path("ab-variants"))
    ap.add_argument("--budget-s", type=float, default=480.0)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    variants = {}
    for v in a.variant:
        name, _, spec = v.partition("=")
        variants[name] = make_tree(name, [p for p in spec.split("+") if p], a.out)
    t_all = time.monotonic()
    for i, name in enumerate(n for n in a.order.split(",") if n):
        if time.monotonic() - t_all > a.budget_s:
            print(f"budget of {a.budget_s:.0f} s spent: grades {i}.. not started")
            break
        out = a.out / f"grade{i}_{name}"
        t0 = time.monotonic()
        with open(a.out / f"grade{i}_{name}.log", "w") as log:
            rc = subprocess.run([sys.executable, "-m", "grader", "grade", "--staff", "--out", str(out)], cwd=variants[name], stdout=log, stderr=subprocess.STDOUT).returncode
        wall = time.monotonic() - t0
        try:
            res = json.loads((out / "results.json").read_text())
        except (OSError, ValueError) as e:
            print(f"grade {i} {name}: rc={rc}, no results.json ({e})", flush=True)
            continue
        print(f"grade {i} rc={rc} " + "\n".join(summarize(name, res, wall)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
