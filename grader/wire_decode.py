"""The parent's decoder of a worker's reply body: steps 2 and 3 of grader/wire.py (docs/SECURITY.md#the-wire).

`decode`: the b"R" body (grader/child/wire.py `reply_bytes`), a pickle of data only, read by the small opcode
interpreter below (no global is ever looked up, no callable ever called, every bound checked while reading), then
walked iteratively by `check` (depth, items, raw tensors' headers) before `_build` turns raw records into tensors.
`torch.load` and `pickle` are never called on a child's bytes.
"""

from __future__ import annotations

import math
import pickle
import struct
import time
from typing import Any

import torch

from grader.child.wire import (
    _FLOAT,
    _RAW,
    _RAW_DTYPES,
    MAX_FLOAT,
    MAX_INT,
    MAX_STR,
    MalformedMessage,
)

DEFAULT_MAX_REPLY = 64 << 20  # bytes of one reply frame, unless the Sandbox's creator says otherwise
MAX_DEPTH = 32  # containers inside containers
MAX_ITEMS = 1_000_000  # items of every list, tuple, dict and set of one reply, in all
MAX_OPS = 2_000_000  # pickle opcodes of one reply (every item costs at least one)
_MAX_INT_BYTES = 9  # a LONG1/LONG4 of more bytes is out of range before it is decoded


class ProtocolViolation(MalformedMessage):
    """The child broke the wire format or its bounds; str() is the one-line reason."""


class WireTimeout(MalformedMessage):
    """The deadline passed before a whole frame arrived (a child that sent a header, then nothing)."""


# ------------------------------------------------------------------------------------------------------------
# 2. the b"R" body: a pickle of data only


def _op(name: str) -> int:
    code: bytes = getattr(pickle, name)
    return code[0]


(
    _PROTO,
    _FRAME,
    _STOP,
    _MARK,
    _NONE,
    _TRUE,
    _FALSE,
    _BININT,
    _BININT1,
    _BININT2,
    _LONG1,
    _LONG4,
    _BINFLOAT,
    _SHORT_UNI,
    _UNI,
    _UNI8,
    _SHORT_BYTES,
    _BYTES,
    _BYTES8,
    _EMPTY_TUPLE,
    _TUPLE1,
    _TUPLE2,
    _TUPLE3,
    _TUPLE,
    _EMPTY_LIST,
    _APPEND,
    _APPENDS,
    _EMPTY_DICT,
    _SETITEM,
    _SETITEMS,
    _EMPTY_SET,
    _ADDITEMS,
    _FROZENSET,
    _MEMOIZE,
    _BINGET,
    _LONG_BINGET,
) = (
    _op(n)
    for n in (
        "PROTO",
        "FRAME",
        "STOP",
        "MARK",
        "NONE",
        "NEWTRUE",
        "NEWFALSE",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG1",
        "LONG4",
        "BINFLOAT",
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "BINUNICODE8",
        "SHORT_BINBYTES",
        "BINBYTES",
        "BINBYTES8",
        "EMPTY_TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "TUPLE",
        "EMPTY_LIST",
        "APPEND",
        "APPENDS",
        "EMPTY_DICT",
        "SETITEM",
        "SETITEMS",
        "EMPTY_SET",
        "ADDITEMS",
        "FROZENSET",
        "MEMOIZE",
        "BINGET",
        "LONG_BINGET",
    )
)
_SCALARS = (type(None), bool, int, float, str)  # what a dict key or a set member may be (hashing it is flat)


class _Short(Exception):
    """Raised by an opcode handler when the data ends inside its argument."""


class _Reader:
    """The decoder's state: the data, the offset of the next byte, the stack, the marks and the memo."""

    __slots__ = ("data", "n", "pos", "stack", "marks", "memo")

    def __init__(self, data: bytes | bytearray, pos: int) -> None:
        self.data = data
        self.n = len(data)
        self.pos = pos
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: list[Any] = []

    def uint(self, w: int, *, signed: bool = False) -> int:
        """The next w bytes as a little-endian int (_Short if the data ends first)."""
        if self.pos + w > self.n:
            raise _Short
        x = int.from_bytes(self.data[self.pos : self.pos + w], "little", signed=signed)
        self.pos += w
        return x

    def take(self, k: int) -> bytes | bytearray:
        """The next k bytes (_Short if the data ends first)."""
        if self.pos + k > self.n:
            raise _Short
        chunk = self.data[self.pos : self.pos + k]
        self.pos += k
        return chunk


def _do_memoize(r: _Reader, op: int) -> None:
    if not r.stack:
        raise ProtocolViolation("a pickle that memoizes nothing")
    r.memo.append(r.stack[-1])


