"""The benchmark of `python -m grader similarity` (issue 41): a class of independently written GLU kernels with
planted copies under each disguise a copier uses, scored as a TA would want it scored.

    python scripts/bench_similarity.py [--sizes 50 500] [--seed 0] [--keep DIR]

The class (per part, Triton and CUDA):

- Honest students, each writing both parts independently: the Triton kernels of scripts/similarity_bench.py's
  generator (24 decisions: grid design, sigmoid, 64-bit offsets, helpers, mask spelling, cache hints, named pointers,
  cast, load order, the wrapper's checks, flattening, allocation, guard, block, warps, launch, ...) and CUDA kernels
  of this script's own generator (cuda_honest, 18: 6 loop designs, 5 sigmoid formulas, the thread index's spelling,
  how row and column are found, load order, pointer or index addressing, subscript or pointer arithmetic, a helper
  or not, __ldg or not, 6 grid sizes, bound checks, an early return, __launch_bounds__, ...), kept only when every
  two differ in at least TRITON_MIN_DIFF / CUDA_MIN_DIFF of the decisions their designs use and STRONG_MIN_DIFF of
  the STRONG ones (those that shape the statements). Two traps: a student who submitted the starter stub, and one
  who wrote only the few lines the spec forces.
- Copiers, 20% of the class, each copying both parts of one source (an honest student, or the staff solution) with
  one disguise: verbatim with new comments, renamed, statements reordered, dead code added, no-op tokens (`; pass`
  after each Python statement, a second `;` after each C++ statement and `#define` aliases of keywords), translated
  between equivalent constructs, half the file copied (the kernel; the rest the copier's own), the staff solution
  with no-op tokens, and renamed + reordered + dead code together.

It prints, per size and part: the planted pairs' lowest score against the honest pairs' highest, precision at k
(k = the planted pairs), average precision, recall at the default threshold, honest pairs flagged (count and share),
each disguise's score, and the wall time of `python -m grader similarity` on the class (a subprocess, as a TA runs
it). CPU only; the README quotes it with the machine it ran on."""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import textscan  # noqa: E402
from grader.problem.spec import find_problem, load_problem  # noqa: E402
from grader.report import similarity as S  # noqa: E402
from grader.report import simtokens  # noqa: E402

_spec = importlib.util.spec_from_file_location("similarity_bench", ROOT / "scripts" / "similarity_bench.py")
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
sys.modules["similarity_bench"] = gen
_spec.loader.exec_module(gen)

GLU = load_problem(find_problem("glu", ROOT))
STAFF_T = GLU.implementations["triton"].staff.read_text(encoding="utf-8")
STAFF_C = GLU.implementations["cuda"].staff.read_text(encoding="utf-8")
STUB_T = (ROOT / "assignment" / "glu" / "glu_triton.py").read_text(encoding="utf-8")
STUB_C = (ROOT / "assignment" / "glu" / "glu_cuda.cu").read_text(encoding="utf-8")
TRITON_MIN_DIFF, CUDA_MIN_DIFF = 6, 5
DISGUISES = (
    "verbatim",
    "renamed",
    "reordered",
    "dead-code",
    "no-op",
    "translated",
    "half-file",
    "staff-no-op",
    "combo",
)

# -- honest CUDA kernels -------------------------------------------------------------------------------------------

CUDA_CHOICES = {
    "design": 6, "sig": 5, "idx": 3, "rowcol": 2, "order": 2, "ptr": 2, "helper": 2, "ldg": 2, "grid": 6,
    "temp": 2, "mul": 2, "deref": 2, "ystore": 2, "cmp": 2, "early": 3, "bounds": 2, "ld": 2, "neg": 2,
}  # fmt: skip


def _csig(kind: int, b: str, neg: int = 0) -> str:
    sig = _csig0(kind, b)
    return sig.replace(f"(-{b})", f"(0.0f - {b})") if neg else sig


def _csig0(kind: int, b: str) -> str:
    return [
        f"1.0f / (1.0f + __expf(-{b}))",
        f"1.0f / (1.0f + exp2f(-{b} * 1.4426950408889634f))",
        f"0.5f * (1.0f + tanhf(0.5f * {b}))",
        f"({b} >= 0.0f ? 1.0f / (1.0f + __expf(-{b})) : __expf({b}) / (1.0f + __expf({b})))",
        f"({b} >= 0.0f ? 1.0f : __expf({b})) / (1.0f + __expf(-fabsf({b})))",
    ][kind]  # five formulas (not spellings of one: __expf/expf, __fdividef are one after normalisation)


