"""The parent's side of performance timing (grader/performance/stage.py `_time_case`), on CPU, with fake workers.

A timing worker runs untrusted code in the same process as the timer, so whatever it reports can be forged. The
parent's only trusted measure is its own clock around each request. These tests drive `_time_case` with fake
workers whose real duration per call (a sleep) and reported times are chosen by the test:
- an honest worker reports what it spends, and is scored on its event median, unflagged;
- a worker that reports a quarter of what it really spends (what a submission that rewrites `Timer.round`
  does) is flagged and scored on the time the parent's clock saw;
- timed outputs that are wrong lose the case, whatever the times say.
Fake times are in milliseconds of a fake clock: the `time` module is replaced where grader/performance/ reads it
(stage.py, rounds.py, workers.py; the `clock` fixture, used by every test here) by a clock that moves only when a
fake worker "spends" time, so the parent's wall-clock check sees exactly the real ms per call the test chose, and no
result depends on how loaded the machine is.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from grader import performance
from grader.child.inputs import digest, digest_weights
from grader.correctness.target import Target
from grader.performance import rounds, stage, stats, workers
from grader.problem import operands
from grader.problem.inputs import make_input_seeded
from grader.problem.reference import load_reference
from grader.problem.spec import Case
from grader.sandbox import WorkerFailure

SECRET = 12345
MS = {"manual": 12.0, "eager": 6.0, "compiled": 3.0}  # the baselines' real (and reported) ms per call


class FakeClock:
    """Stands in for the `time` module in grader/performance/ (stage.py, rounds.py, workers.py): monotonic() is a
    fake clock that only advance() moves. Everything else is the real module's."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms / 1e3

    def __getattr__(self, name: str):
        return getattr(time, name)


CLOCK: FakeClock | None = None  # the running test's fake clock (the `clock` fixture)


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    """Every test here times on a fake clock: the parent's clock over a request is exactly the real ms per call the
    fake workers spend, never a sleep measured on a busy machine."""
    global CLOCK
    CLOCK = FakeClock()
    # Each module that reads the clock: the case's wall times (stage), the wall-clock check over each request
    # (rounds), the load times (workers).
    for module in (stage, rounds, workers):
        monkeypatch.setattr(module, "time", CLOCK)
    yield CLOCK
    CLOCK = None


class FakeWorker:
    """Answers the timing requests like grader/child/worker.py, with a chosen real and reported time per call: the
    real time passes on the fake clock (the `clock` fixture), not in a sleep."""

    def __init__(self, fns: dict[str, tuple[float, float]], wrong: bool = False):
        self.fns = fns  # name -> (real ms, reported ms)
        self.wrong = wrong
        self.sets: list[torch.Tensor] = []
        self.kept: dict[str, list[torch.Tensor]] = {}

    def request(self, kind: str, p: dict, timeout_s: float = 0.0, what: str = "") -> dict:
        if kind == "time_round":
            self.timed = [*getattr(self, "timed", []), *p["names"]]
        if kind == "time_setup":
            self.setup_p = p
            case = Case(**p["inputs"][0]["case"])
            self.sets = [make_input_seeded(case, "cpu", s) for s in p["inputs"][0]["seeds"]]
            self.weights = digest_weights(p["n_out"], p["digest_seed"], "cpu")
            warm = [n for n in self.fns if n in p.get("names", self.fns)]  # as Timer.setup: only those asked for
            self.warmed = [*getattr(self, "warmed", []), *warm]
            return {"compile_s": {n: 0.0 for n in warm}, "warmup_calls": {n: 3 for n in warm}}
        if kind == "time_round":
            out, self.kept = {}, {}
            for n in p["names"]:
                # A function timed before its warm-up would have its first call (a compile) in a timed call.
                assert n in getattr(self, "warmed", []), f"{n} timed but never warmed up"
                real, reported = self.fns[n]
                ev, host, ys = [], [], []
                for k, scale in p["plan"]:
                    y = F.glu(self.sets[k] * scale, dim=-1)
                    ys.append(y + 1.0 if self.wrong else y)
                    CLOCK.advance(real)
                    ev.append(reported)
                    host.append(reported + 0.3)  # the same host overhead for everyone: no hidden-work flag
                self.kept[n] = ys
                out[n] = {"event_ms": ev, "host_ms": host, "digest": [float(digest(y, self.weights)) for y in ys]}
            return out
        if kind == "time_samples":
            return {n: [self.kept[n][j].reshape(-1)[idx] for j, idx in wants] for n, wants in p.items()}
        raise AssertionError(f"unexpected request {kind}")


@pytest.fixture(scope="module")
def glu(problem):
    case = replace(problem.performance.cases[0], shape=(8, 64), dtype="float32", points=4.0)
    return problem, case, load_reference(problem)


def target(name: str) -> SimpleNamespace:
    """What _time_case reads of a grading target: its implementation's name and kind."""
    return SimpleNamespace(impl=SimpleNamespace(name=name, kind="triton"))


def run_case(glu, impls: dict[str, FakeWorker], case: Case | None = None, baselines: FakeWorker | None = None,
             fresh: dict[str, list[FakeWorker | None]] | None = None, restarts: list[list[str]] | None = None,
             confirmed: dict[str, str] | None = None, record=None):
    """Time `impls` against the fake baselines. A re-timing restarts a worker (workers.restart_workers): here
    the next of `fresh[name]` takes its place (None: it fails to start), or, with none left, the same fake worker
    stands for a new process that behaves the same. `restarts` collects the names of each restart."""
    problem, default_case, ref = glu
    case = case or default_case
    boxes = {"baselines": baselines or FakeWorker({n: (ms, ms) for n, ms in MS.items()}), **impls}
    dead: dict[str, str] = {}
    targets = [target(n) for n in impls]
    rule = stats.StopRule(rel_sem=0.5, min_n=15, max_n=15, max_seconds=60.0)  # 3 rounds

    def restart(names: list[str]) -> None:
        (restarts if restarts is not None else []).append(list(names))
        for n in names:
            old, queue = boxes[n], (fresh or {}).get(n, [])
            if queue:
                new = queue.pop(0)
                if new is None:  # it failed to start: the old worker stays (workers.restart_workers)
                    continue
                boxes[n] = new
            boxes[n].request("time_setup", old.setup_p)  # a fresh worker makes its own input sets

    grade = stage.GradeTiming(
        problem, targets, ref, boxes, dead, device="cpu", secret=SECRET, rule=rule, rng=random.Random(0),
        copy_bps=1e15, ceiling_bps=1e15, progress=lambda s: None, restart=restart,
        confirmed=confirmed if confirmed is not None else {}, record=record,
    )
    res = stage._time_case(stage.CaseTiming(grade, case))
    return {t.part: t for t in res.tests}, res.info


