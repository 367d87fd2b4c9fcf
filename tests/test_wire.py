"""grader/wire.py: what crosses the pipe between the parent and a worker is data, never code."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import struct
import time

import pytest
import torch

from grader import wire
from grader.child import wire as child_wire


class _RunsCode:
    def __reduce__(self):
        return (os.getpid, ())  # harmless, but a call all the same: a real attack would name exec


def test_messages_round_trip_by_value():
    x = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    msg = ("ok", {"outs": [x, x[:, :2]], "meta": {"shape": [3, 4], "stride": (4, 1)}, "ops": ["glu"], "n": None,
                  "ok": True, "t": 1.5, "names": {"a", "b"}, "version": torch.__version__})
    # A request (parent -> correctness worker) as the worker reads it, and a reply as the parent reads it.
    for got in (child_wire.loads(wire.dumps(msg)), wire.decode(child_wire.reply_bytes(msg))):
        assert got[0] == "ok" and got[1]["meta"] == {"shape": [3, 4], "stride": (4, 1)} and got[1]["names"] == {"a", "b"}
        assert torch.equal(got[1]["outs"][0], x) and got[1]["outs"][0].dtype == torch.bfloat16
        assert torch.equal(got[1]["outs"][1], x[:, :2])
        assert type(got[1]["version"]) is str and got[1]["version"] == str(torch.__version__)
        # By value: the parent's copy is not shared with the sender's.
        got[1]["outs"][0].zero_()
        assert x.sum() != 0


@pytest.mark.parametrize("tag", [b"", b"P", b"T", b"R"])
def test_a_pickle_that_calls_anything_is_refused_whatever_its_tag(tag):
    # The parent reads b"R" only, with its own data-only decoder; the worker reads b"P" (plain pickle) and b"T"
    # (torch.load(weights_only=True)) requests. Neither runs what the bytes name.
    for data in (tag + pickle.dumps(("ok", _RunsCode())), tag + b"not a message"):
        with pytest.raises(wire.ProtocolViolation):
            wire.decode(data)
        with pytest.raises(wire.MalformedMessage):
            child_wire.loads(data)


def test_requests_without_tensors_take_the_plain_path():
    msg = ("time_round", {"names": ["eager"], "plan": [(0, 1.0)] * 5, "x": (1, None, True), "s": {"a"}})
    data = wire.dumps(msg)
    assert data[:1] == b"P" and child_wire.loads(data) == msg
    assert wire.dumps(("run", {"t": torch.zeros(2)}))[:1] == b"T"


def test_every_worker_replies_in_the_raw_format_and_never_with_torch_save():
    a, b = multiprocessing.Pipe()
    for end in (child_wire.correctness_worker, child_wire.timing_worker):
        end.send(a, ("ok", {"outs": [torch.ones(2, 3)]}))
        data = b.recv_bytes()
        assert data[:1] == b"R"
        assert torch.equal(wire.decode(data)[1]["outs"][0], torch.ones(2, 3))
    # A torch.save container (what correctness replies were) is refused unread: the parent never calls torch.load.
    with pytest.raises(wire.ProtocolViolation, match="b'T'"):
        wire.decode(wire.dumps(("ok", {"t": torch.zeros(2)})))


def test_replies_stay_within_the_parents_bounds_when_the_worker_wrote_them():
    # Launch records may hold a constexpr -inf: it travels tagged (not a float the parent would refuse), and the
    # compile worker gets its float back when the parent forwards the records.
    records = [{"kernel": "k", "args": [["NEG", "float", float("-inf")], ["eps", "float", 1e-6], ["n", "int", "i32"],
                                        ["MASK", "int", 2**64 - 1], ["M", "int", -(2**63)]]}]
    got = wire.decode(child_wire.reply_bytes(("ok", records)))[1]
    assert got[0]["args"][0][2] == ("\x00grader:float", "-inf") and got[0]["args"][1][2] == 1e-6
    assert got[0]["args"][3][2] == ("\x00grader:int", hex(2**64 - 1)) and got[0]["args"][4][2] == -(2**63)
    back = child_wire.loads(wire.dumps(("gpu_compile", {"launches": got})))[1]["launches"]
    assert back[0]["args"][0][2] == float("-inf") and back == records
    # A timed output's checksum may be NaN (a wrong answer, not a forgery): the timing code can read it back.
    digest = wire.decode(child_wire.reply_bytes(("ok", [float("nan"), float("inf"), 2.5, 3])))[1]
    got = [wire.tagged_float(v) for v in digest]
    assert got[0] != got[0] and got[1] == float("inf") and got[2:] == [2.5, 3.0]
    assert wire.tagged_float("nan") is None and wire.tagged_float(("\x00grader:float", "x" * 40)) is None
    # Strings are cut at the bound; a worker's error replies far below it (see worker._error).
    long = wire.decode(child_wire.reply_bytes(("error", "x" * 10**6, "y" * 10**6)))
    assert len(long[1]) == wire.MAX_STR and len(long[2]) == wire.MAX_STR
    from grader.child.worker import _error

    line, detail, category, own = _error("x" * 10**6, "tb\n" * 10**6, "load", "fr\n" * 10**6)[1:]
    assert len(line) < 3000 and len(detail) < 20000 and detail.endswith("tb\n") and category == "load"
    assert len(own) < 20000 and own.endswith("fr\n")


def test_the_grader_cannot_send_anything_but_data():
    with pytest.raises(TypeError, match="data only"):
        wire.dumps(("ok", _RunsCode()))


def _forge(conn) -> None:
    conn.send(("ok", _RunsCode()))  # what a submission does with its worker's end of the pipe
    conn.close()


@pytest.mark.parametrize("end", [wire, wire.timing_parent], ids=["correctness", "timing"])
def test_a_sandbox_turns_a_forged_reply_into_one_failed_request_and_runs_nothing(end):
    from grader.sandbox import Sandbox, WorkerFailure

    box = Sandbox.__new__(Sandbox)  # a Sandbox whose child is _forge, not grader.child.worker
    ctx = multiprocessing.get_context("spawn")
    box.device, box._wire, box.max_reply = "cpu", end, wire.DEFAULT_MAX_REPLY
    box.conn, child = ctx.Pipe()
    box.proc = ctx.Process(target=_forge, args=(child,), daemon=True)
    box.proc.start()
    child.close()
    with pytest.raises(WorkerFailure, match="protocol violation: .*malformed reply") as e:
        box.request(None, None, timeout_s=60, what="case tiny")
    assert e.value.fatal and e.value.reason == "protocol" and not box.alive
    box.close()


def test_a_timing_reply_carries_tensors_as_raw_bytes_with_no_globals():
    import pickletools

    samples = [(torch.arange(6) % 4).to(dt).reshape(2, 3) for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)]
    msg = ("ok", {"triton": [*samples, "returned int, not a tensor", torch.zeros(0, 4)], "v": torch.__version__})
    a, b = multiprocessing.Pipe()
    child_wire.timing_worker.send(a, msg)
    data = b.recv_bytes()
    assert data[:1] == b"R"
    assert not [op for op, _, _ in pickletools.genops(data[1:]) if "GLOBAL" in op.name or op.name in ("REDUCE", "INST", "OBJ")]
    got = wire.decode(data)
    for x, y in zip(samples, got[1]["triton"]):
        assert y.dtype == x.dtype and torch.equal(x, y)
    assert got[1]["triton"][5] == "returned int, not a tensor" and got[1]["triton"][6].shape == (0, 4)
    assert type(got[1]["v"]) is str
    # Requests the other way keep multiprocessing's format (the worker reads them with Connection.recv).
    idx = torch.arange(3)
    wire.timing_parent.send(b, ("time_samples", {"triton": [(0, idx)]}))
    got = child_wire.timing_worker.recv(a)[1]["triton"][0][1]
    assert torch.equal(got, idx)
    got.fill_(7)  # by value: the worker cannot rewrite the parent's indices after the request
    assert idx.tolist() == [0, 1, 2] and not idx.is_shared()


def test_a_timing_request_with_a_tensor_reaches_a_real_worker():
    # Sent by file descriptor (torch's reductions for multiprocessing), the worker would have to fetch it from the
    # parent's resource sharer, whose authkey a `python -m grader.child` worker does not have: it died at once.
    from grader.sandbox import Sandbox, WorkerFailure

    with Sandbox("cpu", timing=True) as box:
        with pytest.raises(WorkerFailure) as e:  # no timer on a CPU worker: an error reply, from a worker alive
            box.request("time_samples", {"triton": [(0, torch.arange(3))]}, timeout_s=120, what="samples")
        assert e.value.reason == "error" and box.alive, e.value.line


@pytest.mark.parametrize("forged", [
    ("\x00grader:raw-tensor", "float32", [4], b"\x00" * 15),  # bytes do not match the shape
    ("\x00grader:raw-tensor", "object", [1], b"\x00" * 8),  # not a tensor dtype
    ("\x00grader:raw-tensor", "float32", [-1], b""),  # negative size
    ("\x00grader:raw-tensor", "float32"),  # truncated header
    ("\x00grader:raw-tensor", "float32", [0, 2**40], b""),  # empty, but torch.empty would be asked for 2**40
])
def test_a_forged_raw_tensor_header_is_a_malformed_message(forged):
    with pytest.raises(wire.ProtocolViolation, match="raw tensor"):
        wire.decode(b"R" + pickle.dumps(("ok", [forged])))


def test_a_timing_reply_costs_microseconds_not_torch_save(monkeypatch):
    # The parent's clock over a timing request includes the reply's trip; torch.save's container costs ~0.1-0.2 ms,
    # which moved correct kernels past the wall-clock slack on the H200 (docs/performance.md#the-wall-clock-check).
    # Checked without a clock: neither end calls torch.save or torch.load, and the frame is a small plain pickle
    # (torch.save's zip container alone is over a kilobyte), so the trip is one small write and read.
    import time

    msg = ("ok", {"triton": {"event_ms": [0.0288] * 5, "host_ms": [1.03] * 5}})
    assert child_wire.reply_bytes(msg)[:1] == b"R" and len(child_wire.reply_bytes(msg)) < 512

    def refuse(*a, **k):
        raise AssertionError("a timing reply must not go through torch.save / torch.load")

    monkeypatch.setattr(torch, "save", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    a, b = multiprocessing.Pipe()
    for _ in range(3):
        child_wire.timing_worker.send(a, msg)
        assert wire.timing_parent.recv(b, deadline=time.monotonic() + 5) == msg


# -- a child that abuses the pipe: the Sandbox ends the request, never waits or crashes ----------------------


def _header_then_silence(conn) -> None:
    os.write(conn.fileno(), struct.pack("!i", 1000))  # "1000 bytes follow", then nothing
    time.sleep(60)


def _huge_length(conn) -> None:
    os.write(conn.fileno(), struct.pack("!i", -1) + struct.pack("!Q", 2**62))  # an 8-byte length: 4 EiB
    time.sleep(60)


def _unbounded_values(conn) -> None:
    conn.send_bytes(b"R" + pickle.dumps(("ok", {"triton_launches": 10**5000, "seconds": [float("nan")] * 2})))
    time.sleep(60)


def _never_reads(conn) -> None:
    time.sleep(60)


def _fake_box(target):
    from grader.sandbox import Sandbox

    box = Sandbox.__new__(Sandbox)  # a Sandbox whose child is `target`, not grader.child.worker
    ctx = multiprocessing.get_context("fork")  # nothing to import: these children only write bytes and sleep
    box.device, box._wire, box.max_reply, box.pending = "cpu", wire, 1 << 20, []
    box.conn, child = ctx.Pipe()
    box.proc = ctx.Process(target=target, args=(child,), daemon=True)
    box.proc.start()
    child.close()
    return box


@pytest.mark.parametrize("target, cmd, reason, text", [
    (_header_then_silence, None, "timeout", "timed out after 1 s"),
    (_never_reads, "run", "timeout", "timed out after 1 s"),  # a request bigger than the socket's buffer
    (_huge_length, None, "protocol", "protocol violation: a reply of 4611686018427387904 bytes announced"),
    (_unbounded_values, None, "protocol", "protocol violation: an int of "),
], ids=["header_then_silence", "never_reads", "huge_length", "unbounded_values"])
def test_a_child_that_abuses_the_pipe_fails_its_request_at_the_deadline(target, cmd, reason, text):
    from grader.sandbox import WorkerFailure

    box = _fake_box(target)
    payload = {"base": torch.zeros(1 << 22)} if cmd else None  # 16 MiB
    t0 = time.monotonic()
    with pytest.raises(WorkerFailure) as e:
        box.request(cmd, payload, timeout_s=1, what="case tiny")
    assert time.monotonic() - t0 < 10
    assert e.value.reason == reason and e.value.fatal and text in e.value.line, e.value.line
    assert not box.alive
    box.close()


# -- each timing command's reply against its declared type (grader/child/wire.py COMMANDS, wire.check_reply) ------


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        pass


def _cpu_timer():
    """A Timer (grader/child/timing.py) on the CPU: its own setup, round, samples and copy_bandwidth code, with the
    CUDA clocks, sleeps and syncs replaced (events report 0.25 ms)."""
    from grader.child.inputs import digest
    from grader.child.timing import Timer

    t = Timer.__new__(Timer)
    t.device, t.calibrated, t.kept = torch.device("cpu"), True, {}
    t._Event, t._record, t._elapsed, t._sync, t._sleep = _Event, lambda e: None, lambda s, e: 0.25, lambda: None, lambda c: None
    t._occupy_ok, t.cycles_per_us, t.l2_bytes, t.flush_bytes, t.sleep_kind = False, 2000.0, 1 << 20, 1 << 21, "one-thread sleep"
    t._mul, t._zero, t.flush, t._digest, t._stack = torch.mul, torch.Tensor.zero_, torch.empty(64, dtype=torch.uint8), digest, torch.stack
    return t


def _timing_replies(problem, monkeypatch) -> dict:
    """Each timing command's reply as the worker's handlers (grader/child/timingcmds.py) write it and the parent
    reads it (reply_bytes, then decode), for requests built as grader/performance/ builds them."""
    import random
    from dataclasses import replace
    from types import SimpleNamespace

    from grader.child.timingcmds import TimingCommands
    from grader.performance import rounds
    from grader.problem import operands

    case = replace(problem.performance.cases[0], shape=(8, 64), dtype="float32")
    n_out = 8 * 32

    def glu(x):
        return x[..., :32] * torch.sigmoid(x[..., 32:])

    fns = {"glu": glu, "not_a_tensor": lambda x: 3}  # the second's checksum is NaN, its sample a message
    tc = TimingCommands(torch, torch.device("cpu"), SimpleNamespace(fns=fns, _poison=lambda on: None))
    tc.timer = _cpu_timer()
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: SimpleNamespace(name="fake", uuid="GPU-0", multi_processor_count=132))
    setup_p = {"inputs": operands.timing_seeds(problem, case, 1234, 3), "warmup_ms": 1, "spin_s": 0.0, "n_out": n_out,
               "digest_seed": 5}
    plan, checks = rounds.plan_round(random.Random(0), n_out, first=True, sets=3)
    made = {
        "copy_bandwidth": tc.copy_bandwidth({"nbytes": 3 * 4 * 1024, "reps": 1}),
        "time_setup": tc.time_setup(setup_p),
        "time_round": tc.time_round({"names": list(fns), "plan": plan}),
        "time_samples": tc.time_samples({n: [(j, idx) for j, _, _, idx in checks] for n in fns}),
        "prepare": {case.name: {"eager": 0.5, "compiled": 3}},  # TimingCommands.prepare's shape (it needs a reference)
    }
    return {cmd: wire.decode(child_wire.reply_bytes(("ok", v)))[1] for cmd, v in made.items()}


def test_the_timers_replies_pass_their_declared_types_and_a_wrong_typed_key_fails(problem, monkeypatch):
    from grader.performance import rounds

    got = _timing_replies(problem, monkeypatch)
    for cmd, reply in got.items():
        assert wire.check_reply(cmd, reply) == "", (cmd, reply)
    # What the replies hold that a stricter check would refuse: an int where a float is declared (warm-up calls, a
    # prepare time), a NaN checksum, tagged by the wire (inside a dict keyed by name: the stage checks it), text
    # for a sample, and torch.version.cuda, None on a CPU build.
    assert type(got["time_setup"]["warmup_calls"]["glu"]) is int and next(iter(got["prepare"].values()))["compiled"] == 3
    assert all(wire.tagged_float(v) != wire.tagged_float(v) for v in got["time_round"]["not_a_tensor"]["digest"])
    assert rounds._is_round_reply(got["time_round"], "not_a_tensor", len(got["time_round"]["glu"]["event_ms"]))
    assert type(got["time_samples"]["not_a_tensor"][0]) is str and type(got["time_samples"]["glu"][0]) is torch.Tensor
    assert got["copy_bandwidth"]["cuda"] == torch.version.cuda and got["copy_bandwidth"]["sms"] == 132
    assert wire.check_reply("copy_bandwidth", {**got["copy_bandwidth"], "bytes_per_s": 10**12}) == ""  # an int

    bw, setup = got["copy_bandwidth"], got["time_setup"]
    wrong = [
        ("time_setup", {**setup, "compile_s": [0.5]}, "the 'compile_s' of a 'time_setup' reply is a list"),
        ("time_setup", {**setup, "warmup_calls": 3}, "the 'warmup_calls' of a 'time_setup' reply is a int"),
        ("copy_bandwidth", {**bw, "bytes_per_s": "fast"}, "the 'bytes_per_s' of a 'copy_bandwidth' reply is a str"),
        ("copy_bandwidth", {**bw, "sms": 1.5}, "the 'sms' of a 'copy_bandwidth' reply is a float"),
        ("copy_bandwidth", {**bw, "cuda": 12}, "the 'cuda' of a 'copy_bandwidth' reply is a int"),
        # A ceiling is positive and finite by construction: a tagged one is not a number the parent takes.
        ("copy_bandwidth", {**bw, "bytes_per_s": ("\x00grader:float", "nan")}, "is a tuple"),
        # Keyed by name, these are dicts with their values left to the stage (rounds._is_round_reply).
        ("time_round", [got["time_round"]], "a list answered 'time_round', not a dict"),
        ("time_samples", (), "a tuple answered 'time_samples', not a dict"),
        ("prepare", [], "a list answered 'prepare', not a dict"),
        ("time_setup", None, "a NoneType answered 'time_setup', not a dict"),
    ]
    for cmd, reply, why in wrong:
        assert why in wire.check_reply(cmd, reply), (cmd, reply, wire.check_reply(cmd, reply))


def test_the_timer_warms_up_only_the_functions_a_case_will_time(problem, monkeypatch):
    """time_setup's `names` (grader/performance/stage.py: with a batch's record, the control baseline alone): the
    others are never called, so a baseline whose median the record gives costs no compile and no warm-up."""
    from dataclasses import replace
    from types import SimpleNamespace

    from grader.child.timingcmds import TimingCommands
    from grader.problem import operands

    called: list[str] = []

    def fn(name):
        return lambda x: called.append(name) or x[..., :32] * torch.sigmoid(x[..., 32:])

    case = replace(problem.performance.cases[0], shape=(8, 64), dtype="float32")
    tc = TimingCommands(torch, torch.device("cpu"), SimpleNamespace(fns={"eager": fn("eager"), "compiled": fn("compiled")}, _poison=lambda on: None))
    tc.timer = _cpu_timer()
    p = {"inputs": operands.timing_seeds(problem, case, 1234, 2), "warmup_ms": 1, "spin_s": 0.0, "n_out": 8 * 32, "digest_seed": 5}
    got = tc.time_setup({**p, "names": ["eager"]})
    assert set(got["compile_s"]) == {"eager"} and set(called) == {"eager"}
    got = tc.time_setup(p)  # no names: every function, as before
    assert set(got["compile_s"]) == {"eager", "compiled"} and "compiled" in called
