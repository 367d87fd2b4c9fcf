"""A generated class of GLU submissions for `python -m grader similarity`: its benchmark, and the class
tests/test_similarity.py checks the detector on.

Each generated student writes both parts from the starter stubs' contract, choosing independently, as students do,
among designs a class really produces: the Triton grid (a flat 1-D grid over the outputs, a 2-D grid of rows and
column blocks, one program per row looping over its columns, 2-D tiles), the sigmoid (tl.sigmoid, 1/(1+exp(-b)),
exp2 with log2(e), a branch-free stable form), where the 64-bit offsets come from, the loads' `other=`, cache hints,
cast and order, the mask's spelling, helpers or not, and a wrapper with its own checks and its own way to flatten,
allocate, pick the block and launch; the CUDA kernel's loop (grid stride, one element per thread, a block per row, a
2-D grid), its sigmoid, a vectorised pair path or not, and the grid size. Names come from pools and comments from a
few styles, which the detector ignores anyway.

    python scripts/similarity_bench.py --students 500 [--keep DIR]

writes such a class to a temporary folder (or DIR), runs `python -m grader similarity` on it, and prints the time
and what it reported: the figure in docs/performance.md#similarity. CPU only (no GPU); the figure is from this
project's 2-core CPU machine."""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NAMES = {
    "x": ["x_ptr", "inp_ptr", "src", "in_ptr", "X", "xp", "input_ptr"],
    "y": ["y_ptr", "out_ptr", "dst", "o_ptr", "Y", "yp", "output_ptr"],
    "h": ["h", "half", "n_cols", "H", "width", "hidden"],
    "stride": ["row_stride", "stride", "x_stride", "stride_row", "ld", "pitch"],
    "n": ["n_out", "n", "numel", "total", "N", "n_elements"],
    "blk": ["BLOCK", "BLOCK_SIZE", "BS", "TILE", "B"],
    "a": ["a", "lhs", "gate_in", "av", "left"],
    "b": ["b", "rhs", "gate", "bv", "right"],
    "kern": ["glu_kernel", "_glu_fwd", "glu_fwd_kernel", "k_glu", "_kernel", "fused_glu"],
}


def _pick(rng: random.Random) -> dict[str, str]:
    return {k: rng.choice(v) for k, v in NAMES.items()}


# -- Triton ---------------------------------------------------------------------------------------------------------


def _sig_expr(kind: int, b: str) -> str:
    return [
        f"tl.sigmoid({b})",
        f"1.0 / (1.0 + tl.exp(-{b}))",
        f"1.0 / (1.0 + tl.exp2(-{b} * 1.4426950408889634))",
        f"tl.where({b} >= 0, 1.0 / (1.0 + tl.exp(-{b})), tl.exp({b}) / (1.0 + tl.exp({b})))",
    ][kind]


def _less(lhs: str, rhs: str, kind: int) -> str:
    """A bound check, spelled one of three ways."""
    return [f"{lhs} < {rhs}", f"{rhs} > {lhs}", f"{lhs} <= {rhs} - 1"][kind]


def _loads(c: dict[str, int], v: dict[str, str], ptr: str, mask: str, ind: str) -> str:
    """The two loads (a at ptr, b h further on): their order, the pointers named or not, cache hints, the cast."""
    a, b, h = v["a"], v["b"], v["h"]
    kw = ["", ', eviction_policy="evict_first"', ', cache_modifier=".cg", eviction_policy="evict_first"'][c["cache"]]
    other = ", other=0.0" if c["other"] else ""
    head = ""
    pa, pb = ptr, f"{ptr} + {h}"
    if c["bptr"]:
        head = f"{ind}pa = {ptr}\n{ind}pb = pa + {h}\n"
        pa, pb = "pa", "pb"

    def one(name: str, at: str) -> str:
        if c["cast"]:
            return f"{ind}{name} = tl.load({at}, mask={mask}{other}{kw}).to(tl.float32)\n"
        return f"{ind}{name} = tl.cast(tl.load({at}, mask={mask}{other}{kw}), tl.float32)\n"

    la, lb = one(a, pa), one(b, pb)
    return head + (la + lb if c["order"] == 0 else lb + la)


def _product(c: dict[str, int], v: dict[str, str], sig: str, ind: str) -> tuple[str, str]:
    """(lines before, the expression) of a * sigmoid(b): the sigmoid in its own variable or not, either order."""
    a = v["a"]
    pre = ""
    if c["sigvar"]:
        pre = f"{ind}sg = {sig}\n"
        sig = "sg"
    return pre, (f"{a} * {sig}" if c["prod"] == 0 else f"{sig} * {a}")