def cuda_honest(rng: random.Random, c: dict[str, int]) -> str:  # noqa: C901 - one branch per design
    v = gen._pick(rng)
    a, b = v["a"], v["b"]
    i = rng.choice(["i", "idx", "k", "e", "t"])
    r, col = rng.choice([("r", "c"), ("row", "col"), ("rr", "cc"), ("ri", "ci")])
    tid = [
        "(int64_t)blockIdx.x * blockDim.x + threadIdx.x",
        "blockDim.x * (int64_t)blockIdx.x + threadIdx.x",
        "threadIdx.x + (int64_t)blockDim.x * blockIdx.x",
    ][c["idx"]]
    load = "__ldg(&{})" if c["ldg"] else "{}"
    sig = f"sigm({b})" if c["helper"] else _csig(c["sig"], b, c["neg"])

    def at(base: str, off: str) -> str:  # an element, by subscript or by pointer arithmetic
        if c["deref"]:
            return f"{base} + {off}" if c["ldg"] else f"*({base} + {off})"
        return load.format(f"{base}[{off}]")

    def loads(base: str, off_a: str, off_b: str, ind: str) -> str:
        wrap = "__ldg({})" if c["ldg"] and c["deref"] else "{}"
        if c["ptr"]:
            head = f"{ind}const T* p = x + {base};\n"
            la = f"{ind}float {a} = to_float({wrap.format(at('p', off_a))});\n"
            lb = f"{ind}float {b} = to_float({wrap.format(at('p', off_b))});\n"
        else:
            head = ""
            la = f"{ind}float {a} = to_float({wrap.format(at('x', f'{base} + {off_a}'))});\n"
            lb = f"{ind}float {b} = to_float({wrap.format(at('x', f'{base} + {off_b}'))});\n"
        return head + (la + lb if c["order"] == 0 else lb + la)

    def store(dst: str, ind: str) -> str:
        if c["ystore"]:  # y[i] or *(y + i)
            dst = "*(" + dst.replace("[", " + ", 1)[:-1] + ")"
        s = "s" if c["temp"] else sig
        prod = f"{a} * {s}" if c["mul"] == 0 else f"{s} * {a}"
        pre = f"{ind}float s = {sig};\n" if c["temp"] else ""
        return f"{pre}{ind}{dst} = from_float<T>({prod});\n"

    def rowcol(ind: str) -> str:
        if c["rowcol"]:
            return f"{ind}int64_t {r} = {i} / h;\n{ind}int64_t {col} = {i} - {r} * h;\n"
        return f"{ind}int64_t {r} = {i} / h, {col} = {i} % h;\n"

    d = c["design"]
    if d == 0:  # grid-stride for loop
        body = (
            f"    const int64_t n = rows * h;\n    const int64_t step = (int64_t)gridDim.x * blockDim.x;\n"
            f"    for (int64_t {i} = {tid}; {i} < n; {i} += step) {{\n"
            + rowcol("        ")
            + loads(f"{r} * x_row_stride", col, f"h + {col}", "        ")
            + store(f"y[{i}]", "        ")
            + "    }\n"
        )
    elif d == 1:  # one element per thread
        body = (
            f"    int64_t {i} = {tid};\n    if ({i} >= rows * h) return;\n"
            + rowcol("    ")
            + loads(f"{r} * x_row_stride", col, f"{col} + h", "    ")
            + store(f"y[{i}]", "    ")
        )
    elif d == 2:  # a block per row
        body = (
            f"    for (int64_t {r} = blockIdx.x; {r} < rows; {r} += gridDim.x) {{\n"
            f"        for (int64_t {col} = threadIdx.x; {col} < h; {col} += blockDim.x) {{\n"
            + loads(f"{r} * x_row_stride", col, f"{col} + h", "            ")
            + store(f"y[{r} * h + {col}]", "            ")
            + "        }\n    }\n"
        )
    elif d == 3:  # 2-D grid
        body = (
            f"    const int64_t {col} = {tid};\n    if ({col} >= h) return;\n"
            f"    for (int64_t {r} = blockIdx.y; {r} < rows; {r} += gridDim.y) {{\n"
            + loads(f"{r} * x_row_stride", col, f"{col} + h", "        ")
            + store(f"y[{r} * h + {col}]", "        ")
            + "    }\n"
        )
    elif d == 4:  # grid-stride while loop
        body = (
            f"    int64_t {i} = {tid};\n    const int64_t total = rows * h;\n"
            f"    while ({i} < total) {{\n"
            + rowcol("        ")
            + loads(f"{r} * x_row_stride", col, f"h + {col}", "        ")
            + store(f"y[{i}]", "        ")
            + f"        {i} += (int64_t)gridDim.x * blockDim.x;\n    }}\n"
        )
    else:  # two outputs per thread
        body = (
            f"    const int64_t n = rows * h;\n    int64_t base = 2 * ({tid});\n"
            f"    #pragma unroll\n    for (int u = 0; u < 2; ++u) {{\n        int64_t {i} = base + u;\n"
            f"        if ({i} < n) {{\n"
            + rowcol("            ")
            + loads(f"{r} * x_row_stride", col, f"h + {col}", "            ")
            + store(f"y[{i}]", "            ")
            + "        }\n    }\n"
        )
    if c["cmp"]:  # the loops' bound checks the other way round
        body = re.sub(r"\b(\w+) < (\w+)([;)])", r"\2 > \1\3", body)
    if c["ld"]:  # the row stride in a local of its own
        body = "    const int64_t ld = x_row_stride;\n" + body.replace("x_row_stride", "ld")
    body = [
        "",
        "    if (rows == 0 || h == 0) return;\n",
        "    if (rows * h == 0) return;\n",
    ][c["early"]] + body
    per = 2 if d == 5 else 1
    grids = [
        f"    int64_t want = (rows * h + {per} * threads - 1) / ({per} * threads);\n"
        "    int blocks = (int)(want > 2147483647 ? 2147483647 : want);\n",
        f"    const int64_t total = rows * h;\n"
        f"    int blocks = (int)((total + threads * {per} - 1) / (threads * {per}));\n",
        "    int dev = 0, sms = 0;\n    cudaGetDevice(&dev);\n"
        "    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);\n"
        f"    int64_t need = (rows * h / {per} + threads - 1) / threads;\n"
        "    int blocks = (int)(need < (int64_t)sms * 16 ? need : (int64_t)sms * 16);\n",
        f"    int blocks = (int)((rows * h - 1) / ((int64_t)threads * {per}) + 1);\n",
        "    int blocks = 1;\n    while ((int64_t)blocks * threads * "
        + str(per)
        + " < rows * h && blocks < (1 << 30)) "
        "blocks *= 2;\n",
        f"    long long cells = (long long)rows * h;\n    int blocks = (int)(cells / (threads * {per}) + "
        f"(cells % (threads * {per}) ? 1 : 0));\n",
    ]
    if d == 2:
        grid = [
            "    int blocks = rows < 65535 ? (int)rows : 65535;\n",
            "    int blocks = (int)(rows > (1 << 20) ? (1 << 20) : rows);\n",
        ][c["grid"] % 2]
    elif d == 3:
        grid = [
            "    dim3 blocks((unsigned)((h + threads - 1) / threads), (unsigned)(rows < 65535 ? rows : 65535));\n",
            "    dim3 blocks((unsigned)(h / threads + 1), rows > 32768 ? 32768u : (unsigned)rows);\n",
        ][c["grid"] % 2]
    else:
        grid = grids[c["grid"]]
    src = STUB_C
    start = src.index("    // TODO 1: your code here.")
    end = src.index("\n}\n", start) + 1
    src = src[:start] + body + src[end:]
    src = src.replace("    int blocks = 1;\n", grid)
    lines = src.splitlines(keepends=True)
    cut = next(n for n, ln in enumerate(lines) if "TODO 3: delete" in ln)
    src = "".join(lines[:cut] + lines[cut + 3 :])
    src = src.replace("    const int threads = 256;", f"    const int threads = {rng.choice([128, 256, 512, 1024])};")
    if c["helper"]:
        helper = f"__device__ __forceinline__ float sigm(float t) {{ return {_csig(c['sig'], 't', c['neg'])}; }}\n\n"
        k = src.index("template <typename T>\n__global__")
        src = src[:k] + helper + src[k:]
    if c["bounds"]:
        src = src.replace("__global__ void glu_kernel(", "__global__ void __launch_bounds__(1024) glu_kernel(", 1)
    if rng.random() < 0.5:
        src = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("//")) + "\n"
    return src


