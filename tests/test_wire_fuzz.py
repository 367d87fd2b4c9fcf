"""The parent's reader (grader/wire.py `recv`), fed random and hostile bytes through a real pipe.

Whatever a child writes, the reader returns a value or raises MalformedMessage (ProtocolViolation, or WireTimeout
at the deadline); EOFError only when the pipe closes before a frame starts. It never hangs past its deadline,
never allocates what a header announces beyond the limit, and never builds an int, float, string or nesting out
of bounds. Values within the bounds come back equal. Deadlines here are 0.2 s; the only wall-clock assertion is
"back within a few seconds".
"""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import struct
import threading
import time
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grader import wire
from grader.child import wire as child_wire

DEADLINE_S = 0.2
LIMIT = 1 << 20
# max_examples from the tier's hypothesis profile (tests/conftest.py): 25 in the fast tier, 120 in the full one.
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def _frame(body: bytes) -> bytes:
    return struct.pack("!i", len(body)) + body


def _feed(data: bytes, *, close: bool = True, limit: int = LIMIT, trickle_s: float = 0.0, deadline_s: float = DEADLINE_S) -> tuple[str, Any]:
    """Write `data` into a real pipe (a socketpair, as the Sandbox's) from a thread, read one reply with the
    parent's reader. Returns ("value", v), ("malformed", exception) or ("eof", None); fails the test otherwise."""
    parent, child = multiprocessing.Pipe()
    fd = child.fileno()

    def write() -> None:
        try:
            if trickle_s:
                for i in range(len(data)):
                    os.write(fd, data[i:i + 1])
                    time.sleep(trickle_s)
            else:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            if close:
                child.close()
        except OSError:  # the reader gave up and closed its end
            pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        try:
            return "value", wire.recv(parent, deadline=time.monotonic() + deadline_s, limit=limit)
        except wire.MalformedMessage as e:
            assert str(e) and "\n" not in str(e), repr(e)  # a one-line reason
            return "malformed", e
        except EOFError:
            assert not data, "EOFError after some bytes of a frame: should be a protocol violation"
            return "eof", None
    finally:
        assert time.monotonic() - t0 < deadline_s + 5, "the reader ran far past its deadline"
        parent.close()
        t.join(5)
        if not child.closed:
            child.close()


# -- random bytes ---------------------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=600))
@example(b"")
@example(struct.pack("!i", -1) + struct.pack("!Q", 2**63))
@example(struct.pack("!i", -7))
def test_random_bytes_on_the_pipe(data):
    kind, _ = _feed(data)
    assert kind in ("malformed", "eof") or data[4:5] == b"R"


@FUZZ
@given(st.binary(max_size=400))
def test_a_well_framed_reply_of_random_bytes(body):
    _feed(_frame(b"R" + body))


_VALID = child_wire.reply_bytes(("ok", {"outs": [torch.arange(6, dtype=torch.float32).reshape(2, 3)], "meta": {
    "type": "Tensor", "shape": [2, 3], "stride": [3, 1]}, "ops": ["add"], "seconds": [0.5, 1e-3], "n": None,
    "flag": True, "launches": 2**40, "names": {"a", "b"}, "t": (1, -2)}))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])),
                min_size=1, max_size=6))
def test_a_real_reply_with_bytes_flipped_inserted_or_deleted(edits):
    body = bytearray(_VALID)
    for at, byte, how in edits:
        at = min(at, len(body) - 1)
        if how == "set":
            body[at] = byte
        elif how == "insert":
            body.insert(at, byte)
        elif len(body) > 1:
            del body[at]
    _feed(_frame(bytes(body)))


# -- random values: equal when within bounds, refused otherwise ----------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.binary(max_size=8)
_keys = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(_keys | st.tuples(_keys), inner, max_size=3)
    | st.sets(_keys, max_size=3) | st.frozensets(_keys, max_size=3),
    max_leaves=25,
)