def _do_unicode(r: _Reader, op: int) -> None:
    k = r.uint(1 if op == _SHORT_UNI else 4 if op == _UNI else 8)
    if k > 4 * MAX_STR:
        raise ProtocolViolation(f"a string of {k} bytes (at most {MAX_STR} characters)")
    text = r.take(k).decode("utf-8", "surrogatepass")
    if len(text) > MAX_STR:
        raise ProtocolViolation(f"a string of {len(text)} characters (at most {MAX_STR})")
    r.stack.append(text)


def _do_float(r: _Reader, op: int) -> None:
    if r.pos + 8 > r.n:
        raise _Short
    x = struct.unpack_from(">d", r.data, r.pos)[0]
    r.pos += 8
    if not -MAX_FLOAT <= x <= MAX_FLOAT:  # also False for NaN
        raise ProtocolViolation(f"a float {x!r} (NaN, inf and |x| > {MAX_FLOAT:g} are not numbers here)")
    r.stack.append(x)


def _do_binint(r: _Reader, op: int) -> None:
    r.stack.append(r.uint(1 if op == _BININT1 else 2 if op == _BININT2 else 4, signed=op == _BININT))


def _do_mark(r: _Reader, op: int) -> None:
    r.marks.append(len(r.stack))


def _do_close_mark(r: _Reader, op: int) -> None:
    """APPENDS, SETITEMS, ADDITEMS, TUPLE, FROZENSET: the values above the last mark."""
    if not r.marks:
        raise ProtocolViolation("a pickle that closes a mark it never opened")
    stack = r.stack
    at = r.marks.pop()
    items = stack[at:]
    del stack[at:]
    if op == _TUPLE:
        stack.append(tuple(items))
        return
    if op == _FROZENSET:
        stack.append(frozenset(_key(v) for v in items))
        return
    into = stack[-1] if stack else None
    if op == _APPENDS and type(into) is list:
        into.extend(items)
    elif op == _SETITEMS and type(into) is dict and not len(items) % 2:
        for i in range(0, len(items), 2):
            into[_key(items[i])] = items[i + 1]
    elif op == _ADDITEMS and type(into) is set:
        into.update(_key(v) for v in items)
    else:
        raise ProtocolViolation("a pickle that adds items to the wrong kind of value")


def _do_get(r: _Reader, op: int) -> None:
    i = r.uint(1 if op == _BINGET else 4)
    if i >= len(r.memo):
        raise ProtocolViolation(f"a pickle that refers to memo entry {i} of {len(r.memo)}")
    r.stack.append(r.memo[i])


def _do_small(r: _Reader, op: int) -> None:
    """TUPLE1, TUPLE2, TUPLE3, APPEND, SETITEM: a fixed number of values off the top of the stack."""
    adds = op == _APPEND or op == _SETITEM
    k = 1 + op - _TUPLE1 if not adds else 1 if op == _APPEND else 2
    stack = r.stack
    base = len(stack) - k
    if base < (r.marks[-1] if r.marks else 0) + (1 if adds else 0):
        raise ProtocolViolation("a pickle that uses values it never made")
    items = stack[base:]
    del stack[base:]
    if op == _APPEND and type(stack[-1]) is list:
        stack[-1].append(items[0])
    elif op == _SETITEM and type(stack[-1]) is dict:
        stack[-1][_key(items[0])] = items[1]
    elif not adds:
        stack.append(tuple(items))
    else:
        raise ProtocolViolation("a pickle that adds items to the wrong kind of value")


def _do_long(r: _Reader, op: int) -> None:
    k = r.uint(1 if op == _LONG1 else 4, signed=True)
    if not 0 <= k <= _MAX_INT_BYTES:
        raise ProtocolViolation(f"an int of {k} bytes (at most +-2**63)")
    x = int.from_bytes(r.take(k), "little", signed=True)
    if not -MAX_INT <= x <= MAX_INT:
        raise ProtocolViolation(f"an int of {x.bit_length()} bits (at most +-2**63)")
    r.stack.append(x)


def _do_bytes(r: _Reader, op: int) -> None:
    k = r.uint(1 if op == _SHORT_BYTES else 4 if op == _BYTES else 8)
    if r.pos + k > r.n:
        raise _Short
    r.stack.append(bytearray(memoryview(r.data)[r.pos : r.pos + k]))  # one copy: the frame is let go once decoded
    r.pos += k


def _do_framing(r: _Reader, op: int) -> None:
    r.pos += 1 if op == _PROTO else 8  # FRAME is a length hint only: the whole body is already here


def _pusher(make: Any) -> Any:
    """A handler that pushes make(op)."""

    def push(r: _Reader, op: int) -> None:
        r.stack.append(make(op))

    return push