def test_honest_and_forged_timings_in_one_run(glu):
    # Both honest and forger report the compiled baseline's time; the forger really spends 4x that.
    tests, info = run_case(glu, {"honest": FakeWorker({"honest": (3.0, 3.0)}), "forger": FakeWorker({"forger": (12.0, 3.0)})})
    honest, forger = tests["honest"], tests["forger"]
    assert honest.extra["credit"] == 1.0 and not honest.extra["flags"], honest.output
    # The fake clock saw exactly what the honest worker reported: no excess at all, whatever the machine's load.
    assert abs(info["impls"]["honest"]["wall_excess_ms"]) < 1e-9, info["impls"]["honest"]
    assert abs(info["impls"]["forger"]["wall_excess_ms"] - 9.0) < 1e-9, info["impls"]["forger"]
    assert any("grader's own clock" in f for f in forger.extra["flags"]), forger.output
    # Scored on what the parent's clock saw (12 ms, the manual baseline's time: zero credit), not on 3 ms.
    assert abs(forger.extra["effective_ms"] - 12.0) < 1e-9, forger.output
    assert forger.extra["credit"] < 0.1, forger.output
    assert forger.score < honest.score
    assert info["impls"]["forger"]["first_pass"]["retimed"] and "recurred when re-timed" in forger.output, forger.output
    assert "first_pass" not in info["impls"]["honest"]


class Phased(FakeWorker):
    """Real and reported ms per call for its first `n_first` timing requests, then others: a process with a
    passing hiccup, or a forger that behaves once it sees it is being re-timed."""

    def __init__(self, name: str, first: tuple[float, float], then: tuple[float, float], n_first: int = 3):
        super().__init__({name: first})
        self.name, self.first, self.then, self.n_first, self.requests = name, first, then, n_first, 0

    def request(self, kind, p, timeout_s=0.0, what=""):
        if kind == "time_round":
            self.fns[self.name] = self.first if self.requests < self.n_first else self.then
            self.requests += 1
        return super().request(kind, p, timeout_s, what)


def test_a_passing_hiccup_is_retimed_and_costs_nothing(glu):
    # 3 ms kernels whose process lost 6 ms per call (unreported) during the whole first pass (3 rounds), then not.
    tests, info = run_case(glu, {"hiccup": Phased("hiccup", first=(9.0, 3.0), then=(3.0, 3.0))})
    t, d = tests["hiccup"], info["impls"]["hiccup"]
    assert d["first_pass"]["retimed"] and d["first_pass"]["wall_excess_ms"] > 4.0, d
    assert t.extra["credit"] == 1.0 and not t.extra["flags"], t.output
    assert abs(d["wall_excess_ms"]) < 1e-9 and "re-timed" in t.output, t.output


def test_a_hiccup_that_outlasts_one_retiming_is_retimed_again_and_costs_nothing(glu):
    # Lost 6 ms per call through the first pass and the first re-timing (3 rounds each), then not.
    tests, info = run_case(glu, {"hiccup": Phased("hiccup", first=(9.0, 3.0), then=(3.0, 3.0), n_first=6)})
    t, d = tests["hiccup"], info["impls"]["hiccup"]
    assert d["first_pass"]["retimes"] == performance.MAX_RETIMES == 2, d
    assert t.extra["credit"] == 1.0 and not t.extra["flags"], t.output


def test_a_forger_is_retimed_at_most_max_retimes_and_then_scored_on_the_clock(glu):
    tests, info = run_case(glu, {"forger": FakeWorker({"forger": (12.0, 3.0)})})
    d, t = info["impls"]["forger"], tests["forger"]
    assert d["first_pass"]["retimes"] == performance.MAX_RETIMES and d["first_pass"]["retime_rounds"] == 3 * performance.MAX_RETIMES, d
    assert t.extra["credit"] < 0.1 and "recurred when re-timed (2 times)" in t.output, t.output


def test_a_forger_that_behaves_only_when_retimed_is_scored_on_its_real_time(glu):
    # Forges 4x in the first pass, then reports honestly: only the re-timing counts, so it gets its real 12 ms.
    tests, info = run_case(glu, {"sly": Phased("sly", first=(12.0, 3.0), then=(12.0, 12.0))})
    t = tests["sly"]
    assert info["impls"]["sly"]["first_pass"]["retimed"], info["impls"]["sly"]
    assert abs(t.extra["effective_ms"] - 12.0) < 1e-9 and t.extra["credit"] < 0.1, t.output


def test_a_retiming_runs_in_a_fresh_worker_so_one_slow_process_costs_nothing(glu):
    # The first process of a correct 3 ms kernel carries 6 ms per call of its own (where its buffers and threads
    # landed); a new process does not. Only the fresh worker's pass counts: full credit, no flag.
    slow_process, fresh_process = FakeWorker({"k": (9.0, 3.0)}), FakeWorker({"k": (3.0, 3.0)})
    restarts: list[list[str]] = []
    tests, info = run_case(glu, {"k": slow_process}, fresh={"k": [fresh_process]}, restarts=restarts)
    t, d = tests["k"], info["impls"]["k"]
    assert restarts == [["k"]], restarts
    assert fresh_process.kept, "the re-timing was not done by the fresh worker"
    assert d["first_pass"]["retimes"] == 1 and t.extra["credit"] == 1.0 and not t.extra["flags"], t.output


def test_a_forger_is_caught_in_every_fresh_worker(glu):
    # Forging is the code's doing, not the process's: each new process forges again, and is caught again.
    restarts: list[list[str]] = []
    fresh = {"f": [FakeWorker({"f": (12.0, 3.0)}), FakeWorker({"f": (12.0, 3.0)})]}
    tests, info = run_case(glu, {"f": FakeWorker({"f": (12.0, 3.0)})}, fresh=fresh, restarts=restarts)
    assert restarts == [["f"], ["f"]] and not fresh["f"], restarts
    assert tests["f"].extra["credit"] < 0.1 and "recurred when re-timed (2 times)" in tests["f"].output