# -- each honest student's own spelling ---------------------------------------------------------------------------


def own_style(src: str, lang: str, rng: random.Random) -> str:
    """The small choices every student makes differently, a coin each: the operand order of an address, a cast on
    its own line, a store through a temporary, a keyword argument, a guard. (A copier keeps its source's.)"""
    if lang == "py":
        if rng.random() < 0.5:
            src = re.sub(r"(?<![\w.])(\w+) \* (\w+) \+ (\w+)\b(?![\w.(\[])", r"\3 + \1 * \2", src)
        if rng.random() < 0.5:
            src = re.sub(
                r"(?m)^(\s+)(\w+) = (tl\.load\(.*\))\.to\(tl\.float32\)$", r"\1\2 = \3\n\1\2 = \2.to(tl.float32)", src
            )
        if rng.random() < 0.5:
            src = re.sub(
                r"(?m)^(\s+)tl\.store\((.+?), ((?:\(.*\)|\w+)\.to\([\w.]+\)), mask=(\w+)\)$",
                r"\1out_v = \3\n\1tl.store(\2, out_v, mask=\4)",
                src,
            )
        if rng.random() < 0.5:
            src = src.replace("tl.program_id(0)", "tl.program_id(axis=0)").replace(
                "tl.program_id(1)", "tl.program_id(axis=1)"
            )
        if rng.random() < 0.5:
            src = src.replace("tl.arange(0, ", "tl.arange(0, 1 * ")
        return src
    if rng.random() < 0.5:
        src = re.sub(r"(\w+) \* x_row_stride \+ (\w+)", r"\2 + \1 * x_row_stride", src)
    if rng.random() < 0.5:
        src = re.sub(r"(?m)^(\s+)y\[([^\]]+)\] = (from_float<T>\(.*\));$", r"\1const T out = \3;\n\1y[\2] = out;", src)
    if rng.random() < 0.5:
        src = src.replace(
            "                           int64_t x_row_stride) {\n",
            "                           int64_t x_row_stride) {\n    if (h <= 0) return;\n",
            1,
        )
    if rng.random() < 0.5:
        src = src.replace("1.0f / (1.0f + ", "1.f / (1.f + ")
    if rng.random() < 0.5:
        src = re.sub(r"(\w+) \+= blockDim\.x\)", r"\1 = \1 + blockDim.x)", src)
    return src