_HANDLERS: dict[int, Any] = {
    _MEMOIZE: _do_memoize,
    **dict.fromkeys((_SHORT_UNI, _UNI, _UNI8), _do_unicode),
    _BINFLOAT: _do_float,
    **dict.fromkeys((_BININT1, _BININT2, _BININT), _do_binint),
    _MARK: _do_mark,
    **dict.fromkeys((_APPENDS, _SETITEMS, _ADDITEMS, _TUPLE, _FROZENSET), _do_close_mark),
    _EMPTY_LIST: _pusher(lambda op: []),
    _EMPTY_DICT: _pusher(lambda op: {}),
    **dict.fromkeys((_BINGET, _LONG_BINGET), _do_get),
    _EMPTY_TUPLE: _pusher(lambda op: ()),
    **dict.fromkeys((_TUPLE1, _TUPLE2, _TUPLE3, _APPEND, _SETITEM), _do_small),
    _NONE: _pusher(lambda op: None),
    **dict.fromkeys((_TRUE, _FALSE), _pusher(lambda op: op == _TRUE)),
    **dict.fromkeys((_LONG1, _LONG4), _do_long),
    **dict.fromkeys((_SHORT_BYTES, _BYTES, _BYTES8), _do_bytes),
    _EMPTY_SET: _pusher(lambda op: set()),
    **dict.fromkeys((_PROTO, _FRAME), _do_framing),
}


def _unpickle(data: bytes | bytearray, pos: int, deadline: float | None) -> Any:
    """The value that the data-only pickle in data[pos:] (protocol 2-5, as `pickle.dumps` writes it) encodes;
    ProtocolViolation else. One flat loop over a table of opcode handlers (`_HANDLERS`): a timing reply is read
    in ~10 us."""
    r = _Reader(data, pos)
    n = r.n
    handlers = _HANDLERS
    for ops in range(MAX_OPS):
        if r.pos >= n:
            raise ProtocolViolation("a pickle with no STOP")
        op = data[r.pos]
        r.pos += 1
        if op == _STOP:
            return _stop(r)
        handler = handlers.get(op)
        if handler is None:
            raise ProtocolViolation(
                f"pickle opcode {bytes([op])!r} at offset {r.pos - 1} (data only: no globals, no calls)"
            )
        try:
            handler(r, op)
        except _Short:
            raise ProtocolViolation(f"a pickle cut short (at offset {r.pos} of {n})") from None
        if ops & 0x3FFF == 0x3FFF and deadline is not None and time.monotonic() > deadline:
            raise WireTimeout("decoding the reply ran past the deadline")
    raise ProtocolViolation(f"a pickle of more than {MAX_OPS} opcodes")


def _stop(r: _Reader) -> Any:
    """The value a STOP returns: the one value left on the stack, at the end of the data."""
    if len(r.stack) != 1 or r.marks:
        raise ProtocolViolation(f"a pickle that ends with {len(r.stack)} values on its stack")
    if r.pos != r.n:
        raise ProtocolViolation(f"{r.n - r.pos} bytes after the end of the pickle")
    return r.stack[0]


def _key(k: Any) -> Any:
    """A dict key or set member: a scalar only (hashing a nested tuple recurses in C, and a deep one overflows the
    C stack: a 10 MB pickle of nested tuples used as a key crashes Python 3.11 with SIGSEGV)."""
    if type(k) not in _SCALARS:
        raise ProtocolViolation(f"a dict key or set member of type {type(k).__name__} (only numbers and strings)")
    return k


# ------------------------------------------------------------------------------------------------------------
# 3. bounds, then tensors