def test_an_excess_confirmed_on_one_case_is_not_retimed_on_the_next(glu):
    # The grade's cases share `confirmed`. A forger re-timed MAX_RETIMES times on the first case, over the slack in
    # every fresh worker, is scored on its clock on the second without costing the GPU more workers; a kernel
    # that merely hiccups on the second case (never confirmed) is still re-timed there, and costs nothing.
    confirmed: dict[str, str] = {}
    problem, case, _ = glu
    first_restarts: list[list[str]] = []
    tests, info = run_case(glu, {"f": FakeWorker({"f": (12.0, 3.0)})}, restarts=first_restarts, confirmed=confirmed)
    assert first_restarts == [["f"]] * performance.MAX_RETIMES and confirmed == {"f": case.name}
    second = replace(case, name="second")
    restarts: list[list[str]] = []
    tests, info = run_case(
        glu,
        {"f": FakeWorker({"f": (12.0, 3.0)}), "hiccup": Phased("hiccup", first=(9.0, 3.0), then=(3.0, 3.0))},
        case=second, restarts=restarts, confirmed=confirmed,
    )
    assert restarts == [["hiccup"]], restarts  # the forger is not in any re-timing
    f = tests["f"]
    assert info["impls"]["f"]["first_pass"] == {
        "event_median_ms": 3.0, "wall_excess_ms": pytest.approx(9.0), "retimed": False, "retime_rounds": 3,
        "confirmed_on": case.name,
    }, info["impls"]["f"]
    assert abs(f.extra["effective_ms"] - 12.0) < 1e-9 and f.extra["credit"] < 0.1, f.output
    assert f"recurred in every re-timing on {case.name}" in f.output, f.output
    assert tests["hiccup"].extra["credit"] == 1.0 and not tests["hiccup"].extra["flags"], tests["hiccup"].output
    assert confirmed == {"f": case.name}  # the second case confirmed nothing new


def test_a_fresh_worker_that_fails_to_start_leaves_the_old_one_timing(glu):
    old = FakeWorker({"f": (12.0, 3.0)})
    tests, info = run_case(glu, {"f": old}, fresh={"f": [None, None]})
    t = tests["f"]
    assert info["impls"]["f"]["first_pass"]["retimes"] == 2, info["impls"]["f"]
    assert abs(t.extra["effective_ms"] - 12.0) < 1e-9 and t.extra["credit"] < 0.1, t.output


def test_a_worker_cannot_gain_by_reporting_more_than_it_spends(glu):
    # Over-reporting makes the excess negative: the event median (the larger number) is what counts.
    tests, _ = run_case(glu, {"slowpoke": FakeWorker({"slowpoke": (3.0, 6.0)})})
    t = tests["slowpoke"]
    assert abs(t.extra["effective_ms"] - 6.0) < 1e-9, t.output
    assert t.extra["credit"] < 1.0


def test_wrong_timed_outputs_lose_the_case(glu):
    tests, _ = run_case(glu, {"wrong": FakeWorker({"wrong": (3.0, 3.0)}, wrong=True)})
    t = tests["wrong"]
    assert t.extra["credit"] == 0.0 and t.score == 0.0
    assert any("timed outputs are wrong" in f for f in t.extra["flags"]), t.output


class LateAnswers(FakeWorker):
    """Class 10 of issue 15: the timed calls only spin (their outputs are garbage), and the sampled elements are
    answered later, when the parent asks for them, from the worker's own inputs and plan, as a submission that
    reaches the grader's state through its frames would. Its checksums are honest: they are of the outputs the
    calls left, which is what the real worker takes right after each call."""

    def request(self, kind, p, timeout_s=0.0, what=""):
        if kind == "time_round":
            self.plan = p["plan"]
        if kind == "time_samples":
            return {n: [F.glu(self.sets[self.plan[j][0]] * self.plan[j][1], dim=-1).reshape(-1)[idx] for j, idx in wants]
                    for n, wants in p.items()}
        return super().request(kind, p, timeout_s, what)


def test_answers_produced_after_the_call_earn_nothing(glu):
    tests, _ = run_case(glu, {"late": LateAnswers({"late": (3.0, 3.0)}, wrong=True)})
    t = tests["late"]
    assert t.extra["credit"] == 0.0 and t.score == 0.0, t.output
    assert any("not there" in f or "timed outputs are wrong" in f for f in t.extra["flags"]), t.output
    assert "checksum" in t.output, t.output


def test_honest_outputs_pass_the_checksum(glu):
    tests, info = run_case(glu, {"honest": FakeWorker({"honest": (3.0, 3.0)})})
    assert tests["honest"].extra["credit"] == 1.0
    assert "checksummed right after their call" in info["impls"]["honest"]["verified"], info["impls"]["honest"]


def test_each_request_times_one_function(glu):
    """Equal-shaped requests are what make the wall-clock comparison fair: the baseline worker's three functions
    are timed in three requests of 5 calls each, like every implementation's."""
    seen: list[list[str]] = []

    class Spy(FakeWorker):
        def request(self, kind, p, timeout_s=0.0, what=""):
            if kind == "time_round":
                seen.append(list(p["names"]))
            return super().request(kind, p, timeout_s, what)

    problem, case, ref = glu
    boxes = {"baselines": Spy({n: (1.0, 1.0) for n in MS}), "x": Spy({"x": (1.0, 1.0)})}
    rule = stats.StopRule(rel_sem=0.5, min_n=5, max_n=5, max_seconds=60.0)
    grade = stage.GradeTiming(problem, [target("x")], ref, boxes, {}, device="cpu", secret=SECRET, rule=rule,
                              rng=random.Random(1), copy_bps=1e15, ceiling_bps=1e15, progress=lambda s: None)
    stage._time_case(stage.CaseTiming(grade, case))
    assert seen and all(len(names) == 1 for names in seen)
    # The one round times every function once (a re-timing, if the machine is busy enough to trigger one, follows).
    assert sorted(n for names in seen[: len(MS) + 1] for n in names) == sorted([*MS, "x"])


@pytest.mark.parametrize(
    "workers, cpus, spins",
    [(3, 16, True), (3, 5, True), (3, 4, False), (2, 2, False), (1, 3, True)],
)
def test_workers_spin_only_with_a_core_each_plus_the_parent(workers, cpus, spins):
    assert (performance.spin_budget(workers, cpus) > 0) is spins


