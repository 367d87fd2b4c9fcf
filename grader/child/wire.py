"""Messages between the trusted parent and its workers: data only, never code.

`multiprocessing.Connection.send/recv` pickle, and unpickling runs whatever the bytes name: a submission that
finds its worker's end of the pipe (through `gc`, or its file descriptor) could make the *parent* run its code
(tests/exploits/pickle_reply). So:

- Requests (parent -> correctness worker): `dumps`/`send` here, read by the worker with `recv`/`loads`. Messages
  without tensors are a plain pickle (tag b"P"), messages with tensors are written with `torch.save` (tag b"T");
  only the worker reads them. Timing workers get their requests in multiprocessing's own format
  (`timing_parent.send` in grader/wire.py, `timing_worker.recv` here).
- Replies (every worker -> parent): one format, b"R" (`reply_bytes`): a plain pickle without globals whose tensors
  travel as raw bytes with a dtype and shape, whose floats outside what the parent accepts (NaN, inf, |x| > 1e300)
  travel as a tagged string, and whose strings are capped at MAX_STR characters. The parent reads it with its own
  decoder (grader/wire.py), which builds data only, checks every bound, and never calls `torch.load` on a child's
  bytes. Tensors travel by value (no shared memory with a worker, and none of the file-descriptor passing that
  `torch.multiprocessing` would set up for each one).

Nothing here imports the trusted `grader` package: this module runs beside student code.
"""

from __future__ import annotations

import io
import math
import pickle
import warnings
from typing import Any

import torch


class MalformedMessage(Exception):
    """The bytes are not a message the grader wrote: forged, truncated, or not data."""


# What a worker's error reply can say it was (the fourth field of ("error", line, detail, category, own)); the parent
# (grader/sandbox.py) decides a failure's reason by this word, never by the line, and reads any other word as "call".
# "load": the file does not import, parse, or have the function; "not-implemented": the stub's NotImplementedError;
# "call": the call raised; "cuda-fault": a CUDA error that poisons this process's context (the parent starts a fresh
# worker for the remaining cases); from the CUDA-on-CPU layer (child/cudacpu_binding.py): "out-of-bounds",
# "misaligned", "undefined-behavior" (its sanitizers' reports) and "race" (two launch orders gave different outputs).
ERROR_CATEGORIES = (
    "load",
    "not-implemented",
    "call",
    "cuda-fault",
    "out-of-bounds",
    "misaligned",
    "undefined-behavior",
    "race",
)

MAX_STR = 64 << 10  # characters in one string of a reply (a worker caps its tracebacks well below this)
MAX_FLOAT = 1e300  # a float in a reply beyond this (or NaN, inf) travels tagged (`_FLOAT`), never as a float


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
    """A request to a correctness worker: without tensors as a plain pickle, tag b"P" (microseconds); with tensors
    with torch.save, tag b"T". Only the worker reads these (`loads`); replies are `reply_bytes`."""
    obj = plain(obj)
    if not _has_tensor(obj):
        return b"P" + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    buf = io.BytesIO()
    torch.save(obj, buf)
    return b"T" + buf.getvalue()


def loads(data: bytes) -> Any:
    """A request, as the worker reads it (MalformedMessage if it is not one). The parent never calls this."""
    tag, body = data[:1], data[1:]
    try:
        if tag == b"P":
            return _untag(_NoGlobals(io.BytesIO(body)).load())
        if tag == b"T":
            with (
                warnings.catch_warnings()
            ):  # a forged legacy pickle makes torch warn about its protocol: refused anyway
                warnings.filterwarnings("ignore", message="Detected pickle protocol")
                return _untag(torch.load(io.BytesIO(body), weights_only=True, map_location="cpu"))
    except MalformedMessage:
        raise
    except Exception as e:  # noqa: BLE001  (UnpicklingError for forbidden globals; others: truncated or foreign bytes)
        raise MalformedMessage(
            f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}"
        ) from None
    raise MalformedMessage(f"unknown message tag {tag!r}")


def send(conn: Any, obj: Any) -> None:
    conn.send_bytes(dumps(obj))


def recv(conn: Any) -> Any:
    """The next message; MalformedMessage if it is not one (EOFError / OSError pass through)."""
    return loads(conn.recv_bytes())