def triton_kernel(rng: random.Random, c: dict[str, int], v: dict[str, str]) -> str:
    x, y, h, st, n, blk, b, kern = (v[k] for k in ("x", "y", "h", "stride", "n", "blk", "b", "kern"))
    helper = ""
    if c["helper"]:
        helper = f"@triton.jit\ndef _sigm(t):\n    return {_sig_expr(c['sig'], 't')}\n\n\n"
        sig = f"_sigm({b})"
    else:
        sig = _sig_expr(c["sig"], b)
    store_t = f"{y}.dtype.element_ty" if c["dtype_arg"] == 0 else "OUT_DTYPE"
    extra = "" if c["dtype_arg"] == 0 else ", OUT_DTYPE: tl.constexpr"
    design = c["design"]
    mk = c["mask"]
    if design == 0:  # flat 1-D over the outputs
        pid = "tl.program_id(0).to(tl.int64)" if c["i64"] == 0 else "tl.program_id(0)"
        offs_line = (
            f"    offs = pid * {blk} + tl.arange(0, {blk})\n"
            if c["i64"] == 0
            else f"    offs = pid.to(tl.int64) * {blk} + tl.arange(0, {blk}).to(tl.int64)\n"
        )
        pre, prod = _product(c, v, sig, "    ")
        body = (
            f"    pid = {pid}\n" + offs_line + f"    m = {_less('offs', n, mk)}\n"
            f"    r = offs // {h}\n"
            f"    col = offs % {h}\n"
            f"    base = r * {st} + col\n" + _loads(c, v, f"{x} + base", "m", "    ") + pre + f"    res = {prod}\n"
            f"    tl.store({y} + offs, res.to({store_t}), mask=m)\n"
        )
        args = f"{x}, {y}, {n}, {h}, {st}, {blk}: tl.constexpr{extra}"
    elif design == 1:  # 2-D grid: rows x column blocks
        pre, prod = _product(c, v, sig, "    ")
        body = (
            f"    row = tl.program_id(0).to(tl.int64)\n"
            f"    cb = tl.program_id(1)\n"
            f"    cols = cb * {blk} + tl.arange(0, {blk})\n"
            f"    ok = {_less('cols', h, mk)}\n"
            f"    p = {x} + row * {st} + cols\n"
            + _loads(c, v, "p", "ok", "    ")
            + pre
            + f"    tl.store({y} + row * {h} + cols, ({prod}).to({store_t}), mask=ok)\n"
        )
        args = f"{x}, {y}, {h}, {st}, {blk}: tl.constexpr{extra}"
    elif design == 2:  # one program per row, looping over column blocks
        pre, prod = _product(c, v, sig, "        ")
        body = (
            f"    row = tl.program_id(0)\n"
            f"    in_row = {x} + row.to(tl.int64) * {st}\n"
            f"    out_row = {y} + row.to(tl.int64) * {h}\n"
            f"    for start in range(0, {h}, {blk}):\n"
            f"        idx = start + tl.arange(0, {blk})\n"
            f"        keep = {_less('idx', h, mk)}\n"
            + _loads(c, v, "in_row + idx", "keep", "        ")
            + pre
            + f"        val = {prod}\n"
            f"        tl.store(out_row + idx, val.to({store_t}), mask=keep)\n"
        )
        args = f"{x}, {y}, {h}, {st}, {blk}: tl.constexpr{extra}"
    else:  # 2-D tiles of rows x columns
        pre, prod = _product(c, v, sig, "    ")
        body = (
            f"    pr = tl.program_id(0)\n"
            f"    pc = tl.program_id(1)\n"
            f"    rr = (pr * ROWS + tl.arange(0, ROWS)).to(tl.int64)\n"
            f"    cc = pc * {blk} + tl.arange(0, {blk})\n"
            f"    msk = ({_less('rr[:, None]', 'n_rows', mk)}) & ({_less('cc[None, :]', h, mk)})\n"
            f"    src = {x} + rr[:, None] * {st} + cc[None, :]\n"
            + _loads(c, v, "src", "msk", "    ")
            + pre
            + f"    o = {prod}\n"
            f"    tl.store({y} + rr[:, None] * {h} + cc[None, :], o.to({store_t}), mask=msk)\n"
        )
        args = f"{x}, {y}, n_rows, {h}, {st}, ROWS: tl.constexpr, {blk}: tl.constexpr{extra}"
    return f"{helper}@triton.jit\ndef {kern}({args}):\n{body}"