def test_setup_tells_every_worker_how_long_to_spin(glu, monkeypatch):
    got: list[float] = []

    class Spy(FakeWorker):
        def request(self, kind, p, timeout_s=0.0, what=""):
            if kind == "time_setup":
                got.append(p["spin_s"])
            return super().request(kind, p, timeout_s, what)

    monkeypatch.setattr(workers, "cpus", lambda: 64)
    problem, case, ref = glu
    boxes = {"baselines": Spy({n: (1.0, 1.0) for n in MS}), "x": Spy({"x": (1.0, 1.0)}), "gone": None}
    rule = stats.StopRule(rel_sem=0.5, min_n=5, max_n=5, max_seconds=60.0)
    grade = stage.GradeTiming(problem, [target("x")], ref, boxes, {"gone": "died"}, device="cpu", secret=SECRET,
                              rule=rule, rng=random.Random(2), copy_bps=1e15, ceiling_bps=1e15, progress=lambda s: None)
    res = stage._time_case(stage.CaseTiming(grade, case))
    assert got == [performance.SPIN_S] * 2
    assert res.info["worker_spin_s"] == performance.SPIN_S
    x = res.info["impls"]["x"]
    lo, hi = x["overhead_range_ms"]
    assert lo <= x["overhead_ms"] <= hi


def test_spin_wait_returns_as_soon_as_a_request_arrives_and_gives_up_after_its_budget(monkeypatch):
    # On a fake clock that moves 1 ms per reading, and a fake pipe whose message arrives at a chosen poll: the
    # answer and the number of polls are exact, whatever the machine's load.
    import multiprocessing

    from grader.child import worker

    class TickClock:
        def __init__(self) -> None:
            self.now = 0.0

        def __call__(self) -> float:
            self.now += 1e-3
            return self.now

    class Conn:
        def __init__(self, ready_at: int | None) -> None:
            self.ready_at, self.polls = ready_at, 0

        def poll(self, timeout: float) -> bool:
            assert timeout == 0, "spin_wait must poll without blocking"
            self.polls += 1
            return self.ready_at is not None and self.polls >= self.ready_at

    tick = TickClock()
    monkeypatch.setattr(worker, "_monotonic", tick)
    idle = Conn(ready_at=None)
    assert worker.spin_wait(idle, 0.05) is False
    assert tick.now >= 0.05 and 45 <= idle.polls <= 50, (tick.now, idle.polls)  # it spun for its whole budget
    busy = Conn(ready_at=3)
    assert worker.spin_wait(busy, 10.0) is True
    assert busy.polls == 3  # the third poll saw the message: it returned at once, nowhere near its 10 s budget
    # And with a real pipe: a message already waiting is seen on the first poll.
    monkeypatch.undo()
    parent, child = multiprocessing.Pipe()
    parent.send(("time_round", {}))
    assert worker.spin_wait(child, 10.0) is True
    assert child.recv() == ("time_round", {})


# -- workers started by the pipeline before the correctness stage ------------------------------------------


class PreStarted(FakeWorker):
    """A worker as start_workers hands it over: not yet waited for, not loaded. Logs every call."""

    def __init__(self, fns: dict[str, tuple[float, float]], fail_load: bool = False, queued: list | None = None):
        super().__init__(fns)
        self.log: list[str] = []
        self.fail_load = fail_load
        self.queued = queued or []  # replies of commands start_workers queued (the baselines' `prepare`)
        self.drained: list = []  # as Sandbox.drained: every reply drain collected so far

    def wait_ready(self, timeout_s: float) -> None:
        self.log.append("ready")

    def drain(self, timeout_s: float) -> list:
        self.log.append("drain")
        out, self.queued = self.queued, []
        self.drained += out
        return out

    def close(self) -> None:
        self.log.append("close")

    def request(self, kind: str, p: dict, timeout_s: float = 0.0, what: str = "") -> dict:
        self.log.append(kind)
        if kind == "load":
            if self.fail_load:
                raise WorkerFailure("importing glu_triton.py failed: boom")
            return "loaded"
        if kind == "copy_bandwidth":
            return {"bytes_per_s": 1e15, "read2_write1_bytes_per_s": 1e15, "name": "fake"}
        return super().request(kind, p, timeout_s, what)


def _one_case_problem(glu):
    problem, case, ref = glu
    return replace(problem, performance=replace(problem.performance, cases=(case,))), ref


@pytest.mark.parametrize("fail_load", [False, True])
def test_run_performance_uses_the_prestarted_workers_and_always_closes_them(glu, monkeypatch, fail_load):
    problem, ref = _one_case_problem(glu)
    impl = problem.implementations["triton"]
    targets = [Target(impl, "glu_triton.py", "glu_triton.py")]
    prepared = {problem.performance.cases[0].name: {"manual": 0.01, "eager": 0.02, "compiled": 7.5}}
    started = {
        "baselines": PreStarted({n: (ms, ms) for n, ms in MS.items()}, queued=[prepared]),
        "triton": PreStarted({"triton": (3.0, 3.0)}, fail_load),
    }

    def no_spawn(*a, **k):
        raise AssertionError("run_performance spawned a worker although the pipeline had started them")

    monkeypatch.setattr(workers, "Sandbox", no_spawn)
    rule = stats.StopRule(rel_sem=0.5, min_n=15, max_n=15, max_seconds=60.0)
    tests, info = performance.run_performance(problem, targets, ref, device="cpu", secret=SECRET, rule=rule, started=started)

    base, tri = started["baselines"].log, started["triton"].log
    # Loaded (which is where a worker calibrates its timer) after it is ready and its queued replies are in,
    # and before anything is timed.
    assert base[:3] == ["ready", "drain", "load"] and "copy_bandwidth" in base and base.index("copy_bandwidth") < base.index("time_setup")
    # The first calls made while correctness ran are what the report gives as the baselines' compile times.
    assert info["baseline_first_calls_s"] == prepared
    (ci,) = info["cases"].values()
    assert ci["baselines"]["compiled"]["compile_s"] == 7.5 and set(info["load_wall_s"]) >= {"total", "baselines"}
    assert base[-1] == "close" and tri[-1] == "close"
    (t,) = [t for t in tests if t.part == "triton"]
    if fail_load:
        assert "time_setup" not in tri and t.score == 0.0 and "boom" in t.output, t.output
    else:
        assert tri[:3] == ["ready", "drain", "load"] and "time_round" in tri
        assert t.extra["credit"] == 1.0, t.output
    assert "fake" == info["device"]["name"]