def reply_bytes(obj: Any) -> bytes:
    """A worker's reply in the b"R" format (the only one the parent reads): see the module docstring."""
    return b"R" + pickle.dumps(_pack(plain(obj)), protocol=pickle.HIGHEST_PROTOCOL)


_RAW = "\x00grader:raw-tensor"  # first item of a tuple that stands for a tensor sent as raw bytes (tag b"R")
_FLOAT = "\x00grader:float"  # (_FLOAT, repr(x)): a float the parent does not take as a number (NaN, inf, huge)
_INT = "\x00grader:int"  # (_INT, hex(n)): an int beyond +-2**63, which the parent does not take as a number either
MAX_INT = 2**63
_TRUNCATED = "\n[... truncated by the grader's worker]"
_RAW_DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}


def _pack(obj: Any) -> Any:
    """`plain(obj)` with each tensor replaced by (_RAW, dtype name, shape, its bytes), each number the parent refuses
    tagged (a float that is NaN, inf or |x| > MAX_FLOAT by (_FLOAT, repr(x)), an int beyond +-MAX_INT by (_INT,
    hex(n)): a launch record may hold a constexpr -inf or a 64-bit mask, a timed output's checksum may be NaN), and
    each string over MAX_STR characters cut to MAX_STR: a pickle with no globals, within the bounds grader/wire.py
    checks."""
    if type(obj) is float:
        return obj if math.isfinite(obj) and abs(obj) <= MAX_FLOAT else (_FLOAT, repr(obj))
    if type(obj) is int:
        return obj if -MAX_INT <= obj <= MAX_INT else (_INT, hex(obj))
    if type(obj) is str:
        return obj if len(obj) <= MAX_STR else obj[: MAX_STR - len(_TRUNCATED)] + _TRUNCATED
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        return (
            _RAW,
            str(t.dtype).removeprefix("torch."),
            list(t.shape),
            t.reshape(-1).view(torch.uint8).numpy().tobytes(),
        )
    if isinstance(obj, dict):
        return {_pack(k): _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _untag(obj: Any) -> Any:
    """A request as the worker reads it: tagged numbers (in a launch record that the parent forwards to the compile
    worker) become numbers again."""
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] in (_FLOAT, _INT) and isinstance(obj[1], str):
        try:
            return float(obj[1]) if obj[0] == _FLOAT else int(obj[1], 16)
        except ValueError:
            return obj
    if isinstance(obj, dict):
        return {k: _untag(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_untag(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_untag(v) for v in obj)
    return obj


def tensors_by_value(obj: Any) -> Any:
    """`obj` with each tensor replaced by its raw record (the rest untouched): what `timing_parent.send` hands to
    multiprocessing's `conn.send`. Sent as they are, tensors would go by file descriptor (torch registers its
    shared-memory reductions with multiprocessing's pickler): memory the worker could still write after the request,
    fetched through a resource-sharer connection that a worker started with `python -m grader.child` cannot even
    open (its authkey is not the parent's: every timing request with a tensor failed)."""
    if isinstance(obj, torch.Tensor):
        return _pack(obj)
    if isinstance(obj, dict):
        return {k: tensors_by_value(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(tensors_by_value(v) for v in obj)
    return obj


def tensors_back(obj: Any) -> Any:
    """The worker's side of `tensors_by_value`: raw records become (writable) CPU tensors again."""
    if isinstance(obj, tuple) and len(obj) == 4 and obj[0] == _RAW:
        _, dtype, shape, raw = obj
        if not raw:
            return torch.empty(shape, dtype=_RAW_DTYPES[dtype])
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(_RAW_DTYPES[dtype]).reshape(shape)
    if isinstance(obj, dict):
        return {k: tensors_back(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(tensors_back(v) for v in obj)
    return obj


class correctness_worker:
    """A correctness (or compile) worker's end: requests as `dumps` wrote them, replies in the b"R" format."""

    @staticmethod
    def send(conn: Any, obj: Any) -> None:
        conn.send_bytes(reply_bytes(obj))

    @staticmethod
    def recv(conn: Any) -> Any:
        return recv(conn)


class timing_worker:
    """A timing worker's end: requests in multiprocessing's format (grader/wire.py `timing_parent.send`: see there
    why), replies in the b"R" format like every worker's."""

    @staticmethod
    def send(conn: Any, obj: Any) -> None:
        conn.send_bytes(reply_bytes(obj))

    @staticmethod
    def recv(conn: Any) -> Any:
        return tensors_back(conn.recv())
