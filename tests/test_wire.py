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


def test_a_pickle_that_calls_anything_is_refused():
    forged = pickle.dumps(("ok", _RunsCode()))
    with pytest.raises(wire.MalformedMessage):
        wire.loads(forged)
    with pytest.raises(wire.MalformedMessage):
        wire.loads(b"not a message")


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
    box.device, box.ready, box.pending = "cpu", True, []
    box.conn, child = ctx.Pipe()
    box.proc = ctx.Process(target=_forge, args=(child,), daemon=True)
    box.proc.start()
    child.close()
    with pytest.raises(WorkerFailure, match="malformed reply") as e:
        box.request(None, None, timeout_s=60, what="case tiny")
    assert e.value.fatal and not box.alive
    box.close()