# -- the class -----------------------------------------------------------------------------------------------------


def effective(c: dict[str, int], lang: str) -> dict[str, int]:
    """The decisions that change the code: Triton's 64-bit offsets only in the flat design (0); in CUDA's row designs
    (2, 3) the grid one of two and no row/column split, in the block-per-row design (2) no thread index."""
    e = dict(c)
    if lang == "py" and e["design"] != 0:
        e["i64"] = 0
    if lang == "c" and e["design"] in (2, 3):
        e["grid"] %= 2
        e["rowcol"] = 0  # no flat index to split
    if lang == "c" and e["design"] == 2:
        e["idx"] = 0  # threadIdx.x and blockIdx.x on their own
    return e


# The decisions that shape the code's statements; the others (an order, an extra line, a spelling) are what a copier's
# disguise changes too, and the detector forgives them: two honest students must differ in STRONG_MIN_DIFF of these.
STRONG = {
    "py": ("design", "sig", "helper", "dtype_arg", "flat", "alloc", "guard", "block", "style", "bptr", "cast"),
    "c": ("design", "sig", "idx", "rowcol", "ptr", "helper", "ldg", "grid", "temp", "deref", "ystore"),
}
STRONG_MIN_DIFF = {"py": 2, "c": 3}


def _far(c: dict[str, int], seen: list[dict[str, int]], need: tuple[int, int], lang: str) -> bool:
    strong = STRONG[lang]
    return all(sum(c[k] != o[k] for k in c) >= need[0] and sum(c[k] != o[k] for k in strong) >= need[1] for o in seen)


def honest(n: int, seed: int) -> tuple[list[str], list[str]]:
    """n honest students' (Triton, CUDA) files, every two at least TRITON_MIN_DIFF / CUDA_MIN_DIFF decisions apart
    (and STRONG_MIN_DIFF of the STRONG ones); both relaxed by one after RELAX_AFTER draws in a row found none."""
    rng = random.Random(seed)
    tri: list[str] = []
    cu: list[str] = []
    seen: dict[str, list[dict[str, int]]] = {"py": [], "c": []}
    need = {"py": (TRITON_MIN_DIFF, STRONG_MIN_DIFF["py"]), "c": (CUDA_MIN_DIFF, STRONG_MIN_DIFF["c"])}
    misses = {"py": 0, "c": 0}
    while len(tri) < n or len(cu) < n:
        for lang, out, spec in (("py", tri, gen.TRITON_CHOICES), ("c", cu, CUDA_CHOICES)):
            if len(out) >= n:
                continue
            c = gen.choices(rng, spec)
            if not _far(effective(c, lang), seen[lang], need[lang], lang):
                misses[lang] += 1
                if misses[lang] >= RELAX_AFTER:
                    need[lang], misses[lang] = (max(2, need[lang][0] - 1), max(1, need[lang][1] - 1)), 0
                continue
            misses[lang] = 0
            seen[lang].append(effective(c, lang))
            if lang == "py":
                out.append(own_style(gen.triton_file(rng, c, gen._pick(rng)), "py", rng))
            else:
                out.append(own_style(cuda_honest(rng, c), "c", rng))
    SPREAD[n] = (need["py"], need["c"])
    return tri, cu