def test_every_clock_the_stage_reads_is_the_fake_one(glu):
    """The `clock` fixture replaces `time` in each module of grader/performance/ that reads it: the load times
    (workers.py) and the case's wall times (stage.py) are the fake clock's too, not only the wall-clock check."""

    class SlowLoad(PreStarted):
        def __init__(self, fns: dict[str, tuple[float, float]], load_ms: float):
            super().__init__(fns)
            self.load_ms = load_ms

        def request(self, kind, p, timeout_s=0.0, what=""):
            if kind == "load":
                CLOCK.advance(self.load_ms)
            return super().request(kind, p, timeout_s, what)

    problem, ref = _one_case_problem(glu)
    targets = [Target(problem.implementations["triton"], "glu_triton.py", "glu_triton.py")]
    started = {"baselines": SlowLoad({n: (ms, ms) for n, ms in MS.items()}, 250.0),
               "triton": SlowLoad({"triton": (3.0, 3.0)}, 500.0)}
    rule = stats.StopRule(rel_sem=0.5, min_n=15, max_n=15, max_seconds=60.0)  # 3 rounds
    _, info = performance.run_performance(problem, targets, ref, device="cpu", secret=SECRET, rule=rule, started=started)
    assert info["load_wall_s"] == {"total": 0.75, "baselines": 0.25, "triton": 0.5}, info["load_wall_s"]
    (ci,) = info["cases"].values()
    # 3 rounds of 5 calls of each function: (12 + 6 + 3 + 3) ms x 15 = 0.36 s on the fake clock; nothing else moves it.
    assert ci["wall_s"] == {"setup": 0.0, "rounds": 0.36, "verify": 0.0}, ci["wall_s"]


def test_run_performance_closes_prestarted_workers_when_there_is_nothing_to_time(glu):
    problem, ref = _one_case_problem(glu)
    started = {"baselines": PreStarted({})}
    assert performance.run_performance(replace(problem, performance=None), [], ref, device="cpu", secret=SECRET, started=started) == ([], {})
    assert started["baselines"].log == ["close"]


def test_a_timing_worker_calibrates_before_it_imports_code_under_test(tmp_path, monkeypatch):
    # Timing workers start while the correctness stage still runs, so they calibrate in load(); that must
    # still come before the submission's module runs a single line (it could patch what calibration uses).
    import builtins

    from grader.child import worker

    events: list[str] = []

    class FakeTimer:
        calibrated = False

        def calibrate(self) -> None:
            events.append("calibrate")
            self.calibrated = True

    w = worker.Worker("cpu")
    w.timer = FakeTimer()
    mod = tmp_path / "glu_triton.py"
    mod.write_text("import builtins\nbuiltins._grader_test_events.append('import')\n\ndef glu_triton(x):\n    return x\n")
    monkeypatch.setattr(builtins, "_grader_test_events", events, raising=False)
    w.load({"kind": "triton", "path": str(mod), "impl": "triton", "entry": "glu_triton", "display": "glu_triton.py"})
    assert events == ["calibrate", "import"]
    w.load({"kind": "triton", "path": str(mod), "impl": "triton", "entry": "glu_triton", "display": "glu_triton.py"})
    assert events == ["calibrate", "import", "import"], "calibrated once"


class Malformed(FakeWorker):
    """Valid data of the wrong shape, as code in the worker could write on its pipe: times that are not numbers,
    too few of them, or samples that are not tensors."""

    def __init__(self, name: str, how: str):
        super().__init__({name: (3.0, 3.0)})
        self.name, self.how = name, how

    def request(self, kind, p, timeout_s=0.0, what=""):
        r = super().request(kind, p, timeout_s, what)
        if kind == "time_round" and self.how == "nan":
            r[self.name]["event_ms"][0] = float("nan")
        if kind == "time_round" and self.how == "short":
            r[self.name]["event_ms"] = r[self.name]["event_ms"][:1]
        if kind == "time_round" and self.how == "none":
            return None
        if kind == "time_samples" and self.how == "samples":
            return {self.name: [0.0 for _ in r[self.name]]}
        if kind == "time_setup" and self.how == "setup":
            return {"compile_s": "fast"}
        return r


class PerSetup(FakeWorker):
    """A kernel whose (real, reported) ms per call depends on which setup it is in: where its buffers landed."""

    def __init__(self, name: str, per_setup: list[tuple[float, float]]):
        super().__init__({name: per_setup[0]})
        self.name, self.per_setup, self.setups = name, per_setup, 0

    def request(self, kind, p, timeout_s=0.0, what=""):
        if kind == "time_setup":
            self.fns[self.name] = self.per_setup[min(self.setups, len(self.per_setup) - 1)]
            self.setups += 1
        return super().request(kind, p, timeout_s, what)


def test_a_case_with_several_setups_pools_their_rounds(glu):
    # Slow buffers in the first setup only: one setup would score 3.6 ms, three pooled score the typical 3.0.
    _, case, _ = glu
    k = PerSetup("k", [(3.6, 3.6), (3.0, 3.0), (3.0, 3.0)])
    base = PerSetup("compiled", [(MS["compiled"], MS["compiled"])])
    base.fns = {n: (ms, ms) for n, ms in MS.items()}
    tests, info = run_case(glu, {"k": k}, case=replace(case, setups=3), baselines=base)
    d = info["impls"]["k"]
    assert k.setups == 3 and base.setups == 3, (k.setups, base.setups)
    assert info["setups"] == 3 and info["rounds"] == 9 and d["event"]["n"] == 45, info
    assert abs(d["effective_ms"] - 3.0) < 1e-9 and tests["k"].extra["credit"] == 1.0, tests["k"].output
    assert "first_pass" not in d  # the same overhead as the baselines' in every setup: nothing to re-time
    single, _ = run_case(glu, {"k": PerSetup("k", [(3.6, 3.6), (3.0, 3.0)])})
    assert abs(single["k"].extra["effective_ms"] - 3.6) < 1e-9


@pytest.mark.parametrize("how", ["nan", "short", "none", "samples", "setup"])
def test_a_malformed_timing_reply_loses_that_part_and_the_case_completes(glu, how):
    tests, info = run_case(glu, {"honest": FakeWorker({"honest": (3.0, 3.0)}), "bad": Malformed("bad", how)})
    assert tests["bad"].score == 0.0 and "malformed reply" in tests["bad"].output, tests["bad"].output
    assert tests["honest"].extra["credit"] == 1.0, tests["honest"].output


# -- the trusted worker's `prepare`, queued before the correctness stage ---------------------------------------