def triton_wrapper(rng: random.Random, c: dict[str, int], v: dict[str, str]) -> str:
    kern = v["kern"]
    flat = [
        "    x2 = x.view(-1, cols)\n",
        "    x2 = x.view(math.prod(x.shape[:-1]), cols)\n",
        "    x2 = x.flatten(0, -2) if x.dim() > 1 else x.unsqueeze(0)\n",
    ][c["flat"]]
    alloc = [
        "    y = torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)\n",
        "    y = x.new_empty(x.shape[:-1] + (h,))\n",
        "    y = torch.empty(list(x.shape[:-1]) + [h], device=x.device, dtype=x.dtype)\n",
    ][c["alloc"]]
    guard = [
        "    if rows == 0 or h == 0:\n        return y\n",
        "    if y.numel() == 0:\n        return y\n",
        "    if not rows * h:\n        return y\n",
    ][c["guard"]]
    block = [
        "    block = 1024\n",
        "    block = min(triton.next_power_of_2(h), 4096)\n",
        "    block = {torch.float32: 1024, torch.float16: 2048, torch.bfloat16: 2048}[x.dtype]\n",
        "    block = max(128, min(2048, triton.next_power_of_2(h)))\n",
    ][c["block"]]
    dt = "" if c["dtype_arg"] == 0 else ", OUT_DTYPE=_TL[x.dtype]"
    warps = [
        "",
        ", num_warps=4",
        ", num_warps=8 if block >= 2048 else 4",
    ][c["warps"]]
    d = c["design"]
    if d == 0:
        launch = (
            f"    n = rows * h\n    grid = (triton.cdiv(n, block),)\n"
            f"    {kern}[grid](x2, y, n, h, x2.stride(0), block{dt}{warps})\n"
        )
    elif d == 1:
        launch = f"    {kern}[(rows, triton.cdiv(h, block))](x2, y, h, x2.stride(0), block{dt}{warps})\n"
    elif d == 2:
        launch = f"    {kern}[(rows,)](x2, y, h, x2.stride(0), block{dt}{warps})\n"
    else:
        launch = (
            "    tile_rows = 4 if h >= 256 else 16\n"
            f"    grid = lambda meta: (triton.cdiv(rows, tile_rows), triton.cdiv(h, meta['{v['blk']}']))\n"
            f"    {kern}[grid](x2, y, rows, h, x2.stride(0), tile_rows, block{dt}{warps})\n"
        )
    if c["kw_launch"]:  # the constexprs by name on the launch line
        launch = "".join(
            ln[: ln.index("](")]
            + ln[ln.index("](") :]
            .replace(", tile_rows, block", ", ROWS=tile_rows, block")
            .replace(", block", f", {v['blk']}=block")
            if "](" in ln
            else ln
            for ln in launch.splitlines(keepends=True)
        )
    contig = "    if x.stride(-1) != 1:\n        x = x.contiguous()\n" if c["contig"] else ""
    table = (
        "_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}\n\n\n"
        if c["dtype_arg"]
        else ""
    )
    doc = rng.choice(['    """GLU of x along its last dimension."""\n', "    # a * sigmoid(b)\n", ""])
    doc += [
        "",
        '    assert x.shape[-1] % 2 == 0, "the last dimension must be even"\n',
        '    if x.shape[-1] % 2:\n        raise ValueError("GLU needs an even last dimension")\n',
    ][c["check"]]
    doc += "    assert x.is_cuda\n" if c["cuda_check"] else ""
    ret = "    return y\n" if c["ret"] == 0 else "    return y.view(*x.shape[:-1], h)\n"
    if c["style"] == 0:  # straight-line wrapper
        return (
            f"{table}def glu_triton(x: torch.Tensor) -> torch.Tensor:\n{doc}"
            f"{contig}    cols = x.shape[-1]\n    h = cols // 2\n{flat}    rows = x2.shape[0]\n"
            f"{alloc}{guard}{block}{launch}{ret}"
        )
    if c["style"] == 1:  # a shape helper, then the launch
        return (
            f"{table}def _shape(x):\n    *lead, two_h = x.shape\n    return lead, two_h // 2, math.prod(lead)\n\n\n"
            f"def glu_triton(x: torch.Tensor) -> torch.Tensor:\n{doc}{contig}"
            f"    lead, h, rows = _shape(x)\n    cols = 2 * h\n{alloc.replace('x.shape[:-1]', 'tuple(lead)')}"
            f"{guard}{flat}{block}{launch}{ret}"
        )
    # a launcher function the entry point calls
    return (
        f"{table}def _launch(x2, y, rows, h):\n{block}"
        f"{launch.replace('x2.stride(0)', 'x2.stride()[0]').replace('_TL[x.dtype]', '_TL[x2.dtype]')}\n\n"
        f"def glu_triton(x: torch.Tensor) -> torch.Tensor:\n{doc}{contig}"
        f"    h = x.size(-1) // 2\n    cols = x.size(-1)\n{alloc}{flat}    rows = x2.size(0)\n{guard}"
        f"    _launch(x2, y, rows, h)\n{ret}"
    )