def _in_bounds(v: Any, depth: int = 0) -> bool:
    if type(v) in (list, tuple, dict, set, frozenset):
        if depth >= wire.MAX_DEPTH:
            return False
        if type(v) is dict:
            return all(type(k) in (type(None), bool, int, float, str) and _in_bounds(k, depth + 1) and _in_bounds(x, depth + 1) for k, x in v.items())
        if type(v) in (set, frozenset) and not all(type(k) in (type(None), bool, int, float, str) for k in v):
            return False
        return all(_in_bounds(x, depth + 1) for x in v)
    if type(v) is int:
        return abs(v) <= 2**63
    if type(v) is float:
        return math.isfinite(v) and abs(v) <= 1e300
    if type(v) is bytes:
        return False
    return v is None or type(v) in (bool, str)


@FUZZ
@given(_values, st.sampled_from([4, 5]))
def test_random_values_come_back_equal_when_within_bounds_and_are_refused_otherwise(value, protocol):
    kind, got = _feed(_frame(b"R" + pickle.dumps(("ok", value), protocol=protocol)))
    if _in_bounds(value):
        assert kind == "value" and got == ("ok", value)
    else:
        assert kind == "malformed" and isinstance(got, wire.ProtocolViolation), (kind, got)


@settings(max_examples=40, deadline=None, database=None)
@given(_values, st.sampled_from([0, 1, 2, 3]))
def test_older_pickle_protocols_are_values_or_refusals(value, protocol):
    _feed(_frame(b"R" + pickle.dumps(("ok", value), protocol=protocol)))


# -- a frame cut short, with the pipe left open: WireTimeout at the deadline ----------------------------------


@settings(max_examples=8, deadline=None, database=None)
@given(st.integers(1, len(_VALID) + 3))
def test_a_frame_cut_short_and_then_silence_times_out(cut):
    kind, e = _feed(_frame(_VALID)[:cut], close=False)
    assert kind == "malformed" and isinstance(e, wire.WireTimeout)


# -- hostile frames, one by one -------------------------------------------------------------------------------


def _pickle(*ops: bytes) -> bytes:
    return b"R\x80\x05" + b"".join(ops) + b"."


def _long4(n: int) -> bytes:
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8b" + struct.pack("<i", len(raw)) + raw


def _raw(dtype: str, shape: list[int], raw: bytes) -> bytes:
    return b"R" + pickle.dumps(("ok", ("\x00grader:raw-tensor", dtype, shape, raw)), protocol=5)