def _prep_payload(problem, cases) -> dict:
    # eager and manual only: a CPU test must not depend on Inductor's C++ toolchain; on a GPU `compiled` is the
    # point (tests/test_gpu.py grades with it).
    return {"kind": "reference", "path": str(problem.reference), "display": "baselines",
            "baselines": {"manual": {"fn": "manual"}, "eager": {"fn": "eager"}}, "cases": cases}


def test_prepare_makes_each_first_call_per_perf_shape_and_load_keeps_those_functions(glu):
    from dataclasses import asdict

    from grader.child import worker

    problem, case, _ = glu
    padded = replace(case, name="padded", shape=(4, 32), pad=8)
    w = worker.Worker("cpu")
    first = w.prepare(_prep_payload(problem, [asdict(case), asdict(padded)]))
    assert set(first) == {case.name, "padded"} and all(set(v) == {"manual", "eager"} for v in first.values())
    assert all(t >= 0.0 for v in first.values() for t in v.values())
    assert w.fns["eager"].__name__ == "eager"
    # load() after prepare() neither re-imports nor re-wraps: the compiled code is reused by the timed calls.
    marked = {n: (lambda f: (lambda x: f(x)))(f) for n, f in w.fns.items()}
    w.fns.update(marked)
    assert w.load(_prep_payload(problem, [])) == "loaded" and w.fns == marked


def test_a_case_that_fails_in_prepare_is_left_to_setup_and_the_others_are_prepared(glu, tmp_path):
    # prepare runs beside the correctness stage: running out of memory there (a small GPU) must not cost the
    # speed grade. The failed case is simply not prepared; its first call is made by time_setup as before.
    from dataclasses import asdict

    from grader.child import worker

    problem, case, _ = glu
    big = replace(case, name="big", shape=(6, 64))
    ref = tmp_path / "reference.py"
    ref.write_text(
        "import torch\n"
        "def manual(x):\n    return x[..., : x.shape[-1] // 2] * torch.sigmoid(x[..., x.shape[-1] // 2 :])\n"
        "def eager(x):\n"
        "    if x.shape[0] == 6:\n        raise torch.cuda.OutOfMemoryError('CUDA out of memory (simulated)')\n"
        "    return torch.nn.functional.glu(x, dim=-1)\n"
    )
    w = worker.Worker("cpu")
    first = w.prepare({**_prep_payload(problem, [asdict(big), asdict(case)]), "path": str(ref)})
    assert set(first) == {case.name} and set(first[case.name]) == {"manual", "eager"}, first
    assert w.load({**_prep_payload(problem, []), "path": str(ref)}) == "loaded" and set(w.fns) == {"manual", "eager"}


def test_prepare_refuses_code_under_test(glu, tmp_path):
    from grader.child import worker

    mod = tmp_path / "glu_triton.py"
    mod.write_text("raise SystemExit('imported')\n")
    w = worker.Worker("cpu")
    with pytest.raises(ValueError, match="trusted baselines only"):
        w.prepare({"kind": "triton", "path": str(mod), "impl": "triton", "entry": "glu_triton", "display": "glu_triton.py"})
    assert not w.fns


def test_a_queued_command_is_answered_in_order_after_the_greeting_and_blocks_other_requests_until_drained(glu):
    from dataclasses import asdict

    from grader.sandbox import Sandbox

    problem, case, _ = glu
    with Sandbox("cpu", wait=False) as box:
        box.send("prepare", _prep_payload(problem, [asdict(case)]), what="compiling the baselines")
        with pytest.raises(RuntimeError, match="drain first"):
            box.request("load", _prep_payload(problem, []), timeout_s=60, what="loading")
        (first,) = box.drain(timeout_s=120)
        assert set(first[case.name]) == {"manual", "eager"}
        assert box.ready and box.pending == [] and box.drain(timeout_s=1) == []
        assert box.request("load", _prep_payload(problem, []), timeout_s=60, what="loading") == "loaded"
        # A queued command that fails is reported by drain, as one line.
        box.send("prepare", {"kind": "cuda"}, what="compiling the baselines")
        with pytest.raises(WorkerFailure, match="trusted baselines only"):
            box.drain(timeout_s=60)


def test_settle_waits_for_the_baselines_prepare_and_keeps_its_reply_for_the_load(glu):
    """batch --per-gpu: before another grade may time on the GPU, this grade's workers are up and the baselines'
    torch.compile is over (workers.settle); the reply it collected is what load_workers reports afterwards."""
    from dataclasses import asdict

    from grader.sandbox import Sandbox

    problem, case, _ = glu
    with Sandbox("cpu", wait=False, trusted=True) as box, Sandbox("cpu", wait=False) as other:
        box.send("prepare", _prep_payload(problem, [asdict(case)]), what="compiling the baselines")
        workers.settle({"baselines": box, "triton": other}, limit=120)
        assert box.ready and other.ready and box.pending == []
        (first,) = box.drained
        assert set(first[case.name]) == {"manual", "eager"}
        assert box.drain(timeout_s=1) == [] and box.drained == [first]  # load_workers' drain finds it kept


@pytest.mark.parametrize("starts", [True, False])
def test_restart_workers_replaces_a_worker_only_once_its_successor_is_ready(glu, monkeypatch, starts):
    problem, case, _ = glu
    log: list[tuple[str, str]] = []

    class Box:
        def __init__(self, tag: str):
            self.tag = tag

        def wait_ready(self, timeout_s):
            log.append((self.tag, "ready"))
            if not starts:
                raise WorkerFailure("timed out after 180 s", fatal=True, reason="timeout")

        def request(self, cmd, p, timeout_s, what):
            log.append((self.tag, cmd))

        def close(self):
            log.append((self.tag, "close"))

    monkeypatch.setattr(workers, "Sandbox", lambda *a, **k: Box("new"))
    old = Box("old")
    boxes, dead = {"k": old}, {}
    t = SimpleNamespace(impl=SimpleNamespace(name="k", kind="triton"), payload=lambda problem: {"kind": "triton"})
    workers.restart_workers(problem, [t], boxes, dead, "cpu", 60.0, {"case": {}}, case.name, [])
    if starts:
        assert boxes["k"].tag == "new" and log == [("new", "ready"), ("new", "load"), ("new", "time_setup"), ("old", "close")]
    else:
        assert boxes["k"] is old and log == [("new", "ready"), ("new", "close")] and not dead


