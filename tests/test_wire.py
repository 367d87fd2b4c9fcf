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


@pytest.mark.parametrize("tag", [b"", b"P", b"T"])
def test_a_pickle_that_calls_anything_is_refused_whatever_its_tag(tag):
    # b"P": the plain-pickle path (messages without tensors), b"T": torch.load(weights_only=True), b"": no tag.
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


def test_a_sandbox_turns_a_forged_reply_into_one_failed_request_and_runs_nothing():
    from grader.sandbox import Sandbox, WorkerFailure

    box = Sandbox.__new__(Sandbox)  # a Sandbox whose child is _forge, not grader.worker
    ctx = multiprocessing.get_context("spawn")
    box.device, box._wire = "cpu", wire
    box.conn, child = ctx.Pipe()
    box.proc = ctx.Process(target=_forge, args=(child,), daemon=True)
    box.proc.start()
    child.close()
    with pytest.raises(WorkerFailure, match="malformed reply") as e:
        box.request(None, None, timeout_s=60, what="case tiny")
    assert e.value.fatal and not box.alive
    box.close()
