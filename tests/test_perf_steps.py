"""The performance stage's steps alone (grader/performance/judgement.py, grader/performance/records.py): the wall-clock
check's first pass, the re-timing loop, and the judgement of one implementation's timing, each on typed records with
no worker."""

from __future__ import annotations

import pytest

from grader.performance import judgement, score, stats
from grader.performance.records import FirstPass, Rates, Timing
from grader.performance.rounds import Rounds
from grader.problem.spec import Curve
from grader.results import Code

TH = score.thresholds(
    Curve(zero_at="manual", partial_baseline="eager", partial_credit=0.5, full_at=("compiled", "eager")), 0.0,
    {"manual": 12.0, "eager": 6.0, "compiled": 3.0},
)


def rounds(event: dict[str, list[float]], overhead: dict[str, list[float]], n: int = 1) -> Rounds:
    names = list(event)
    return Rounds(
        event, {k: [v + 0.3 for v in xs] for k, xs in event.items()}, overhead, {k: [] for k in names}, n, "test",
        {k: [] for k in names},
    )


def timing(ms: float, overhead: list[float], first_pass: FirstPass | None = None) -> Timing:
    ev = stats.summarize([ms] * 5)
    return Timing(ev, ev, ms, False, Rates.of(ms, 10**9, 1e12, 6.0), 0.1, "ok", overhead, first_pass=first_pass)


def test_over_slack_picks_only_what_exceeds_the_slack():
    data = rounds({"ok": [3.0] * 5, "over": [3.0] * 5}, {"ok": [2.0 + 0.05] * 5, "over": [2.0 + 1.0] * 5})
    fp = judgement.over_slack(["ok", "over"], data, base_overhead=2.0)
    assert set(fp) == {"over"} and fp["over"].wall_excess_ms == pytest.approx(1.0)


def test_retime_replaces_times_and_stops_when_under_the_slack():
    data = rounds({"k": [3.0] * 5, "eager": [6.0] * 5}, {"k": [3.0] * 5, "eager": [2.0] * 5})
    fp = {"k": FirstPass(3.0, 1.0)}
    calls: list[list[str]] = []
    again = rounds({"k": [3.1] * 5, "eager": [6.0] * 5}, {"k": [2.0] * 5, "eager": [2.0] * 5}, n=3)
    base, n, confirmed = judgement.retime(fp, data, ["eager"], {}, calls.append, lambda names: again)
    assert calls == [["k"]] and n == 3 and base == {"k": 2.0} and confirmed == []
    assert data.event["k"] == [3.1] * 5 and fp["k"].retimed and fp["k"].retimes == 1


def test_retime_gives_up_after_max_retimes_and_keeps_the_last_pass():
    data = rounds({"k": [3.0] * 5, "eager": [6.0] * 5}, {"k": [3.0] * 5, "eager": [2.0] * 5})
    fp = {"k": FirstPass(3.0, 1.0)}
    calls: list[list[str]] = []
    again = rounds({"k": [3.0] * 5, "eager": [6.0] * 5}, {"k": [3.5] * 5, "eager": [2.0] * 5})
    _, _, confirmed = judgement.retime(fp, data, ["eager"], {}, calls.append, lambda names: again)
    assert len(calls) == judgement.MAX_RETIMES and fp["k"].retimes == judgement.MAX_RETIMES
    assert confirmed == ["k"]  # over the slack in every fresh worker: the excess is the code's


def test_retime_does_nothing_once_the_baselines_are_dead():
    data = rounds({"k": [3.0] * 5}, {"k": [3.0] * 5})
    calls: list[list[str]] = []
    assert judgement.retime({"k": FirstPass(3.0, 1.0)}, data, ["eager"], {"baselines": "died"}, calls.append,
                               lambda names: data) == ({}, 0, [])
    assert not calls


def test_judge_an_honest_fast_kernel_gets_full_credit_and_no_flag():
    t = timing(3.0, [2.0] * 5)
    judgement.judge(t, True, "ok", 2.0, 0.5, TH, 10**9, 1e12, 6.0)
    assert t.credit == 1.0 and not t.findings and t.wall_excess_ms == pytest.approx(0.0)


def test_judge_a_recurring_excess_is_flagged_and_scored_on_the_wall_clock():
    t = timing(3.0, [11.0] * 5, FirstPass(3.0, 9.0, retimes=2, retimed=True))
    judgement.judge(t, True, "ok", 2.0, 0.5, TH, 10**9, 1e12, 6.0)
    assert t.has(Code.WALL_EXCESS) and t.rates.effective_ms == pytest.approx(12.0) and t.credit == 0.0
    assert "recurred when re-timed (2 times)" in t.findings[0].text


def test_judge_wrong_outputs_or_below_the_floor_earn_nothing():
    wrong = timing(3.0, [2.0] * 5)
    judgement.judge(wrong, False, "element 7 wrong", 2.0, 0.5, TH, 10**9, 1e12, 6.0)
    assert wrong.credit == 0.0 and wrong.has(Code.TIMED_WRONG)
    fast = timing(0.1, [2.0] * 5)
    judgement.judge(fast, True, "ok", 2.0, 0.5, TH, 10**9, 1e12, 6.0)
    assert fast.credit == 0.0 and fast.has(Code.BELOW_FLOOR)


def test_a_timing_record_writes_the_layout_the_reports_read():
    t = timing(3.0, [2.0, 2.5], FirstPass(3.0, 1.0, retimes=1, retimed=True))
    judgement.judge(t, True, "ok", 2.0, 0.5, TH, 10**9, 1e12, 6.0)
    d = t.as_dict(retime_rounds=3)
    for key in ("event", "host", "effective_ms", "gbps", "pct_roofline", "speedup_vs_eager", "compile_s", "verified",
                "credit", "flags", "overhead_ms", "overhead_range_ms", "wall_excess_ms", "wall_derived_ms"):
        assert key in d, key
    assert d["first_pass"] == {"event_median_ms": 3.0, "wall_excess_ms": 1.0, "retimes": 1, "retimed": True,
                               "retime_rounds": 3}
    assert d["event"]["median"] == 3.0 and d["overhead_range_ms"] == [2.0, 2.5] and d["speedup_vs_eager"] == 2.0