def test_restart_workers_takes_a_spare_before_starting_a_worker(glu, monkeypatch):
    problem, case, _ = glu
    started: list[str] = []

    class Box:
        def __init__(self, tag: str):
            self.tag = tag

        def wait_ready(self, timeout_s):
            pass

        def request(self, cmd, p, timeout_s, what):
            pass

        def close(self):
            pass

    def spawn(*a, **k):
        started.append("new")
        return Box("new")

    monkeypatch.setattr(workers, "Sandbox", spawn)
    spares = [Box("spare")]
    boxes: dict = {"a": Box("a"), "b": Box("b")}
    targets = [SimpleNamespace(impl=SimpleNamespace(name=n, kind="triton"), payload=lambda problem: {}) for n in "ab"]
    workers.restart_workers(problem, targets, boxes, {}, "cpu", 60.0, {"case": {}}, case.name, spares)
    assert {boxes["a"].tag, boxes["b"].tag} == {"spare", "new"} and started == ["new"] and not spares


def test_restart_workers_also_replaces_the_baselines_from_a_trusted_spare(glu, monkeypatch):
    # A process's offset is the baselines' worker's as much as the submission's: a re-timing redraws both.
    problem, case, _ = glu
    log: list[tuple[str, str, object]] = []

    class Box:
        def __init__(self, tag: str, trusted: bool = False):
            self.tag, self.trusted = tag, trusted

        def wait_ready(self, timeout_s):
            pass

        def drain(self, timeout_s):
            log.append((self.tag, "drain", None))
            return []

        def request(self, cmd, p, timeout_s, what):
            log.append((self.tag, cmd, p.get("kind") if isinstance(p, dict) else None))

        def close(self):
            log.append((self.tag, "close", None))

    monkeypatch.setattr(workers, "Sandbox", lambda *a, **k: Box("new", k.get("trusted", False)))
    boxes: dict = {"k": Box("k"), "baselines": Box("old-baselines", True)}
    base_spares = [Box("trusted-spare", True)]
    t = SimpleNamespace(impl=SimpleNamespace(name="k", kind="triton"), payload=lambda problem: {"kind": "triton"})
    workers.restart_workers(problem, [t], boxes, {}, "cpu", 60.0, {"case": {}}, case.name, [], base_spares)
    assert boxes["baselines"].tag == "trusted-spare" and not base_spares
    assert ("trusted-spare", "drain", None) in log and ("trusted-spare", "load", "reference") in log
    assert ("old-baselines", "close", None) in log and boxes["k"].tag == "new" and not boxes["k"].trusted
    # no spare left: a trusted worker is started, never an untrusted one, for the baselines
    workers.restart_workers(problem, [t], boxes, {}, "cpu", 60.0, {"case": {}}, case.name, [], [])
    assert boxes["baselines"].tag == "new" and boxes["baselines"].trusted


def test_a_kernel_far_past_the_zero_credit_time_is_timed_one_round_and_never_retimed(glu):
    # 30 ms a call against a 12 ms manual baseline (zero credit at 12.36 ms): after its first round of 5 calls more
    # cannot change its credit, so it stops holding the GPU; its wall-clock excess (it spends 60 ms) is flagged from
    # that round, not re-timed. A kernel just past the zero-credit time (20 ms: under 2x) is timed like any other.
    restarts: list[list[str]] = []
    tests, info = run_case(
        glu,
        {"slow": FakeWorker({"slow": (60.0, 30.0)}), "meh": FakeWorker({"meh": (20.0, 20.0)})},
        restarts=restarts,
    )
    slow, meh = tests["slow"], tests["meh"]
    assert info["stopped_early"] == ["slow"]
    assert info["impls"]["slow"]["event"]["n"] == rounds.CALLS_PER_ROUND and slow.extra["credit"] == 0.0
    assert "timed on 5 calls only" in slow.output and "first_pass" not in info["impls"]["slow"], slow.output
    assert restarts == []  # never re-timed; what the first pass's clock saw is still reported
    assert any("grader's own clock" in f for f in slow.extra["flags"]), slow.output
    assert info["impls"]["meh"]["event"]["n"] == 15 and meh.extra["credit"] == 0.0  # all 3 rounds
    assert info["baselines"]["manual"]["event"]["n"] == 15  # the baselines are always timed to the stop rule


def test_the_warm_up_lasts_its_budget_of_gpu_time_even_for_a_slow_kernel(glu, monkeypatch):
    # A fake GPU: a call queues 29 ms of work and returns at once (20 us of host time), a sync waits for the
    # queue. Were the warm-up's calls not each waited for, the host would queue a launch every 20 us for its
    # whole 200 ms budget and the sync after would wait 10,000 x 29 ms.
    from grader.child import timing

    now = [0.0]
    queued = [0.0]

    def sync() -> None:
        now[0] += queued[0]
        queued[0] = 0.0

    def slow_kernel(x):
        now[0] += 20e-6
        queued[0] += 0.029
        return x * 2

    monkeypatch.setattr(timing, "_perf_counter", lambda: now[0])
    t = timing.Timer.__new__(timing.Timer)  # no CUDA here: only what setup reads
    t.device, t._sync = torch.device("cpu"), sync
    problem, case, _ = glu
    p = {"inputs": operands.timing_seeds(problem, case, SECRET, 3), "warmup_ms": 200, "n_out": 8 * 32,
         "digest_seed": 5}
    got = t.setup({"slow": slow_kernel}, p)
    assert got["warmup_calls"]["slow"] == 7  # ceil(200 / 29): as many as fit in the budget
    assert now[0] < 0.25, f"the warm-up took {now[0]:.1f} s of the GPU's time"


# -- a batch's baseline record (grader/performance/baselinerecord.py) ---------------------------------------------


def _record(case: Case, **medians: float):
    from grader.performance import baselinerecord as br

    key = br.RecordKey("GPU-x", "glu", "0" * 64, "code", "torch", "triton")
    return br.BaselineRecord(key, "eager", time.time(), {"bytes_per_s": 1e15}, {case.name: br.CaseRecord({**MS, **medians}, 0.3)})


