"""Timed rounds: the per-round call plan, the round-robin over the workers, and the shape of their replies.

Each round asks every (worker, function) unit, in an order rotated each round, to time CALLS_PER_ROUND calls on
input sets and scales the parent chose (`plan`), then for the sampled outputs the parent chose to verify, until
the stop rule (grader/performance/stats.py) holds. A reply of the wrong shape counts as a failed worker
(`expect_reply`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from grader import wire
from grader.child.wire import RoundReply, RoundRequest, SamplesReply, SamplesRequest
from grader.performance import stats
from grader.sandbox import WorkerFailure

# Input sets rotated per worker: consecutive calls never see the same buffers. More sets where they are small:
# a short kernel's time depends a little on where its buffers landed (a per-setup state: a 4096x8192 fp16
# case's medians moved ~1% between grades with 3 sets: docs/performance.md#input-sets-and-setups), and more
# placements average that out. At most
# SET_BYTES of input per worker (twice that with each set's pristine copy), so the large cases keep 3.
MIN_SETS, MAX_SETS = 3, 8
SET_BYTES = 512 * 2**20
CALLS_PER_ROUND = 5
SCALES = (0.25, 0.5, 1.0, 2.0, 4.0, -0.5, -1.0, -2.0)  # powers of two: scaling is exact in every dtype
FIRST_SAMPLE = 1 << 20  # elements checked on the first timed output of each function
ROUND_SAMPLE = 1 << 14  # elements checked on one random timed call per round


def n_sets(input_bytes: int) -> int:
    """How many input sets a case rotates through (see MIN_SETS)."""
    return max(MIN_SETS, min(MAX_SETS, SET_BYTES // max(1, input_bytes)))


def plan_round(
    rng: random.Random, n_out: int, first: bool, prev_k: int | None = None, sets: int = MIN_SETS
) -> tuple[list[tuple[int, float]], list[tuple[int, int, float, torch.Tensor]]]:
    """One round's calls [(set, scale)], and the parent's private choice of which call to verify:
    [(call index, set, scale, flat output indices)]. prev_k: the set the previous round ended on, so rounds
    don't repeat it either. Only the plan goes to the worker; the choice is sent after the round."""
    plan: list[tuple[int, float]] = []
    checks: list[tuple[int, int, float, torch.Tensor]] = []
    vcall = 0 if first else rng.randrange(CALLS_PER_ROUND)
    for j in range(CALLS_PER_ROUND):
        # A different set from the previous call (never the same buffers twice in a row), chosen at random.
        last = plan[-1][0] if plan else prev_k
        k = (last + rng.randrange(1, sets)) % sets if last is not None else rng.randrange(sets)
        scale = rng.choice(SCALES)
        if j == vcall and n_out:
            m = min(n_out, FIRST_SAMPLE if first else ROUND_SAMPLE)
            g = torch.Generator().manual_seed(rng.randrange(1 << 62))
            idx = torch.randint(0, n_out, (m,), generator=g)
            idx = torch.cat([idx, torch.arange(max(0, n_out - 1024), n_out)])  # the tail, where masks go wrong
            checks.append((j, k, scale, idx))
        plan.append((k, scale))
    return plan, checks


_T = TypeVar("_T")


@dataclass
class Rounds:
    """What timed rounds collected, per function name."""

    event: dict[str, list[float]]
    host: dict[str, list[float]]
    # The parent's own clock over each request, less the event times the worker reported, per call: the input
    # refresh, flush, 1 ms sleep, sync and IPC, the same for every function unless the reported times are not
    # the real ones (a worker that rewrote its own timer) or the call does work the events do not see.
    overhead_ms: dict[str, list[float]]
    checks: dict[str, list[tuple[int, float, torch.Tensor, Any]]]
    rounds: int
    why: str
    digests: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)  # (set, scale, checksum) per call
    # Functions no longer timed once they were far past the zero-credit time (timed_rounds' `hopeless`).
    stopped_early: list[str] = field(default_factory=list)

    def pooled(self, other: Rounds) -> Rounds:
        """Both passes' samples together (another setup's rounds of the same functions)."""

        def cat(a: dict[str, list[_T]], b: dict[str, list[_T]]) -> dict[str, list[_T]]:
            return {n: a.get(n, []) + b.get(n, []) for n in {**a, **b}}

        return Rounds(
            cat(self.event, other.event),
            cat(self.host, other.host),
            cat(self.overhead_ms, other.overhead_ms),
            cat(self.checks, other.checks),
            self.rounds + other.rounds,
            f"{self.why}; then {other.why}",
            cat(self.digests, other.digests),
            [*self.stopped_early, *(n for n in other.stopped_early if n not in self.stopped_early)],
        )


# A timing request (one round of one function, or its samples) that runs far past that function's own earlier
# requests is a hang (a kernel that deadlocks on a timing-size shape, or on its 50th call), not a slow kernel:
# it is stopped after ROUND_FLOOR_S plus ROUND_FACTOR times the slowest earlier request, not after the stage's
# whole limit (the spec's timing_s, 600 s: the GPU held alone all that time). Floor and factor as for a
# correctness case after others passed (grader/correctness/verdict.py: CASE_FLOOR_S, CASE_FACTOR).
ROUND_FLOOR_S = 20.0
ROUND_FACTOR = 10.0