RELAX_AFTER = 3000
SPREAD: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {}  # honest(n)'s final (decisions, strong ones) apart


# -- disguises -----------------------------------------------------------------------------------------------------

_PY_API = {"tl", "triton", "torch", "math", "glu_triton"}
_C_API = {"glu_cuda_forward", "to_float", "from_float", "T", "cudaStream_t"}


def rename(src: str, lang: str) -> str:
    keep = simtokens.PY_KEEP if lang == "py" else simtokens.C_KEEP
    words = set(re.findall(r"\b[A-Za-z_]\w*\b", src))
    mapping = {}
    for w in words:
        if w in keep or w.startswith("__") or w in _PY_API or w in _C_API or w.startswith(("GLU_", "cuda")):
            continue
        if re.search(r"[.>]\s*" + re.escape(w) + r"\b", src):
            continue
        mapping[w] = f"v_{w[::-1].lower()}_2"
    return gen.rename(src, mapping) if mapping else src


def recomment(src: str, lang: str) -> str:
    mark = "#" if lang == "py" else "//"
    out = []
    for ln in src.splitlines():
        if ln.lstrip().startswith(mark):
            continue
        out.append(ln)
        if ln.rstrip().endswith((":", "{")) and not ln.lstrip().startswith(("@", "def ")):
            out.append(" " * (len(ln) - len(ln.lstrip()) + 4) + f"{mark} my own step")
    return "\n".join(out) + "\n"


def _swap_first(lines: list[str], marker: str) -> None:
    at = [n for n, ln in enumerate(lines) if marker in ln]
    if len(at) >= 2 and at[1] == at[0] + 1:
        lines[at[0]], lines[at[1]] = lines[at[1]], lines[at[0]]


def reorder(src: str, lang: str) -> str:
    """Statements whose order does not matter, reordered: Python's top-level definitions reversed (a name is looked
    up when called) and the two loads swapped; in C++ the loads swapped, the dtype switch's cases reversed, the two
    argument checks swapped and the helper functions moved."""
    lines = src.splitlines()
    _swap_first(lines, "tl.load(" if lang == "py" else "to_float(")
    text = "\n".join(lines) + "\n"
    if lang == "py":
        blocks = re.split(r"\n(?=@triton\.jit\n)|(?<!@triton\.jit)\n(?=def |_TL = )", text)
        head = [b for b in blocks if not b.startswith(("@triton.jit", "def ", "_TL"))]
        defs = [b for b in blocks if b.startswith(("@triton.jit", "def "))]
        tables = [b for b in blocks if b.startswith("_TL")]
        return "\n".join(head + tables + defs[::-1]) + "\n"
    cases = re.findall(r"        case \d: [^\n]*\n", text)
    if len(cases) == 3:
        text = text.replace("".join(cases), "".join(cases[::-1]))
    c1 = "    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return GLU_ERR_ARGS;\n"
    c2 = "    if (dtype < 0 || dtype > 2) return GLU_ERR_DTYPE;\n"
    text = text.replace(c1 + c2, c2 + c1)
    m = re.search(r"__device__ __forceinline__ float sigm[^\n]*\n\n", text)
    if m:
        text = text.replace(m.group(0), "")
        k = text.index("template <typename T> __device__ __forceinline__ T from_float")
        text = text[:k] + m.group(0) + text[k:]
    return text


