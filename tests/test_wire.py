"""grader/wire.py: what crosses the pipe between the parent and a worker is data, never code."""

from __future__ import annotations

import multiprocessing
import os
import pickle

import pytest
import torch

from grader import wire


class _RunsCode:
    def __reduce__(self):
        return (os.getpid, ())  # harmless, but a call all the same: a real attack would name exec


def test_messages_the_grader_sends_round_trip_by_value():
    x = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    msg = ("ok", {"outs": [x, x[:, :2]], "meta": {"shape": [3, 4], "stride": (4, 1)}, "ops": ["glu"], "n": None,
                  "ok": True, "t": 1.5, "names": {"a", "b"}, "version": torch.__version__})
    got = wire.loads(wire.dumps(msg))
    assert got[0] == "ok" and got[1]["meta"] == {"shape": [3, 4], "stride": (4, 1)} and got[1]["names"] == {"a", "b"}
    assert torch.equal(got[1]["outs"][0], x) and got[1]["outs"][0].dtype == torch.bfloat16
    assert type(got[1]["version"]) is str and got[1]["version"] == str(torch.__version__)
    # By value: the parent's copy is not shared with the sender's.
    got[1]["outs"][0].zero_()
    assert x.sum() != 0


@pytest.mark.parametrize("tag", [b"", b"P", b"T", b"R"])
def test_a_pickle_that_calls_anything_is_refused_whatever_its_tag(tag):
    # b"P": the plain-pickle path (messages without tensors), b"T": torch.load(weights_only=True), b"R": a timing
    # worker's reply (tensors as raw bytes), b"": no tag.
    with pytest.raises(wire.MalformedMessage):
        wire.loads(tag + pickle.dumps(("ok", _RunsCode())))
    with pytest.raises(wire.MalformedMessage):
        wire.loads(tag + b"not a message")


def test_timing_messages_take_the_plain_path_and_stay_cheap():
    import time

    msg = ("ok", {"eager": {"event_ms": [0.028] * 5, "host_ms": [0.031] * 5}, "names": {"eager"}, "x": (1, None, True)})
    data = wire.dumps(msg)
    assert data[:1] == b"P" and wire.loads(data) == msg
    assert wire.dumps(("ok", {"t": torch.zeros(2)}))[:1] == b"T"
    t0 = time.perf_counter()
    for _ in range(200):
        wire.loads(wire.dumps(msg))
    # The parent's clock over a timing request includes two of these each way; torch.save's path costs ~0.2 ms.
    assert (time.perf_counter() - t0) / 200 < 2e-3


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
    box.device, box._wire = "cpu", end
    box.conn, child = ctx.Pipe()
    box.proc = ctx.Process(target=_forge, args=(child,), daemon=True)
    box.proc.start()
    child.close()
    with pytest.raises(WorkerFailure, match="malformed reply") as e:
        box.request(None, None, timeout_s=60, what="case tiny")
    assert e.value.fatal and not box.alive
    box.close()


def test_a_timing_reply_carries_tensors_as_raw_bytes_with_no_globals():
    import pickletools

    samples = [(torch.arange(6) % 4).to(dt).reshape(2, 3) for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)]
    msg = ("ok", {"triton": [*samples, "returned int, not a tensor", torch.zeros(0, 4)], "v": torch.__version__})
    a, b = multiprocessing.Pipe()
    wire.timing_worker.send(a, msg)
    data = b.recv_bytes()
    assert data[:1] == b"R"
    assert not [op for op, _, _ in pickletools.genops(data[1:]) if "GLOBAL" in op.name or op.name in ("REDUCE", "INST", "OBJ")]
    got = wire.loads(data)
    for x, y in zip(samples, got[1]["triton"]):
        assert y.dtype == x.dtype and torch.equal(x, y)
    assert got[1]["triton"][5] == "returned int, not a tensor" and got[1]["triton"][6].shape == (0, 4)
    assert type(got[1]["v"]) is str
    # Requests the other way keep multiprocessing's format (the worker reads them with Connection.recv).
    wire.timing_parent.send(b, ("time_samples", {"triton": [(0, torch.arange(3))]}))
    assert torch.equal(wire.timing_worker.recv(a)[1]["triton"][0][1], torch.arange(3))


@pytest.mark.parametrize("forged", [
    ("\x00grader:raw-tensor", "float32", [4], b"\x00" * 15),  # bytes do not match the shape
    ("\x00grader:raw-tensor", "object", [1], b"\x00" * 8),  # not a tensor dtype
    ("\x00grader:raw-tensor", "float32", [-1], b""),  # negative size
    ("\x00grader:raw-tensor", "float32"),  # truncated header
])
def test_a_forged_raw_tensor_header_is_a_malformed_message(forged):
    with pytest.raises(wire.MalformedMessage, match="raw tensor"):
        wire.loads(b"R" + pickle.dumps(("ok", [forged])))


def test_a_timing_reply_costs_microseconds_not_torch_save():
    # The parent's clock over a timing request includes the reply's trip; torch.save's container costs ~0.1-0.2 ms,
    # which moved correct kernels past the wall-clock slack on the H200 (docs/PERF_NOTES.md, runs 25-27).
    import time

    msg = ("ok", {"triton": {"event_ms": [0.0288] * 5, "host_ms": [1.03] * 5}})
    a, b = multiprocessing.Pipe()
    wire.timing_worker.send(a, msg)
    assert wire.timing_parent.recv(b) == msg
    t0 = time.perf_counter()
    for _ in range(200):
        wire.timing_worker.send(a, msg)
        wire.timing_parent.recv(b)
    assert (time.perf_counter() - t0) / 200 < 1e-3