HOSTILE = {
    # framing
    "huge length (4-byte header)": struct.pack("!i", 0x7FFFFFFF),
    "huge length (8-byte header)": struct.pack("!i", -1) + struct.pack("!Q", 2**62),
    "negative length": struct.pack("!i", -2) + b"R",
    "truncated body": struct.pack("!i", 100) + b"R\x80\x05",
    "empty frame": struct.pack("!i", 0),
    "trailing bytes": _frame(_pickle(b"N") + b"junk"),
    # code, not data
    "GLOBAL os.system": _frame(b"R" + b"cos\nsystem\n(S'echo pwned'\ntR."),
    "STACK_GLOBAL + REDUCE": _frame(b"R\x80\x05\x8c\x02os\x8c\x06getpid\x93)R."),
    "a class by reduce": _frame(b"R" + pickle.dumps(("ok", pytest.raises), protocol=5)),
    "BINPUT to a huge memo index": _frame(_pickle(b"N", b"r\xff\xff\xff\xff")),
    "PERSID": _frame(b"RP0\n."),
    # numbers
    "5000-digit int": _frame(_pickle(_long4(10**5000))),
    "2**64": _frame(_pickle(_long4(2**64))),
    "5000-digit int as text (protocol 0)": _frame(b"RL" + b"9" * 5000 + b"L\n."),
    "NaN": _frame(_pickle(b"G" + struct.pack(">d", float("nan")))),
    "inf": _frame(_pickle(b"G" + struct.pack(">d", float("-inf")))),
    "1e308": _frame(_pickle(b"G" + struct.pack(">d", 1e308))),
    "float as text (protocol 0)": _frame(b"RF1e308\n."),
    # sizes and shapes
    "string of 100 KiB": _frame(b"R" + pickle.dumps("x" * (100 << 10), protocol=5)),
    "string not UTF-8": _frame(_pickle(b"\x8c\x02\xff\xfe")),
    "bytes outside a tensor": _frame(b"R" + pickle.dumps(("ok", b"abc"), protocol=5)),
    "lists 100 deep": _frame(_pickle(b"]" * 100 + b"a" * 99)),
    "lists 10**5 deep": _frame(_pickle(b"]" * 10**5 + b"a" * (10**5 - 1))),
    "a 10**5-deep tuple as a dict key": _frame(_pickle(b"}", b")" + b"\x85" * 10**5, b"N", b"s")),
    "a tuple as a set member": _frame(_pickle(b"\x8f", b"(", b"N\x85", b"\x90")),
    "a list appending itself": _frame(_pickle(b"]\x94", b"h\x00", b"a")),
    "10**6 references to one list": _frame(_pickle(b"]\x94", b"]", b"(", b"h\x00" * 10**6, b"e")),
    "1000 x 1000 shared items": _frame(_pickle(b"]\x94(" + b"N" * 1000 + b"e", b"](" + b"h\x00" * 1000 + b"e")),
    "stack underflow": _frame(_pickle(b"\x86")),
    "append to a tuple": _frame(_pickle(b")", b"N", b"a")),
    "setitems with a lone key": _frame(_pickle(b"}", b"(", b"N", b"u")),
    "mark never closed": _frame(_pickle(b"(", b"N")),
    # raw tensors
    "raw tensor lying about its size": _frame(_raw("float32", [1 << 20], b"\x00" * 16)),
    "raw tensor of 2**40 empty rows": _frame(_raw("float32", [0, 2**40], b"")),
    "raw tensor of a foreign dtype": _frame(_raw("complex128", [1], b"\x00" * 16)),
    "raw tensor with a string shape": _frame(b"R" + pickle.dumps(("\x00grader:raw-tensor", "float32", "4", b"\x00" * 16), protocol=5)),
    # one 64 KiB record referenced 20 times: a 64 KiB frame that would build 1.25 MiB of tensors
    "raw tensors over the limit in all": _frame(b"R" + pickle.dumps([("\x00grader:raw-tensor", "uint8", [1 << 16], bytes(1 << 16))] * 20, protocol=5)),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_frame_is_refused_for_what_it_is(name):
    # A deadline long enough for the decoder to reach the bound it breaks, on a busy 2-core machine too.
    kind, e = _feed(HOSTILE[name], deadline_s=3.0)
    assert kind == "malformed" and isinstance(e, wire.ProtocolViolation), (kind, e)


@pytest.mark.parametrize("name", ["lists 10**5 deep", "10**6 references to one list", "huge length (8-byte header)"])
def test_a_hostile_frame_is_refused_within_a_short_deadline(name):
    kind, e = _feed(HOSTILE[name])
    assert kind == "malformed", (kind, e)  # a violation, or the deadline first


def test_header_then_silence_and_a_trickle_time_out():
    for data, trickle in ((struct.pack("!i", 1000), 0.0), (_frame(_VALID), 0.05)):
        kind, e = _feed(data, close=False, trickle_s=trickle)
        assert kind == "malformed" and isinstance(e, wire.WireTimeout), (kind, e)


def test_a_long_hostile_pickle_ends_at_the_deadline_or_the_opcode_budget():
    # 4 MB of MARK, NONE, POP_MARK-free ops: each costs the decoder a loop turn; it stops at MAX_OPS opcodes.
    kind, e = _feed(_frame(_pickle(b"(" * (wire.MAX_OPS + 10))), limit=8 << 20)
    assert kind == "malformed", (kind, e)


def test_the_replies_workers_write_come_back_whole():
    x = torch.randn(33, 200, dtype=torch.float16)
    msg = ("ok", {"outs": [x[:, :100], x[:, 100:]], "x_after": x, "meta": {"shape": [33, 100]}, "nan": float("nan"),
                  "zero_rows": torch.zeros(0, 32), "b": torch.tensor([True, False]), "ops": [], "none": None})
    kind, got = _feed(_frame(child_wire.reply_bytes(msg)))
    assert kind == "value"
    assert torch.equal(got[1]["outs"][0], x[:, :100]) and torch.equal(got[1]["x_after"], x)
    assert got[1]["zero_rows"].shape == (0, 32) and got[1]["b"].tolist() == [True, False]
    assert got[1]["nan"] == ("\x00grader:float", "nan")  # tagged by the worker, never a float in the parent