def dead_code(src: str, lang: str) -> str:
    """Code that never changes the result: unused variables after each function's first line, an unused helper and
    a never-taken branch."""
    out = []
    lines = src.splitlines()
    if lang == "py":
        for n, ln in enumerate(lines):
            out.append(ln)
            if ln.startswith("def ") and ln.rstrip().endswith(":"):
                body = next((x for x in lines[n + 1 :] if x.strip()), "    ")
                ind = " " * (len(body) - len(body.lstrip()))
                out += [
                    f"{ind}unused_scale = 3",
                    f"{ind}if unused_scale > 100:",
                    f"{ind}    unused_scale = unused_scale * 2",
                ]
        out += ["", "", "def _debug_stats(t):", "    lo = t.min()", "    hi = t.max()", "    return (lo, hi, t.mean())"]
        return "\n".join(out) + "\n"
    in_sig = False
    for ln in lines:
        out.append(ln)
        top = ln[:1].isalpha() or ln[:1] == "_"
        if top and "(" in ln and ";" not in ln and not ln.startswith(("#", "if", "for", "while", "switch")):
            in_sig = True
        if in_sig and ln.rstrip().endswith("{"):
            in_sig = False
            if not ln.rstrip().endswith("}"):
                out += ["    int unused_pad = 3;", "    if (unused_pad < 0) { unused_pad = 0; }"]
                out += ["    (void)unused_pad;"]
        elif in_sig and (ln.rstrip().endswith(";") or ln.rstrip().endswith("}")):
            in_sig = False
    out += ["", "__device__ float debug_mean(const float* v, int n) {", "    float s = 0.0f;",
            "    for (int j = 0; j < n; ++j) s += v[j];", "    return n ? s / n : 0.0f;", "}"]  # fmt: skip
    return "\n".join(out) + "\n"


def no_op(src: str, lang: str) -> str:
    """One extra token per line: `; pass` after each Python simple statement; a second `;` after each C++ statement
    and #define aliases of keywords and types."""
    out = []
    if lang == "py":
        depth = 0
        for ln in src.splitlines():
            s = ln.strip()
            depth += ln.count("(") + ln.count("[") + ln.count("{") - ln.count(")") - ln.count("]") - ln.count("}")
            simple = (
                s and not s.startswith(("#", "@", '"""', "'''")) and not s.endswith((":", ",", "(", "[", "{", "\\"))
            )
            out.append(ln + "; pass" if simple and depth == 0 and '"""' not in s else ln)
        return "\n".join(out) + "\n"
    aliases = {"return": "RET_", "const": "CONST_", "float": "F32_", "int64_t": "I64_", "for": "LOOP_", "if": "WHEN_"}
    head = "".join(f"#define {v} {k}\n" for k, v in aliases.items())
    spans = textscan.literal_spans(src)
    text = textscan.strip_comments(src) if spans else src
    for ln in text.splitlines():
        if ln.lstrip().startswith("#"):  # directives stay as they are (nvcc must still build it)
            out.append(ln)
            continue
        for k, v in aliases.items():
            ln = re.sub(r"\b" + k + r"\b", v, ln)
        out.append(ln + ";" if ln.rstrip().endswith(";") else ln)
    lines = "\n".join(out) + "\n"
    k = lines.index("#define GLU_OK")
    return lines[:k] + head + lines[k:]


_TRANSLATE_PY = [
    (".view(-1, cols)", ".reshape(-1, cols)"),
    (".reshape(-1, cols)", ".view(-1, cols)"),
    ("triton.cdiv(n, block)", "(n + block - 1) // block"),
    ("triton.cdiv(h, block)", "(h + block - 1) // block"),
    ("x.shape[-1]", "x.size(-1)"),
    ("x2.shape[0]", "x2.size(0)"),
    ("if rows == 0 or h == 0:", "if not (rows and h):"),
    ("tl.sigmoid(", "tl.math.sigmoid("),
    ("* 1.4426950408889634", "/ 0.6931471805599453"),
    ("1.0 / (1.0 + tl.exp(", "tl.fdiv(1.0, 1.0 + tl.exp("),
]
_TRANSLATE_C = [
    ("(int64_t)blockIdx.x", "static_cast<int64_t>(blockIdx.x)"),
    ("(int64_t)blockDim.x", "static_cast<int64_t>(blockDim.x)"),
    ("(int64_t)gridDim.x", "static_cast<int64_t>(gridDim.x)"),
    ("rows * h", "h * rows"),
    ("1.0f / (1.0f + __expf(", "__frcp_rn(1.0f + __expf("),
    ("+= step)", "= i + step)"),
    (" - 1) / threads", " + (-1)) / threads"),
]


def translate(src: str, lang: str) -> str:
    """Equivalent constructs swapped (a cast's spelling, an operand order, a library call for its formula)."""
    for a, b in _TRANSLATE_PY if lang == "py" else _TRANSLATE_C:
        if a in src:
            if lang == "c" and a.startswith("1.0f / (1.0f + __expf("):
                src = re.sub(r"1\.0f / \(1\.0f \+ __expf\(([^()]*)\)\)", r"__frcp_rn(1.0f + __expf(\1))", src)
                continue
            if lang == "py" and a == "1.0 / (1.0 + tl.exp(":
                src = re.sub(r"1\.0 / \(1\.0 \+ tl\.exp\(([^()]*)\)\)", r"tl.fdiv(1.0, 1.0 + tl.exp(\1))", src)
                continue
            src = src.replace(a, b)
    return src


