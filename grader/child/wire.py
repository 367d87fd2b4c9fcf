"""Messages between the trusted parent and its workers: data only, never code (docs/SECURITY.md#the-wire).

The protocol: one command per request, `(name, request)`, each name in `COMMANDS` with its request and reply types;
one request format (`dumps`/`loads`: tag b"P", a pickle without globals, or b"T", `torch.save`, when it holds
tensors), one reply format (`reply_bytes`: tag b"R", read by the parent's own bounded decoder, grader/wire.py).
Every reply is ("ok", value) or ("error", line, detail, category, own frames) (`ERROR_CATEGORIES`).

Nothing here imports the trusted `grader` package: this module runs beside student code.
"""

from __future__ import annotations

import io
import math
import pickle
import warnings
from typing import Any, NotRequired, TypedDict

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


_ATOMS = (type(None), bool, int, float, str, bytes)


def _only_data(obj: Any) -> bool:
    """obj holds only exact builtin scalars in lists, tuples, dicts and sets (no tensor, no subclass): `plain` would
    rebuild it unchanged, so `dumps` pickles it as it is (one walk instead of two: the timed requests take this)."""
    t = type(obj)
    if t in _ATOMS:
        return True
    if t is dict:
        return all(type(k) in _ATOMS and _only_data(v) for k, v in obj.items())
    if t in (list, tuple, set, frozenset):
        return all(_only_data(v) for v in obj)
    return False


def dumps(obj: Any) -> bytes:
    """A request, in the one request format: without tensors a plain pickle, tag b"P" (microseconds); with tensors
    torch.save, tag b"T". Only a worker reads these (`loads`); replies are `reply_bytes`."""
    if _only_data(obj):
        return b"P" + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
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


class correctness_worker:
    """A worker's end of its pipe: requests as `dumps` wrote them (`loads`), replies in the b"R" format."""

    @staticmethod
    def send(conn: Any, obj: Any) -> None:
        conn.send_bytes(reply_bytes(obj))

    @staticmethod
    def recv(conn: Any) -> Any:
        return recv(conn)


def tensors_by_value(obj: Any) -> Any:
    """`obj` with each tensor replaced by its raw record: what `grader/wire.py timing_parent.send` hands to
    multiprocessing's `conn.send` (sent as they are, tensors would go by file descriptor: memory the worker could
    still write after the request, through a resource sharer a `python -m grader.child` worker cannot open)."""
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


class timing_worker:
    """A timing worker's end: requests in multiprocessing's own format (the one exception to `dumps`, kept until a
    GPU A/B shows `dumps` no slower on the timed path: docs/performance.md#the-wall-clock-check), replies in b"R"."""

    send = correctness_worker.send

    @staticmethod
    def recv(conn: Any) -> Any:
        return tensors_back(conn.recv())


# ------------------------------------------------------------------------------------------------------------
# The protocol: each command's request and reply, and the table both ends name.


class LoadRequest(TypedDict, total=False):
    """`load`, `prepare` and `gpu_compile`: what to import (grader/correctness/stage.py Target.payload, or the
    trusted baselines: grader/performance/workers.py baseline_payload)."""

    kind: str  # "triton", "cuda" or "reference"
    display: str
    impl: str
    path: str
    lib: str
    entry: str
    out_cols: str
    inputs: list[list[Any]]
    handout: str
    section: str
    cpu_layer: bool
    sanitizer: list[str]
    baselines: dict[str, dict[str, Any]]  # kind "reference": name -> {"fn"} or {"compile"}
    cases: list[dict[str, Any]]  # `prepare`: the perf cases (asdict of grader/problem/spec.py Case)
    launches: list[dict[str, Any]]  # `gpu_compile`: the launch records to compile


class ExtraInput(TypedDict):
    base: Any  # torch.Tensor: the input's buffer (padded rows included)
    cols: int


class CaseRequest(TypedDict):
    """`run` and `kernels`: one case's first input (`base`, its logical width `cols`) and the others (`extra`)."""

    base: Any  # torch.Tensor
    cols: int
    out_numel: NotRequired[int]  # `run` only: the output's elements (the allocator is poisoned for that size)
    extra: NotRequired[list[ExtraInput]]


class ProfileRequest(TypedDict, total=False):
    inputs: list[dict[str, Any]]  # per input: {"case": asdict(Case), "seeds": [...]} (grader/problem/operands.py)
    reps: int
    time: bool


class RunReply(TypedDict, total=False):
    ops: list[str]
    triton_launches: int | None
    call_kernels: list[list[str]] | None
    runtime: list[str]
    raised: list[str]  # [line, detail, category, own frames]: the call raised (then no outs)
    outs: list[Any]  # two tensors
    meta: dict[str, Any]
    x_after: Any  # torch.Tensor
    extra_after: list[Any]
    seconds: list[float]


class KernelsReply(TypedDict, total=False):
    ops: list[str]
    kernels: list[str]
    runtime: list[str]
    jit_names: list[str]
    triton_launches: int | None
    raised: list[str]