def triton_file(rng: random.Random, c: dict[str, int], v: dict[str, str]) -> str:
    head = rng.choice(['"""My GLU kernel for part 1."""\n\n', "# Part 1: GLU in Triton\n\n", ""])
    return (
        f"{head}import math\n\nimport torch\nimport triton\nimport triton.language as tl\n\n\n"
        f"{triton_kernel(rng, c, v)}\n\n{triton_wrapper(rng, c, v)}"
    )


TRITON_CHOICES = {
    "design": 4, "sig": 4, "i64": 2, "other": 2, "helper": 2, "dtype_arg": 2,
    "flat": 3, "alloc": 3, "guard": 3, "block": 4, "warps": 3, "contig": 2, "style": 3,
    "mask": 3, "cache": 3, "bptr": 2, "cast": 2, "order": 2, "sigvar": 2, "prod": 2,
    "check": 3, "cuda_check": 2, "kw_launch": 2, "ret": 2,
}  # fmt: skip


# -- CUDA -----------------------------------------------------------------------------------------------------------

_STUB = (ROOT / "assignment" / "glu" / "glu_cuda.cu").read_text(encoding="utf-8")


def _cuda_sig(kind: int, b: str) -> str:
    return [
        f"1.0f / (1.0f + __expf(-{b}))",
        f"1.0f / (1.0f + expf(-{b}))",
        f"0.5f * (1.0f + tanhf(0.5f * {b}))",
        f"({b} >= 0.0f ? 1.0f / (1.0f + __expf(-{b})) : __expf({b}) / (1.0f + __expf({b})))",
    ][kind]


def cuda_body(c: dict[str, int], v: dict[str, str]) -> tuple[str, str]:
    """(the kernel body, the grid lines of the launcher)."""
    a, b = v["a"], v["b"]
    sig = f"sigm({b})" if c["helper"] else _cuda_sig(c["sig"], b)
    d = c["design"]
    if d == 0:  # grid-stride loop
        body = (
            "    const int64_t total = rows * h;\n"
            "    const int64_t step = (int64_t)gridDim.x * blockDim.x;\n"
            "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {\n"
            "        const int64_t r = i / h;\n        const int64_t col = i - r * h;\n"
            f"        const float {a} = to_float(x[r * x_row_stride + col]);\n"
            f"        const float {b} = to_float(x[r * x_row_stride + h + col]);\n"
            f"        y[i] = from_float<T>({a} * {sig});\n    }}\n"
        )
    elif d == 1:  # one element per thread
        body = (
            "    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (idx >= rows * h) return;\n"
            "    int64_t row = idx / h, c = idx % h;\n"
            "    const T* src = x + row * x_row_stride;\n"
            f"    float {b} = to_float(src[h + c]);\n    float {a} = to_float(src[c]);\n"
            f"    float s = {sig};\n    y[idx] = from_float<T>({a} * s);\n"
        )
    elif d == 2:  # a block per row
        body = (
            "    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {\n"
            "        const T* in = x + row * x_row_stride;\n        T* out = y + row * h;\n"
            "        for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {\n"
            f"            float {a} = to_float(in[c]), {b} = to_float(in[c + h]);\n"
            f"            out[c] = from_float<T>({a} * {sig});\n        }}\n    }}\n"
        )
    else:  # 2-D grid: blockIdx.y walks rows, x the columns
        body = (
            "    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (c >= h) return;\n"
            "    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {\n"
            f"        const float {a} = to_float(x[row * x_row_stride + c]);\n"
            f"        const float {b} = to_float(x[row * x_row_stride + c + h]);\n"
            f"        y[row * h + c] = from_float<T>({a} * {sig});\n    }}\n"
        )
    grids = {
        0: [
            "    int64_t want = (rows * h + threads - 1) / threads;\n"
            "    int blocks = (int)(want > 65535 * 32 ? 65535 * 32 : want);\n",
            "    int dev = 0, sms = 0;\n    cudaGetDevice(&dev);\n"
            "    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);\n"
            "    int64_t need = (rows * h + threads - 1) / threads;\n"
            "    int blocks = (int)(need < (int64_t)sms * 8 ? need : (int64_t)sms * 8);\n",
        ],
        1: [
            "    int blocks = (int)((rows * h + threads - 1) / threads);\n",
            "    const int64_t n = rows * h;\n    int blocks = (int)(n / threads + (n % threads != 0));\n",
        ],
        2: [
            "    int blocks = rows < 65535 ? (int)rows : 65535;\n",
            "    int blocks = (int)(rows > 1 << 20 ? 1 << 20 : rows);\n",
        ],
        3: [
            "    dim3 blocks((unsigned)((h + threads - 1) / threads), (unsigned)(rows < 65535 ? rows : 65535));\n",
            "    dim3 blocks((unsigned)(h / threads + 1), rows > 32768 ? 32768u : (unsigned)rows);\n",
        ],
    }
    return body, grids[d][c["grid"]]