def half_file(src: str, other: str, lang: str) -> str:
    """The source's kernel (its first half), the rest the copier's own (another honest student's)."""
    if lang == "py":
        k = src.index("def glu_triton(")
        k = src.rfind("\n\n\n", 0, k) if src.rfind("def _", 0, k) > src.index("@triton.jit") else k
        j = other.index("def glu_triton(")
        mine = other.rfind("\n\n\n", 0, j)
        mine = other[mine if other.rfind("def _", 0, j) > other.index("@triton.jit") else j :]
        return src[:k] + "\n\n\n" + mine.lstrip("\n")
    k = src.index("template <typename T>\nvoid launch_glu")
    j = other.index("template <typename T>\nvoid launch_glu")
    return src[:k] + other[j:]


def disguise(kind: str, src: str, other: str, lang: str) -> str:
    if kind == "verbatim":
        return recomment(src, lang)
    if kind == "renamed":
        return recomment(rename(src, lang), lang)
    if kind == "reordered":
        return reorder(src, lang)
    if kind == "dead-code":
        return dead_code(src, lang)
    if kind in ("no-op", "staff-no-op"):
        return no_op(src, lang)
    if kind == "translated":
        return translate(src, lang)
    if kind == "half-file":
        return half_file(src, other, lang)
    return dead_code(reorder(rename(src, lang), lang), lang)  # combo