def test_with_a_record_only_the_control_baseline_is_timed_and_the_others_come_from_it(glu):
    _, case, _ = glu
    base = FakeWorker({n: (ms, ms) for n, ms in MS.items()})
    # The record says compiled takes 2 ms (timed now it would be 3): the full-credit time follows the record.
    tests, info = run_case(glu, {"k": FakeWorker({"k": (3.0, 3.0)})}, baselines=base, record=_record(case, compiled=2.0))
    assert set(base.timed) == {"eager"}, base.timed
    assert set(base.warmed) == {"eager"}, base.warmed  # the recorded ones are not even called
    assert info["baseline_record"]["used"] and info["baseline_record"]["drift"] == 0.0, info["baseline_record"]
    assert info["thresholds"]["sources"]["compiled"] == 2.0 and info["baselines"]["compiled"]["recorded"]
    assert info["thresholds"]["full_ms"] == pytest.approx(2.0 * (1 + glu[0].performance.margin))
    assert tests["k"].extra["credit"] < 1.0  # 3 ms against a 2.06 ms full-credit time
    assert "compiled, manual from this GPU's baseline record" in tests["k"].output, tests["k"].output


def test_a_record_whose_control_drifted_past_the_bound_is_refused_and_every_baseline_timed(glu):
    from grader.performance import baselinerecord as br

    _, case, _ = glu
    base = FakeWorker({n: (ms, ms) for n, ms in MS.items()})
    drifted = MS["eager"] / (1 + 2 * br.DRIFT_BOUND)  # eager now 6 ms; recorded 3% faster than that
    tests, info = run_case(
        glu, {"k": FakeWorker({"k": (3.0, 3.0)})}, baselines=base, record=_record(case, eager=drifted, compiled=2.0)
    )
    assert set(base.timed) == set(MS), base.timed
    assert set(base.warmed) == set(MS), base.warmed  # warmed up before their first timed call
    assert info["baseline_record"]["refused"] and not info["baseline_record"]["used"], info["baseline_record"]
    # Thresholds from what was timed now (compiled 3 ms), as in a single grade: the 3 ms kernel gets full credit.
    assert info["thresholds"]["sources"]["compiled"] == 3.0 and "recorded" not in info["baselines"]["compiled"]
    assert tests["k"].extra["credit"] == 1.0 and "baseline record" not in tests["k"].output


def test_a_refused_record_file_is_removed_so_the_batch_recalibrates(tmp_path):
    f = tmp_path / "gpu0.glu.json"
    f.write_text("{}")
    stage._refuse_record(f, {"baseline_record": {"used": True}, "cases": {"a": {"baseline_record": {"used": True}}}})
    assert f.exists()
    info = {"baseline_record": {"used": True}, "cases": {"a": {}, "b": {"baseline_record": {"refused": True}}}}
    stage._refuse_record(f, info)
    assert not f.exists() and info["baseline_record"]["refused_on"] == ["b"]


# -- each timing request's limit (rounds.RequestLimits) ------------------------------------------------------------


class Timeouts(FakeWorker):
    """Records the limit the parent gave each of its timing requests."""

    def request(self, kind, p, timeout_s=0.0, what=""):
        if kind in ("time_round", "time_samples"):
            self.timeouts = [*getattr(self, "timeouts", []), (kind, timeout_s)]
        return super().request(kind, p, timeout_s, what)


def test_a_timing_request_past_its_own_earlier_requests_is_a_hang_in_seconds_not_the_stages_limit(glu):
    problem = glu[0]
    k = Timeouts({"k": (3.0, 3.0)})  # 5 calls of 3 ms a round: 15 ms a request on the fake clock
    run_case(glu, {"k": k})
    first, *later = [t for kind, t in k.timeouts if kind == "time_round"]
    # the first round: the spec's limit for one case, not the stage's 600 s
    assert first == min(problem.limits.case_s, problem.limits.timing_s) < problem.limits.timing_s
    # later rounds (and every round's samples): the floor plus 10x the slowest request seen (15 ms)
    expected = rounds.ROUND_FLOOR_S + rounds.ROUND_FACTOR * 0.015
    assert later and all(t == pytest.approx(expected) for t in later), later
    assert max(t for _, t in k.timeouts[1:]) < 21.0


def test_request_limits_never_exceed_the_stages_limit():
    lim = rounds.RequestLimits(cap_s=30.0, first_s=120.0)
    assert lim.of("f") == 30.0
    lim.saw("f", 0.5)
    lim.saw("f", 0.1)  # the slowest request counts
    assert lim.of("f") == min(30.0, rounds.ROUND_FLOOR_S + rounds.ROUND_FACTOR * 0.5) == 25.0
    lim.saw("f", 5.0)
    assert lim.of("f") == 30.0 and lim.of("g") == 30.0


def test_close_all_asks_every_worker_to_exit_before_waiting_for_any_and_ends_them_all():
    """Closing workers one by one cost each one's teardown in turn (~6.5 s of a GPU grade's timing phase for six
    timing workers): close_all asks all of them first, then waits once. A stand-in with only close() is closed
    too, None is skipped and a box listed twice is closed once."""
    from grader import sandbox
    from grader.sandbox import Sandbox

    events: list[tuple[str, int]] = []
    boxes = [Sandbox("cpu") for _ in range(3)]
    for i, b in enumerate(boxes):
        ask, join = b._ask_exit, b.proc.join

        def asked(deadline, ask=ask, i=i):
            events.append(("ask", i))
            ask(deadline)

        def joined(timeout=None, join=join, i=i):
            events.append(("join", i))
            join(timeout)

        b._ask_exit, b.proc.join = asked, joined

    class StandIn:
        closed = 0

        def close(self):
            StandIn.closed += 1

    sandbox.close_all([boxes[0], None, StandIn(), *boxes, boxes[1]], grace_s=30)
    kinds = [k for k, _ in events]
    assert sorted(i for k, i in events if k == "ask") == [0, 1, 2]  # each asked once
    assert kinds.index("join") > max(n for n, k in enumerate(kinds) if k == "ask")  # all asked before any wait
    assert all(b.proc.exitcode is not None for b in boxes) and StandIn.closed == 1
    # Each worker left on its own (exit code 0) within the grace period: nothing had to be killed.
    assert [b.proc.exitcode for b in boxes] == [0, 0, 0]


def test_close_all_with_no_grace_kills_every_worker_without_asking():
    from grader import sandbox
    from grader.sandbox import Sandbox

    boxes = [Sandbox("cpu") for _ in range(2)]
    for b in boxes:
        b._ask_exit = lambda deadline: pytest.fail("grace_s=0 must not ask")
    sandbox.close_all(boxes, grace_s=0)
    assert [b.proc.exitcode for b in boxes] == [-9, -9]  # SIGKILL
