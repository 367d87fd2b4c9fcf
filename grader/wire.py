"""Messages between the trusted parent and its workers: data only, never code.

`multiprocessing.Connection.send/recv` pickle, and unpickling runs whatever the bytes name: a submission that
finds its worker's end of the pipe (through `gc`, or its file descriptor) could make the *parent* run its code
(tests/exploits/pickle_reply). So every message is written with `torch.save` and read with
`torch.load(weights_only=True)`, PyTorch's own restricted unpickler: it rebuilds tensors, numbers, strings,
lists, tuples, dicts and sets, and refuses anything else. Tensors travel by value (no shared memory with a
worker, and none of the file-descriptor passing that `torch.multiprocessing` would set up for each one).
"""

from __future__ import annotations

import io
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
    if isinstance(obj, bool):
        return bool(obj)
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


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(plain(obj), buf)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    try:
        with warnings.catch_warnings():  # a forged legacy pickle makes torch warn about its protocol: refused anyway
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as e:  # UnpicklingError for forbidden globals; others for truncated or foreign bytes
        raise MalformedMessage(f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}") from None


def send(conn: Any, obj: Any) -> None:
    conn.send_bytes(dumps(obj))


def recv(conn: Any) -> Any:
    """The next message; MalformedMessage if it is not one (EOFError / OSError pass through)."""
    return loads(conn.recv_bytes())