def build(folder: Path, n: int, seed: int) -> dict[str, set[tuple[str, str, str]]]:
    """A class of n under folder: 80% honest (2 of them traps), 20% copiers; returns per part the planted pairs
    (a, b, disguise)."""
    n_copy = max(len(DISGUISES), n // 5)
    n_honest = n - n_copy
    tri, cu = honest(n_honest + n_copy, seed)  # the last n_copy: the copiers' own halves (half-file), not submitted
    planted: dict[str, set[tuple[str, str, str]]] = {"triton": set(), "cuda": set()}

    def put(sid: str, t: str | None, c: str | None) -> None:
        (folder / sid).mkdir(parents=True, exist_ok=True)
        if t is not None:
            (folder / sid / "glu_triton.py").write_text(t, encoding="utf-8")
        if c is not None:
            (folder / sid / "glu_cuda.cu").write_text(c, encoding="utf-8")

    for k in range(n_honest - 2):
        put(f"h{k:04d}", tri[k], cu[k])
    put("trap-stub", STUB_T, STUB_C)  # the starter code, unchanged
    forced = STUB_C.replace(
        "    // TODO 1: your code here. For example:\n",
        "    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < rows * h) y[i] = from_float<T>(to_float(x[i / h * x_row_stride + i % h]) * "
        "(1.0f / (1.0f + __expf(-to_float(x[i / h * x_row_stride + h + i % h])))));\n",
        1,
    )
    put("trap-forced", tri[n_honest - 2], forced)
    rng = random.Random(seed + 1)
    sources = rng.sample(range(n_honest - 2), min(n_copy, n_honest - 2))  # one copier per source
    for k in range(n_copy):
        kind = DISGUISES[k % len(DISGUISES)]
        sid = f"c{k:04d}-{kind}"
        if kind == "staff-no-op":
            st, sc, src_name_t, src_name_c = (
                STAFF_T,
                STAFF_C,
                "staff:glu/solution_triton.py",
                "staff:glu/solution_cuda.cu",
            )
        else:
            s = sources[k % len(sources)]
            st, sc, src_name_t, src_name_c = tri[s], cu[s], f"h{s:04d}", f"h{s:04d}"
        o = n_honest + k  # the copier's own work, for the half it wrote itself
        put(sid, disguise(kind, st, tri[o], "py"), disguise(kind, sc, cu[o], "c"))
        planted["triton"].add((sid, src_name_t, kind))
        planted["cuda"].add((sid, src_name_c, kind))
    return planted


# -- metrics -------------------------------------------------------------------------------------------------------


def average_precision(ranked: list[bool], positives: int) -> float:
    hits, total = 0, 0.0
    for k, good in enumerate(ranked, 1):
        if good:
            hits += 1
            total += hits / k
    return total / positives if positives else 0.0


WHY = ("verbatim", "renamed", "reordered", "dead-code", "no-op", "staff-no-op", "combo")  # the issue's "Why"


def evaluate(
    folder: Path, planted: dict[str, set[tuple[str, str, str]]], metrics: list[dict[str, object]] | None = None
) -> list[str]:
    """The metrics of one class, per part, as lines to print (and as dicts appended to metrics). Pairs of two
    copiers of one source (the staff solution) are copies of each other: counted neither as planted nor as
    honest."""
    metrics = [] if metrics is None else metrics
    flagged = S.run_check(folder, GLU)
    everything = S.run_check(folder, GLU, threshold=0.02, min_tokens=0, keep_all=True)
    out = []
    for part, allp in zip(flagged.parts, everything.parts, strict=True):
        want = {tuple(sorted((a, b))): kind for a, b, kind in planted[part.part]}
        source = {a: b for a, b, _ in planted[part.part]}
        scores = {tuple(sorted((p.a.name, p.b.name))): p.similarity for p in allp.scored}

        def related(k: tuple[str, ...], source: dict[str, str] = source) -> bool:
            return k[0] in source and k[1] in source and source[k[0]] == source[k[1]]

        docs = allp.compared
        n_related = sum(1 for a in source for b in source if a < b and source[a] == source[b])
        honest_pairs = docs * (docs - 1) // 2 + docs * len(allp.staff) - len(want) - n_related
        ranked = sorted(((k, v) for k, v in scores.items() if not related(k)), key=lambda kv: -kv[1])
        labels = [k in want for k, _ in ranked]
        k_at = len(want)
        p_at_k = sum(labels[:k_at]) / k_at
        ap = average_precision(labels, len(want))
        got = {tuple(sorted((p.a.name, p.b.name))) for p in part.pairs}
        recall = len(got & set(want)) / len(want)
        fp = len({k for k in got - set(want) if not related(k)})
        high = max((v for k, v in ranked if k not in want), default=0.0)
        why = [k for k, kind in want.items() if kind in WHY]
        above_why = sum(1 for k in why if scores.get(k, 0.0) > high)
        above = sum(1 for k in want if scores.get(k, 0.0) > high)
        kinds: dict[str, list[float]] = {}
        for k, kind in want.items():
            kinds.setdefault(kind, []).append(scores.get(k, 0.0))
        per = ", ".join(
            f"{kind} {min(v):.2f}" + (f"-{max(v):.2f}" if len(v) > 1 else "") for kind, v in sorted(kinds.items())
        )
        metrics.append(
            {
                "part": part.part, "above_why": above_why, "why": len(why), "above": above, "planted": len(want),
                "recall": recall, "flagged_honest": fp, "honest_pairs": honest_pairs, "ap": ap,
            }
        )  # fmt: skip
        out.append(
            f"  {part.part}: {docs} files, {len(want)} planted pairs, {honest_pairs} honest pairs\n"
            f"    above every honest pair (highest honest {high:.2f}): the issue's disguises {above_why}/{len(why)}, "
            f"all planted {above}/{len(want)}\n"
            f"    precision@{k_at} {p_at_k:.2f}; average precision {ap:.2f}; recall at the default threshold "
            f"({S.DEFAULT_THRESHOLD}) {recall:.2f}; honest pairs flagged {fp} "
            f"({100 * fp / max(1, honest_pairs):.2f}%)\n"
            f"    planted scores by disguise (lowest-highest): {per}"
        )
    return out


def timed(folder: Path, report: Path) -> tuple[float, int]:
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "grader", "similarity", str(folder), "--out", str(report)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return time.monotonic() - t0, r.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 500])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="write the classes and reports under this folder")
    a = ap.parse_args()
    print(f"python scripts/bench_similarity.py --sizes {' '.join(map(str, a.sizes))} --seed {a.seed}")
    print(f"machine: {os.cpu_count()} CPU cores; disguises: {', '.join(DISGUISES)}")
    with tempfile.TemporaryDirectory() as tmp:
        base = a.keep or Path(tmp)
        for n in a.sizes:
            folder = base / f"class-{n}"
            planted = build(folder, n, a.seed)
            wall, rc = timed(folder, base / f"report-{n}")
            (dt, st), (dc, sc) = SPREAD[max(SPREAD)]
            print(
                f"{n} submissions: `python -m grader similarity` {wall:.1f} s wall (exit {rc}); honest students at "
                f"least {dt} of {len(gen.TRITON_CHOICES)} Triton decisions apart ({st} of the {len(STRONG['py'])} "
                f"that shape statements) and {dc} of {len(CUDA_CHOICES)} CUDA ({sc} of {len(STRONG['c'])})"
            )
            for line in evaluate(folder, planted):
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
