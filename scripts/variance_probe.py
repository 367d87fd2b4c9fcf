"""Where the run-to-run spread of a small case's median comes from: calls, rounds, or allocations.

On a CUDA GPU (the figures are from an H200), from the repository root:

    python3 scripts/variance_probe.py [--case fp16_8k] [--blocks 6] [--rounds 25]

Backs docs/performance.md#input-sets-and-setups (run 24, on the old 4096x8192 fp16 case: eager's block medians
spread 1.89% where round-to-round scatter predicts ~0.21%, so more rounds cannot remove it). That case is no longer
in the spec; `--case` takes any perf case of reference/glu/spec.yaml.

In one process, with the grader's own Timer (flush, whole-device sleep, 5 calls per request), times eager and
torch.compile round-robin for `--blocks` blocks of `--rounds` rounds. Each block starts with a fresh setup
(new input allocations after `empty_cache`), as each grade does. Prints, per function:
- the spread of the block medians (what stability.py sees between grades, if allocation is the cause);
- the spread the round-to-round scatter alone predicts for medians of that many rounds;
- the share of call-level variance that is between rounds (1.0: calls in a round move together).
If block medians spread far more than rounds predict, more rounds per grade cannot fix it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from grader.problem import inputs
from grader.problem.spec import load_problem
from grader.child.timing import Timer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="fp16_8k")
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=25)
    a = ap.parse_args()
    problem = load_problem(ROOT / "reference/glu/spec.yaml")
    case = next(c for c in problem.performance.cases if c.name == a.case)

    def manual(x: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        return x[..., :h] * torch.sigmoid(x[..., h:])

    fns = {"eager": lambda x: torch.nn.functional.glu(x, dim=-1), "compiled": torch.compile(manual, dynamic=False)}
    tm = Timer(torch.device("cuda"))
    plan = [(k % 3, s) for k, s in zip(range(5), (1.0, 2.0, 0.5, -1.0, 4.0))]
    blocks: dict[str, list[list[list[float]]]] = {n: [] for n in fns}  # fn -> block -> round -> calls
    for b in range(a.blocks):
        seeds = [inputs.mix_seed(case.seed, 1000 + b, f"perf{k}") for k in range(3)]
        tm.setup(fns, {"case": asdict(case), "seeds": seeds, "warmup_ms": 200})
        for n in fns:
            blocks[n].append([])
        for r in range(a.rounds):
            order = list(fns) if r % 2 == 0 else list(fns)[::-1]
            for n in order:
                blocks[n][-1].append(tm.round(fns, {"names": [n], "plan": plan})[n]["event_ms"])
    for n, bl in blocks.items():
        meds = [statistics.median([v for rnd in blk for v in rnd]) for blk in bl]
        round_means = [statistics.fmean(rnd) for blk in bl for rnd in blk]
        calls = [v for blk in bl for rnd in blk for v in rnd]
        within = statistics.fmean(statistics.pvariance(rnd) for blk in bl for rnd in blk)
        total = statistics.pvariance(calls)
        # Per block: the SE of a median of `rounds` round means, from the round-to-round scatter in that block.
        se_rounds = statistics.fmean(1.2533 * statistics.stdev([statistics.fmean(r) for r in blk]) / len(blk) ** 0.5 for blk in bl)
        m = statistics.median(meds)
        print(f"{n:>9}: block medians {' '.join(f'{x * 1e3:.2f}' for x in meds)} us; spread {100 * (max(meds) - min(meds)) / min(meds):.2f}%; "
              f"SE from rounds {100 * se_rounds / m:.2f}% (5 blocks would spread ~{100 * 2.33 * se_rounds / m:.2f}%); "
              f"between-round share of variance {1 - within / total:.2f}; round means sd {100 * statistics.stdev(round_means) / m:.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