def cuda_file(rng: random.Random, c: dict[str, int], v: dict[str, str]) -> str:
    body, grid = cuda_body(c, v)
    src = _STUB
    start = src.index("    // TODO 1: your code here.")
    end = src.index("\n}\n", start) + 1
    src = src[:start] + body + src[end:]
    src = src.replace("    int blocks = 1;\n", grid)
    # TODO 3 done: the stub's "return GLU_ERR_NOT_IMPLEMENTED" line and its two marker lines go.
    lines = src.splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if "TODO 3: delete" in ln)
    src = "".join(lines[:cut] + lines[cut + 3 :])
    src = src.replace("    const int threads = 256;", f"    const int threads = {rng.choice([128, 256, 512, 1024])};")
    if c["helper"]:
        helper = f"__device__ __forceinline__ float sigm(float t) {{ return {_cuda_sig(c['sig'], 't')}; }}\n\n"
        k = src.index("template <typename T>\n__global__")
        src = src[:k] + helper + src[k:]
    if c["comments"]:
        src = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("//")) + "\n"
    return src


CUDA_CHOICES = {"design": 4, "sig": 4, "helper": 2, "grid": 2, "comments": 2}


# -- the class ------------------------------------------------------------------------------------------------------


def choices(rng: random.Random, spec: dict[str, int]) -> dict[str, int]:
    return {k: rng.randrange(n) for k, n in spec.items()}


def differ(a: dict[str, int], b: dict[str, int]) -> int:
    return sum(a[k] != b[k] for k in a)


def student(seed: int) -> tuple[str, str, dict[str, int], dict[str, int]]:
    """(glu_triton.py, glu_cuda.cu, the Triton choices, the CUDA choices) of one generated student."""
    rng = random.Random(seed)
    ct, cc = choices(rng, TRITON_CHOICES), choices(rng, CUDA_CHOICES)
    return triton_file(rng, ct, _pick(rng)), cuda_file(rng, cc, _pick(rng)), ct, cc


def write_class(folder: Path, n: int, seed: int = 0) -> list[str]:
    """n generated students under folder/<id>/ (glu_triton.py, glu_cuda.cu); their ids."""
    ids = []
    for i in range(n):
        sid = f"s{i:04d}"
        t, c, _, _ = student(seed * 100_003 + i)
        d = folder / sid
        d.mkdir(parents=True, exist_ok=True)
        (d / "glu_triton.py").write_text(t, encoding="utf-8")
        (d / "glu_cuda.cu").write_text(c, encoding="utf-8")
        ids.append(sid)
    return ids


def rename(src: str, mapping: dict[str, str]) -> str:
    """src with whole-word names replaced (a planted copy's renamed variables). Test data, not student input."""
    pat = re.compile(r"\b(" + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True))) + r")\b")
    return pat.sub(lambda m: mapping[m.group(1)], src)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="write the class and the report here (kept)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = a.keep or Path(tmp) / "class"
        t0 = time.monotonic()
        write_class(folder, a.students, a.seed)
        print(f"generated {a.students} students in {time.monotonic() - t0:.1f} s under {folder}")
        t0 = time.monotonic()
        report = folder.with_name(folder.name + "-similarity")
        cmd = [sys.executable, "-m", "grader", "similarity", str(folder), "--out", str(report)]
        r = subprocess.run(cmd, cwd=ROOT)
        print(f"similarity over {a.students} students: {time.monotonic() - t0:.1f} s wall (exit {r.returncode})")
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())
