"""The parent's end of the pipe to a worker: every byte a child sends is read here, and nothing else reads them.

A reply is read in three bounded steps, and whatever is wrong with it becomes a `MalformedMessage` (a
`ProtocolViolation` with a one-line reason, or a `WireTimeout`), never anything else: `read_frame` (the framing,
within the deadline and the size limit), `decode` (grader/wire_decode.py: data only, every bound), and `check_reply`
(the shape that grader/child/wire.py COMMANDS declares for the command). Requests: `request`, written by `send`
(`dumps`, bounded by the deadline) or, to a timing worker, `timing_parent.send` (multiprocessing's format, for now).
Why: docs/SECURITY.md#the-wire.
"""

from __future__ import annotations

import math
import os
import select
import struct
import time
import types
import typing
from typing import Any

from grader.child.wire import COMMANDS, EXIT, MAX_STR, MalformedMessage, dumps, tensors_by_value
from grader.child.wire import request as request  # the one request constructor, named on both sides
from grader.wire_decode import (
    DEFAULT_MAX_REPLY,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_OPS,
    ProtocolViolation,
    WireTimeout,
    check,
    decode,
    tagged_float,
)

__all__ = [
    "COMMANDS",
    "DEFAULT_MAX_REPLY",
    "EXIT",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_OPS",
    "MAX_STR",
    "MalformedMessage",
    "ProtocolViolation",
    "WireTimeout",
    "check",
    "check_reply",
    "decode",
    "dumps",
    "recv",
    "request",
    "send",
    "tagged_float",
    "timing_parent",
]


# ------------------------------------------------------------------------------------------------------------
# 1. frames


def read_frame(conn: Any, *, deadline: float, limit: int = DEFAULT_MAX_REPLY) -> bytearray:
    """One frame's body from `conn` (a multiprocessing Connection, or anything with fileno()).

    EOFError if the pipe is closed before the frame starts (the child is gone); WireTimeout past `deadline`
    (time.monotonic()); ProtocolViolation for a length that is negative or over `limit`, or a pipe closed mid-frame."""
    fd = conn.fileno()
    was_blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        (size,) = struct.unpack("!i", _read_exact(fd, 4, deadline, "a frame header", at_start=True))
        if size == -1:
            (size,) = struct.unpack("!Q", _read_exact(fd, 8, deadline, "a frame header"))
        if size < 0:
            raise ProtocolViolation(f"a frame header announcing {size} bytes")
        if size > limit:
            raise ProtocolViolation(f"a reply of {size} bytes announced, over the limit of {limit} bytes")
        return _read_exact(fd, size, deadline, f"a {size}-byte reply")
    finally:
        try:
            os.set_blocking(fd, was_blocking)
        except OSError:
            pass


def _read_exact(fd: int, n: int, deadline: float, what: str, at_start: bool = False) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    poller = None
    while got < n:
        try:
            k = os.readv(fd, [view[got:]])
        except (BlockingIOError, InterruptedError):
            k = -1
        if k == 0:
            if at_start and got == 0:
                raise EOFError
            raise ProtocolViolation(f"the pipe closed inside {what} (after {got} of {n} bytes)")
        if k > 0:
            got += k
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            raise WireTimeout(f"{what}: {got} of {n} bytes had come when the deadline passed")
        if poller is None:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
        poller.poll(max(1, math.ceil(left * 1000)))
    return buf


def write_frame(conn: Any, data: bytes, *, deadline: float) -> None:
    """`conn.send_bytes(data)` (the same framing), but a child that stops reading cannot hold the parent past
    `deadline`: WireTimeout then (the frame is half written: the caller must end the child)."""
    n = len(data)
    head = struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!i", -1) + struct.pack("!Q", n)
    fd = conn.fileno()
    was_blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    poller = None
    try:
        for part in (head, data):
            view, sent = memoryview(part), 0
            while sent < len(part):
                try:
                    sent += os.write(fd, view[sent:])
                    continue
                except (BlockingIOError, InterruptedError):
                    pass
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WireTimeout(f"the worker did not read its request ({sent} of {len(part)} bytes sent)")
                if poller is None:
                    poller = select.poll()
                    poller.register(fd, select.POLLOUT)
                poller.poll(max(1, math.ceil(left * 1000)))
    finally:
        try:
            os.set_blocking(fd, was_blocking)
        except OSError:
            pass


# ------------------------------------------------------------------------------------------------------------
# requests and replies


def recv(conn: Any, *, deadline: float, limit: int = DEFAULT_MAX_REPLY) -> Any:
    """The next reply on `conn`, within `deadline` (time.monotonic()) and `limit` bytes. Raises EOFError (the pipe
    closed between frames: the child is gone), WireTimeout, ProtocolViolation, or OSError from the socket."""
    return decode(read_frame(conn, deadline=deadline, limit=limit), limit=limit, deadline=deadline)


def send(conn: Any, obj: Any, *, deadline: float | None = None) -> None:
    """A request (grader/child/wire.py `dumps`, the one request format); with a deadline, a bounded write."""
    if deadline is None:
        conn.send_bytes(dumps(obj))
    else:
        write_frame(conn, dumps(obj), deadline=deadline)


class timing_parent:
    """The parent's end of a *timing* worker's pipe: requests in multiprocessing's own format, tensors by value
    (grader/child/wire.py `tensors_by_value`); replies read like every worker's. Why not `send` above: with the
    data-only format both ways, students' requests cost up to 0.13 ms per call more than the baselines' on the GPU,
    past the wall-clock check's slack (docs/performance.md#the-wall-clock-check); one format waits for a GPU A/B."""

    @staticmethod
    def send(conn: Any, obj: Any, *, deadline: float | None = None) -> None:
        conn.send(tensors_by_value(obj))

    recv = staticmethod(recv)


def _kinds(hint: Any) -> tuple[type, ...] | None:
    """The top-level types an annotation allows (list[str] -> list; int | None -> int, NoneType); None for Any."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [_kinds(h) for h in typing.get_args(hint)]
        return None if any(p is None for p in parts) else tuple(t for p in parts if p for t in p)
    kind = origin or hint
    return (kind, int) if kind is float else (kind,)  # an int is a float's value too


def _shape(declared: Any) -> tuple[type, dict[str, tuple[type, ...] | None]]:
    """(the reply's type, its declared keys' allowed types) for a COMMANDS reply type."""
    if typing.is_typeddict(declared):
        return dict, {k: _kinds(h) for k, h in typing.get_type_hints(declared).items()}
    return typing.get_origin(declared) or declared, {}  # dict[str, X]: a dict, its values left to the stage


_REPLIES = {cmd: _shape(reply) for cmd, (_, reply) in COMMANDS.items()}


def check_reply(cmd: str, reply: Any) -> str:
    """'' when an ("ok", value) reply to `cmd` has the type that grader/child/wire.py COMMANDS declares for it (a
    TypedDict reply: a dict whose declared keys, where present, hold their declared kind of value), else what is
    wrong. The one place the parent checks a reply against the protocol; the stages check what is inside."""
    if cmd not in _REPLIES:
        return ""
    kind, keys = _REPLIES[cmd]
    if type(reply) is not kind:
        return f"a {type(reply).__name__} answered {cmd!r}, not a {kind.__name__}"
    fields: Any = reply if keys else {}
    for key, allowed in keys.items():
        if allowed is not None and key in fields and type(fields[key]) not in allowed:
            return f"the {key!r} of a {cmd!r} reply is a {type(fields[key]).__name__}"
    return ""