def check(value: Any, *, limit: int = DEFAULT_MAX_REPLY) -> bool:
    """Walk `value` (iteratively) and raise ProtocolViolation at the first thing out of bounds. Returns whether it
    holds a raw-tensor record (then `_build` must turn them into tensors)."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    items = 0
    tensor_bytes = 0
    has_raw = False
    while todo:
        obj, depth = todo.pop()
        t = type(obj)
        if t in _CHECKED_SCALARS:
            _check_scalar(obj, t)
        elif t in (list, tuple, dict, set, frozenset):
            if depth >= MAX_DEPTH:
                raise ProtocolViolation(f"values nested more than {MAX_DEPTH} deep")
            if t is tuple and obj[:1] == (_RAW,):
                tensor_bytes += _raw_header(obj, limit)
                if tensor_bytes > limit:
                    raise ProtocolViolation(f"tensors of more than {limit} bytes in all")
                has_raw = True
                continue
            items += len(obj)
            if items > MAX_ITEMS:
                raise ProtocolViolation(f"more than {MAX_ITEMS} items in all")
            if t is dict:
                todo.extend((k, depth + 1) for k in obj)
                todo.extend((v, depth + 1) for v in obj.values())
            else:
                todo.extend((v, depth + 1) for v in obj)
        elif t in (bytes, bytearray):
            raise ProtocolViolation("bytes outside a raw tensor")
        else:
            raise ProtocolViolation(f"a value of type {t.__name__}")
    return has_raw


_CHECKED_SCALARS = (str, int, float, bool, type(None))


def _check_scalar(obj: Any, t: type) -> None:
    """ProtocolViolation if the str, int or float `obj` (of type t) is out of bounds; a bool or None always fits."""
    if t is str:
        if len(obj) > MAX_STR:
            raise ProtocolViolation(f"a string of {len(obj)} characters (at most {MAX_STR})")
    elif t is int:
        if not -MAX_INT <= obj <= MAX_INT:  # compares sizes first: never converts the int to text
            raise ProtocolViolation(f"an int of {obj.bit_length()} bits (at most +-2**63)")
    elif t is float:
        if not math.isfinite(obj) or abs(obj) > MAX_FLOAT:
            raise ProtocolViolation(f"a float {obj!r} (NaN, inf and |x| > {MAX_FLOAT:g} are not numbers here)")


def _raw_header(rec: tuple[Any, ...], limit: int) -> int:
    """The byte size of a raw-tensor record (_RAW, dtype name, shape, bytes) whose header is sound."""
    if len(rec) != 4:
        raise ProtocolViolation("a raw tensor with a bad header (not 4 fields)")
    _, dtype, shape, raw = rec
    if type(dtype) is not str or dtype not in _RAW_DTYPES:
        raise ProtocolViolation(f"a raw tensor with a bad header (dtype {str(dtype)[:40]!r})")
    if type(shape) is not list or len(shape) > MAX_DEPTH or not all(type(d) is int and 0 <= d <= limit for d in shape):
        raise ProtocolViolation("a raw tensor with a bad header (shape)")
    if type(raw) is not bytearray:
        raise ProtocolViolation("a raw tensor with a bad header (no bytes)")
    numel, nonzero = 1, 1
    for d in shape:
        numel *= d
        nonzero *= max(d, 1)
        if nonzero > limit:  # even with a 0 in the shape: torch.empty of absurd sizes is refused here
            raise ProtocolViolation(f"a raw tensor of shape {shape[:8]} (over the limit of {limit} bytes)")
    if numel * _RAW_DTYPES[dtype].itemsize != len(raw):
        raise ProtocolViolation(f"a raw tensor of shape {shape} and dtype {dtype} cannot be {len(raw)} bytes")
    return len(raw)


def _build(obj: Any, used: set[int]) -> Any:
    """`obj` (checked: nesting at most MAX_DEPTH) with each raw-tensor record replaced by a CPU tensor."""
    t = type(obj)
    if t is tuple and obj[:1] == (_RAW,):
        _, dtype, shape, raw = obj
        dt = _RAW_DTYPES[dtype]
        if not raw:
            return torch.empty(shape, dtype=dt)
        if id(raw) in used:  # the same bytes twice (a memo reference): each tensor gets its own copy
            raw = bytearray(raw)
        used.add(id(raw))
        flat = torch.frombuffer(raw, dtype=torch.uint8)
        return (flat != 0 if dt is torch.bool else flat.view(dt)).reshape(shape)
    if t is dict:
        return {k: _build(v, used) for k, v in obj.items()}
    if t is list:
        return [_build(v, used) for v in obj]
    if t is tuple:
        return tuple(_build(v, used) for v in obj)
    return obj


def decode(frame: bytes | bytearray, *, limit: int = DEFAULT_MAX_REPLY, deadline: float | None = None) -> Any:
    """A reply from its frame body: the value, or ProtocolViolation (WireTimeout if decoding passes `deadline`)."""
    if frame[:1] != b"R":
        raise ProtocolViolation(f"a reply tagged {bytes(frame[:1])!r} (every worker replies in the b'R' format)")
    try:
        value = _unpickle(frame, 1, deadline)
    except MalformedMessage:
        raise
    except MemoryError:
        raise ProtocolViolation(f"a reply of {len(frame)} bytes that does not fit in memory once decoded") from None
    except (ValueError, UnicodeDecodeError, struct.error, TypeError) as e:  # e.g. a string that is not UTF-8
        raise ProtocolViolation(f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}") from None
    if check(value, limit=limit):
        value = _build(value, set())
    return value


def tagged_float(v: Any) -> float | None:
    """A number of a checked reply, for code where NaN or inf is a legitimate *answer* (a timed output's checksum):
    an int or float as it is, a float the worker had to tag (grader/child/wire.py `_pack`: NaN, inf, |x| > 1e300)
    as that float again, anything else None. Never for a value that goes into results."""
    if type(v) in (int, float):
        return float(v)
    if type(v) is tuple and len(v) == 2 and v[0] == _FLOAT and type(v[1]) is str and len(v[1]) <= 32:
        try:
            return float(v[1])
        except ValueError:
            return None
    return None