class ProfileReply(TypedDict, total=False):
    launches: list[dict[str, Any]]
    jit_names: list[str]
    median_ms: float
    table: str
    kernels: list[list[Any]]


# The timing commands: grader/child/timing.py Timer's, through grader/child/timingcmds.py; the parent builds the
# requests and reads the replies in grader/performance/. A reply keyed by function (or case) name is a dict alias,
# not a TypedDict: its keys are names, not fields.


class TimingInput(TypedDict):
    case: dict[str, Any]  # asdict of grader/problem/spec.py Case (grader/problem/operands.py timing_seeds)
    seeds: list[int]  # one per input set, mixed with the secret by the parent: the secret never travels


class SetupRequest(TypedDict):
    """`time_setup`: the case's input sets (per input of the op, in call order), the warm-up and the checksum."""

    inputs: list[TimingInput]
    warmup_ms: float
    spin_s: float  # busy-wait this long for the next request (grader/child/hostprofile.py spin_wait)
    n_out: int  # elements of one output: the checksum's weights
    digest_seed: int
    calls_per_round: NotRequired[int]  # outputs a warm-up keeps alive (the worker's default: as many as a round)
    names: NotRequired[list[str]]  # the functions to warm up (default: all): those this case will time


class SetupReply(TypedDict):
    compile_s: dict[str, float]  # function -> seconds of its first call
    warmup_calls: dict[str, int]


class RoundRequest(TypedDict):
    """`time_round`: the functions to time, each on the same plan of (input set, scale) calls."""

    names: list[str]
    plan: list[tuple[int, float]]
    sleep_us: NotRequired[float]  # the GPU sleep ahead of each call (the worker's default: 1000)


class RoundTimes(TypedDict):
    event_ms: list[float]
    host_ms: list[float]
    digest: list[float | tuple[str, str]]  # each output's checksum: a NaN comes tagged (grader/wire.py tagged_float)


RoundReply = dict[str, RoundTimes]  # function -> its calls' times
SamplesRequest = dict[str, list[tuple[int, torch.Tensor]]]  # function -> [(call in the round, flat indices)]
SamplesReply = dict[str, list[torch.Tensor | str]]  # function -> per request its values, or why there are none
PrepareReply = dict[str, dict[str, float]]  # case name -> baseline name -> seconds of its first call


class CopyBandwidthRequest(TypedDict, total=False):
    nbytes: int
    reps: int


class Bandwidth(TypedDict):
    bytes_per_s: float  # a device-to-device copy's
    read2_write1_bytes_per_s: float  # c = a + b's
    nbytes: int


class DeviceInfo(TypedDict):
    name: str
    uuid: str
    sms: int
    l2_bytes: int
    flush_bytes: int
    torch: str
    cuda: str | None  # torch.version.cuda
    pre_call_sleep: str


class CopyBandwidthReply(Bandwidth, DeviceInfo):
    """`copy_bandwidth`: Timer.copy_bandwidth's ceilings and Timer.device_info, in one reply."""


# name -> (request type, reply type). The worker dispatches through it (grader/child/worker.py Worker.handlers);
# the parent checks each reply's type against it (grader/wire.py check_reply: a TypedDict's keys one level deep, an
# alias's container only). The timing replies are checked in depth by grader/performance/ (rounds.py).
COMMANDS: dict[str, tuple[Any, Any]] = {
    "prepare": (LoadRequest, PrepareReply),
    "load": (LoadRequest, str),  # "loaded"
    "run": (CaseRequest, RunReply),
    "kernels": (CaseRequest, KernelsReply),
    "profile": (ProfileRequest, ProfileReply),
    "launch_records": (str, list),  # "take": since the last take; anything else: all so far
    "gpu_compile": (LoadRequest, dict),  # grader/child/launches.py compile_launches
    "time_setup": (SetupRequest, SetupReply),
    "time_round": (RoundRequest, RoundReply),
    "time_samples": (SamplesRequest, SamplesReply),
    "copy_bandwidth": (CopyBandwidthRequest, CopyBandwidthReply),
}
EXIT = "exit"  # the one command without a reply: the worker returns


def case_request(
    base: Any, cols: int, extra: list[ExtraInput] | None = None, out_numel: int | None = None
) -> CaseRequest:
    """A `run` (with out_numel) or `kernels` request: the case's first input, its width, and the other inputs."""
    req: CaseRequest = {"base": base, "cols": cols}
    if out_numel is not None:
        req["out_numel"] = out_numel
    if extra:
        req["extra"] = extra
    return req


def request(cmd: str, payload: Any) -> tuple[str, Any]:
    """The one request format's message: (cmd, payload), cmd a COMMANDS name (or EXIT) and payload of its type."""
    if cmd != EXIT and cmd not in COMMANDS:
        raise ValueError(f"no worker command {cmd!r} (grader/child/wire.py COMMANDS)")
    return (cmd, payload)