@dataclass
class RequestLimits:
    """The time limit of each timing request of a case. A function's first request has the spec's limit for one
    case (`case_s`: no earlier request to scale from); later ones ROUND_FLOOR_S + ROUND_FACTOR x its slowest
    earlier request; never more than the stage's limit (`timing_s`)."""

    cap_s: float  # the spec's timing_s
    first_s: float  # the spec's case_s
    slowest_s: dict[str, float] = field(default_factory=dict)  # function -> its slowest request so far

    def of(self, fn: str) -> float:
        if fn not in self.slowest_s:
            return min(self.cap_s, self.first_s)
        return min(self.cap_s, ROUND_FLOOR_S + ROUND_FACTOR * self.slowest_s[fn])

    def saw(self, fn: str, seconds: float) -> None:
        self.slowest_s[fn] = max(self.slowest_s.get(fn, 0.0), seconds)


def timed_rounds(
    units: list[tuple[str, str]],
    boxes: dict[str, Any],
    dead: dict[str, str],
    names: dict[str, list[str]],
    rule: stats.StopRule,
    rng: random.Random,
    n_out: int,
    last_k: dict[str, int],
    limit: float | RequestLimits,
    case_name: str,
    sets: int = MIN_SETS,
    hopeless: Callable[[str, Rounds], bool] | None = None,
) -> Rounds:
    """Round-robin over (worker, function) units, rotated each round, until the stop rule holds. hopeless(name,
    rounds so far), asked after each round: True stops timing that function (it is so slow that more calls could
    not change its credit: a slow kernel would otherwise hold the GPU for the whole time cap, at ~0.5 s a call)."""
    fns = [n for _, n in units]
    limits = limit if isinstance(limit, RequestLimits) else RequestLimits(limit, limit)
    out = Rounds(
        {n: [] for n in fns},
        {n: [] for n in fns},
        {n: [] for n in fns},
        {n: [] for n in fns},
        0,
        "",
        {n: [] for n in fns},
    )
    t_start = time.monotonic()
    rnd = 0
    while True:
        live = [u for u in units if u[0] not in dead and u[1] not in out.stopped_early]
        if not live:
            out.rounds = rnd
            return out
        for w, n in live[rnd % len(live) :] + live[: rnd % len(live)]:
            if w in dead:  # died earlier in this round
                continue
            plan, want = plan_round(rng, n_out, first=n not in last_k, prev_k=last_k.get(n), sets=sets)
            last_k[n] = plan[-1][0]
            try:
                t_req = time.monotonic()
                req: RoundRequest = {"names": [n], "plan": plan}
                r: RoundReply = boxes[w].request("time_round", req, timeout_s=limits.of(n), what=f"timing {case_name}")
                wall = (time.monotonic() - t_req) * 1e3
                limits.saw(n, wall / 1e3)
                expect_reply(_is_round_reply(r, n, len(plan)), f"timing {case_name}")
                out.overhead_ms[n].append((wall - sum(r[n]["event_ms"])) / len(plan))
                asked: SamplesRequest = {n: [(j, idx) for j, _, _, idx in want]}
                got: SamplesReply = boxes[w].request(
                    "time_samples", asked, timeout_s=limits.of(n), what=f"checking {case_name}"
                )
                expect_reply(
                    isinstance(got, dict)
                    and isinstance(got.get(n), list)
                    and len(got[n]) == len(want)
                    and all(isinstance(v, (torch.Tensor, str)) for v in got[n]),
                    f"checking {case_name}",
                )
            except WorkerFailure as e:
                dead[w] = e.line
                continue
            out.event[n] += r[n]["event_ms"]
            out.host[n] += r[n]["host_ms"]
            out.digests[n] += [(k, s, _checksum(d)) for (k, s), d in zip(plan, r[n]["digest"], strict=False)]
            for (_j, k, s, idx), sample in zip(want, got[n], strict=False):
                out.checks[n].append((k, s, idx, sample))
        rnd += 1
        if hopeless is not None:
            out.stopped_early += [n for n in fns if n not in out.stopped_early and out.event[n] and hopeless(n, out)]
        timed = [
            stats.summarize(out.event[n])
            for n in fns
            if out.event[n] and owner(names, n) not in dead and n not in out.stopped_early
        ]
        stop, out.why = rule.done(timed, time.monotonic() - t_start)
        if stop or "baselines" in dead:
            out.rounds = rnd
            return out


def _is_round_reply(r: Any, name: str, calls: int) -> bool:
    """The shape of Timer.round's reply for one function: a finite time per call on both clocks."""
    d = r.get(name) if isinstance(r, dict) else None
    if not isinstance(d, dict):
        return False
    return (
        all(
            isinstance(d.get(k), list)
            and len(d[k]) == calls
            and all(type(v) in (int, float) and v == v and abs(v) != float("inf") for v in d[k])
            for k in ("event_ms", "host_ms")
        )
        and isinstance(d.get("digest"), list)
        and len(d["digest"]) == calls
        and all(wire.tagged_float(v) is not None for v in d["digest"])
    )


def _checksum(v: Any) -> float:
    """A timed output's checksum from a checked reply: NaN (a non-tensor or wrong-size output) is an answer, and
    fails the checksum check as a wrong one."""
    f = wire.tagged_float(v)
    return float("nan") if f is None else f


def expect_reply(ok: bool, what: str) -> None:
    """A reply of the wrong shape was forged on the pipe by code in the worker: treat it as a failed worker."""
    if not ok:
        raise WorkerFailure(f"{what}: the worker sent a malformed reply (was the result pipe tampered with?)")


def owner(names: dict[str, list[str]], fn_name: str) -> str:
    """The worker that times `fn_name` (names: worker -> its functions)."""
    return next(w for w, ns in names.items() if fn_name in ns)


def median(xs: list[float]) -> float:
    """The median of a list of times, 0.0 for none."""
    return stats.summarize(xs).median if xs else 0.0
