"""Messages between the trusted parent and its workers: data only, never code.

`multiprocessing.Connection.send/recv` pickle, and unpickling runs whatever the bytes name: a submission that
finds its worker's end of the pipe (through `gc`, or its file descriptor) could make the *parent* run its code
(tests/exploits/pickle_reply). So every message a correctness worker exchanges is written with `torch.save` and read with
`torch.load(weights_only=True)`, PyTorch's own restricted unpickler: it rebuilds tensors, numbers, strings,
lists, tuples, dicts and sets, and refuses anything else. Messages without tensors (the timing requests, whose
wall clock the parent compares across workers) skip torch.save's zip container: a plain pickle read by an
unpickler that refuses every global, which costs microseconds instead of ~0.1-0.2 ms. Tensors travel by value (no shared memory with a
worker, and none of the file-descriptor passing that `torch.multiprocessing` would set up for each one).
Timing workers use `timing_parent` / `timing_worker` (below): replies in the b"R" format, requests unchanged.
"""

from __future__ import annotations

import io
import pickle
import warnings
from typing import Any

import torch


class MalformedMessage(Exception):
    """The bytes are not a message the grader wrote: forged, truncated, or not data."""


def plain(obj: Any) -> Any:
    """`obj` as the types the restricted unpickler accepts: str/int/float subclasses (torch.__version__ is one)
    become the base type; containers are rebuilt; tensors go as CPU tensors. Anything else is a grader bug."""
    if obj is None or type(obj) in (bool, int, float, str, bytes):
        return obj
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu() if obj.device.type != "cpu" else obj.detach()
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, dict):
        return {plain(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [plain(v) for v in obj]
        return type(obj)(items) if type(obj) in (list, tuple, set, frozenset) else tuple(items)
    raise TypeError(f"cannot send a {type(obj).__name__} between grader processes (data only: {obj!r:.80})")


class _NoGlobals(pickle.Unpickler):
    """Builds only what pickle encodes without naming anything: None, bool, int, float, str, bytes, and lists,
    tuples, dicts and sets of those. Any class or function named in the bytes is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not data")


def _has_tensor(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, dict):
        return any(_has_tensor(k) or _has_tensor(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(_has_tensor(v) for v in obj)
    return False


def dumps(obj: Any) -> bytes:
    """Messages without tensors (every timing request and reply) as a plain pickle, tag b"P": the timed requests'
    wall clock includes this, so it must cost microseconds. Messages with tensors with torch.save, tag b"T"."""
    obj = plain(obj)
    if not _has_tensor(obj):
        return b"P" + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    buf = io.BytesIO()
    torch.save(obj, buf)
    return b"T" + buf.getvalue()


def loads(data: bytes) -> Any:
    tag, body = data[:1], data[1:]
    try:
        if tag == b"P":
            return _NoGlobals(io.BytesIO(body)).load()
        if tag == b"R":
            return _unpack(_NoGlobals(io.BytesIO(body)).load())
        if tag == b"T":
            with warnings.catch_warnings():  # a forged legacy pickle makes torch warn about its protocol: refused anyway
                warnings.filterwarnings("ignore", message="Detected pickle protocol")
                return torch.load(io.BytesIO(body), weights_only=True, map_location="cpu")
    except MalformedMessage:
        raise
    except Exception as e:  # UnpicklingError for forbidden globals; others for truncated or foreign bytes
        raise MalformedMessage(f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}") from None
    raise MalformedMessage(f"unknown message tag {tag!r}")


def send(conn: Any, obj: Any) -> None:
    conn.send_bytes(dumps(obj))


def recv(conn: Any) -> Any:
    """The next message; MalformedMessage if it is not one (EOFError / OSError pass through)."""
    return loads(conn.recv_bytes())


_RAW = "\x00grader:raw-tensor"  # first item of a tuple that stands for a tensor sent as raw bytes (tag b"R")
_RAW_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
    torch.uint8, torch.bool)}


def _pack(obj: Any) -> Any:
    """`plain(obj)` with each tensor replaced by (_RAW, dtype name, shape, its bytes): a pickle with no globals."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        return (_RAW, str(t.dtype).removeprefix("torch."), list(t.shape), t.reshape(-1).view(torch.uint8).numpy().tobytes())
    if isinstance(obj, dict):
        return {_pack(k): _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _unpack(obj: Any) -> Any:
    if isinstance(obj, tuple) and obj[:1] == (_RAW,):
        _, dtype, shape, raw = obj if len(obj) == 4 else (None, None, None, None)
        if dtype not in _RAW_DTYPES or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape) or type(raw) is not bytes:
            raise MalformedMessage("a raw tensor with a bad header")
        dt = _RAW_DTYPES[dtype]
        n = 1
        for d in shape:
            n *= d
        if n * dt.itemsize != len(raw):
            raise MalformedMessage(f"a raw tensor of shape {shape} and dtype {dtype} cannot be {len(raw)} bytes")
        if n == 0:
            return torch.empty(shape, dtype=dt)
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dt).reshape(shape)
    if isinstance(obj, dict):
        return {_unpack(k): _unpack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_unpack(v) for v in obj)
    return obj


class timing_parent:
    """The parent's end of a *timing* worker's pipe. Requests go out in multiprocessing's own format (the worker
    reads them; what it runs is its own business); replies come back in the b"R" format and are read with the
    no-globals unpickler, so a reply forged by code in the worker is data or refused, never code.

    Why not `wire`'s send/recv here too: with them the students' requests cost up to 0.13 ms per call more than the
    baselines', past the wall-clock check's slack (docs/PERF_NOTES.md, runs 25-27), while multiprocessing's format
    did not. The b"R" replies keep the reply path as cheap as that format (no torch.save, no fd passing).
    """

    @staticmethod
    def send(conn: Any, obj: Any) -> None:
        conn.send(obj)

    @staticmethod
    def recv(conn: Any) -> Any:
        return loads(conn.recv_bytes())


class timing_worker:
    """The worker's end of a timing pipe (see timing_parent)."""

    @staticmethod
    def send(conn: Any, obj: Any) -> None:
        conn.send_bytes(b"R" + pickle.dumps(_pack(plain(obj)), protocol=pickle.HIGHEST_PROTOCOL))

    @staticmethod
    def recv(conn: Any) -> Any:
        return conn.recv()
