"""Where a GPU grade's timing stage spends its wall time: worker start, load, warm-up, and one timing request.

    python scripts/grade_cost.py [--case fp16_8k] [--requests 20]

Starts one timing worker the way the grader does (grader/sandbox.py), loads the trusted baselines, warms them up
on one perf case, then sends `--requests` timing requests (5 calls of eager each, as a round does) and prints the
parent's wall clock per request against the event time the worker reported. In-process, it then times the parts
of one timed call (input refresh, L2 flush, sync, pre-call sleep) so that the fixed overhead per request can be
explained. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from grader.problem import operands  # noqa: E402
from grader.problem.spec import load_problem  # noqa: E402
from grader.sandbox import Sandbox  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="fp16_8k")
    ap.add_argument("--requests", type=int, default=20)
    a = ap.parse_args()
    problem = load_problem(ROOT / "reference/glu/spec.yaml")
    case = next(c for c in problem.performance.cases if c.name == a.case)

    t0 = time.perf_counter()
    box = Sandbox("cuda", wait=False, timing=True)
    box.wait_ready(180)
    print(f"worker start (spawn, imports, CUDA init, Timer bind): {ms(t0):8.1f} ms")
    payload = {"kind": "reference", "path": str(problem.reference), "baselines": problem.baselines, "display": "baselines"}
    t0 = time.perf_counter()
    box.request("load", payload, timeout_s=600, what="load")
    print(f"load baselines (calibrate, import, torch.compile wrap): {ms(t0):8.1f} ms")
    setup = {"inputs": operands.timing_seeds(problem, case, 1, 3), "warmup_ms": 200, "spin_s": 0.25,
             "n_out": math.prod(problem.out_shape(case.shape)), "digest_seed": 1}  # as grader/performance/stage.py builds it
    t0 = time.perf_counter()
    info = box.request("time_setup", setup, timeout_s=600, what="setup")
    print(f"setup {case.name} (inputs, compile, 3 x 200 ms warm-up): {ms(t0):8.1f} ms  compile_s={info['compile_s']}")

    plan = [(k % 3, 1.0) for k in range(5)]
    walls, events, samp = [], [], []
    idx = torch.randint(0, 1000, (16384,))
    for name in ("eager", "compiled", "manual"):
        walls, events, samp = [], [], []
        for _ in range(a.requests):
            t0 = time.perf_counter()
            r = box.request("time_round", {"names": [name], "plan": plan}, timeout_s=600, what="round")
            walls.append(ms(t0))
            events.append(sum(r[name]["event_ms"]))
            t0 = time.perf_counter()
            box.request("time_samples", {name: [(0, idx)]}, timeout_s=600, what="samples")
            samp.append(ms(t0))
        med = statistics.median
        print(f"{name:>9}: request wall {med(walls):7.2f} ms (min {min(walls):.2f}), events {med(events):7.3f} ms, "
              f"overhead per call {(med(walls) - med(events)) / len(plan):6.3f} ms; samples request {med(samp):6.2f} ms")
    box.close()

    # In-process: the parts of one timed call.
    from grader.child.timing import Timer

    tm = Timer(torch.device("cuda"))
    tm.setup({"eager": torch.nn.functional.glu}, {**setup, "warmup_ms": 50})
    sync = torch.cuda.synchronize
    parts: dict[str, list[float]] = {k: [] for k in ("mul+sync", "flush+sync", "sync(idle)", "occupy 1ms+sync", "round of 5 (in-process)")}
    for _ in range(20):
        t0 = time.perf_counter(); torch.mul(tm.pristine[0][0], 2.0, out=tm.work[0][0]); sync(); parts["mul+sync"].append(ms(t0))
        t0 = time.perf_counter(); tm.flush.zero_(); sync(); parts["flush+sync"].append(ms(t0))
        t0 = time.perf_counter(); sync(); parts["sync(idle)"].append(ms(t0))
        t0 = time.perf_counter(); tm._occupy(1000) if tm._occupy_ok else tm._sleep(int(1000 * tm.cycles_per_us)); sync(); parts["occupy 1ms+sync"].append(ms(t0))
        t0 = time.perf_counter(); tm.round({"eager": torch.nn.functional.glu}, {"names": ["eager"], "plan": plan}); parts["round of 5 (in-process)"].append(ms(t0))
    for k, v in parts.items():
        print(f"{k:>26}: median {statistics.median(v):7.3f} ms  min {min(v):7.3f}")
    print(f"pre-call sleep: {tm.sleep_kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
