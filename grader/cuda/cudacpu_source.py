"""The CUDA-on-CPU layer's reading of a student's source: its `k<<<...>>>(args)` launches rewritten into calls of
the layer's launcher (`rewrite_launches`), and what its preprocessed lines use that the layer cannot run faithfully
(`unsupported`: __syncthreads, warp shuffles, atomics, inline asm, ...). Both are linear scans of untrusted text.
"""

from __future__ import annotations

import os
import re
from typing import Protocol

from grader import textscan

# -- launches -------------------------------------------------------------------------------------------------


def _code_mask(src: str) -> bytearray:
    r"""For each character: 1 when it is code (not in a comment, string or character literal). A linear scanner
    (grader/textscan.py): the regex this was (`/\*.*?\*/` and string patterns under DOTALL) backtracked without end
    on crafted sources."""
    return textscan.code_mask(src)


def _name_start(src: str, j: int, floor: int) -> int | None:
    r"""Where the identifier that ends at `j` (spaces before `j` skipped) starts, not looking before `floor`: its first
    ASCII letter or '_' after the digits that may open the run of word characters. None when there is none.
    (What `re.search(r"[A-Za-z_][\w]*\s*$", src[:j])` found, without trying every start position of the text.)"""
    e = j
    while e > floor and src[e - 1].isspace():
        e -= 1
    b = e
    while b > floor and (src[b - 1].isalnum() or src[b - 1] == "_"):
        b -= 1
    for k in range(b, e):
        if src[k] == "_" or ("a" <= src[k] <= "z") or ("A" <= src[k] <= "Z"):
            return k
    return None


def _kernel_start(src: str, end: int, floor: int = 0) -> int:
    """Where the kernel expression that ends at `end` (just before `<<<`) starts: names, `::`, template args. Never
    looks before `floor` (the end of the previous launch), so the scans of all launches together are linear."""
    i = end
    while True:
        j = i
        while j > floor and src[j - 1].isspace():
            j -= 1
        if j > floor and src[j - 1] == ">":  # template arguments: back over the balanced <...>
            depth, k = 0, j - 1
            while k >= floor:
                depth += {">": 1, "<": -1}.get(src[k], 0)
                if depth == 0:
                    break
                k -= 1
            if k < floor:
                return i
            j = k
            while j > floor and src[j - 1].isspace():
                j -= 1
        start = _name_start(src, j, floor)
        if start is None:
            return j
        j = start
        if j >= floor + 2 and src[j - 2 : j] == "::":
            i = j - 2
            continue
        return j


def _matching(src: str, start: int, mask: bytearray, open_: str, close: str) -> int:
    """The index of the `close` that balances the `open_` at `start` (-1 if none)."""
    depth = 0
    for k in range(start, len(src)):
        if not mask[k]:
            continue
        if src[k] == open_:
            depth += 1
        elif src[k] == close:
            depth -= 1
            if depth == 0:
                return k
    return -1


def rewrite_launches(src: str) -> str:
    """Every `kernel<<<cfg>>>(args)` (templates, `ns::` names, any whitespace, 2 to 4 launch parameters) becomes
    `(::cudacpu::configure(::cudacpu::Config(cfg)) ? (void)0 : ::cudacpu::launch_configured([&](auto... a) {
    kernel(a...); }, args))`, each part on its own line, evaluated in nvcc's order (the configuration first)."""
    out: list[str] = []
    pos = 0
    mask = _code_mask(src)
    i = src.find("<<<")
    while i != -1:
        if not mask[i] or i < pos:
            i = src.find("<<<", i + 3)
            continue
        depth, k = 0, i + 3
        while k < len(src) - 2:
            if mask[k]:
                c = src[k]
                depth += c in "([{"
                depth -= c in ")]}"
                if depth == 0 and src.startswith(">>>", k):
                    break
            k += 1
        else:
            break
        cfg_end = k
        p = cfg_end + 3
        while p < len(src) and src[p].isspace():
            p += 1
        if p >= len(src) or src[p] != "(":
            # Not a launch; go on after its `>>>` (from i + 3 every `<<<` inside would scan to the same `>>>` again:
            # quadratic on a source of many `<<<`).
            i = src.find("<<<", cfg_end + 3)
            continue
        close = _matching(src, p, mask, "(", ")")
        if close == -1:
            break
        start = _kernel_start(src, i, pos)
        kernel = " ".join(src[start:i].split())
        args = src[p + 1 : close]
        # Every part stays on its line: the name's newlines come first (the configuration starts on the line of
        # `<<<`, the arguments on theirs), so __LINE__ in either reads what nvcc's build reads. The configuration
        # is evaluated before the arguments, as nvcc sequences a launch (cudacpu.h `configure`).
        out.append(src[pos:start])
        out.append(
            "\n" * src[start:i].count("\n")
            + f"(::cudacpu::configure(::cudacpu::Config({src[i + 3 : cfg_end]})) ? (void)0 : "
            + f"::cudacpu::launch_configured([&](auto... cudacpu_a) {{ {kernel}(cudacpu_a...); }}"
            + "\n" * src[cfg_end + 3 : p].count("\n")
            + (f", {args}))" if args.strip() else args + "))")
        )
        pos = close + 1
        i = src.find("<<<", pos)
    out.append(src[pos:])
    return "".join(out)


# -- what the layer cannot run ----------------------------------------------------------------------------------


class _Finder(Protocol):
    def search(self, text: str, /) -> object: ...


_TOKEN = re.compile(r"\w+|[^\w\s]")  # a word or one other character: one token per match, no backtracking


class _ExternShared:
    r"""`extern <words> __shared__` on a line (dynamic shared memory), in one pass over its tokens. The regex it
    replaces, `\bextern\s+(\w+\s+)*__shared__\b`, ran from every `extern` over all the words after it: quadratic
    on a line of many `extern`s."""

    def search(self, text: str, /) -> bool:
        if "__shared__" not in text or "extern" not in text:
            return False
        chain = False  # inside `extern` followed by words only
        for m in _TOKEN.finditer(text):
            word = m.group()
            if word == "__shared__" and chain:
                return True
            chain = word == "extern" or (chain and (word[0].isalnum() or word[0] == "_"))
        return False


# Each: what it is, for the student. Matched on the student's own lines of the preprocessed source (so comments
# and #if'd-out code do not count), with the layer's __shared__ left as it is. The regexes are linear on a line of
# any length: a fixed word, then at most a run of \w (or \s before a fixed character), nothing nested.
UNSUPPORTED: tuple[tuple[str, _Finder], ...] = (
    ("__syncthreads (block-wide barriers)", re.compile(r"\b__syncthreads\w*\b|\b__syncwarp\b|\bbarrier\.sync\b")),
    ("dynamic shared memory (extern __shared__)", _ExternShared()),
    ("warp shuffles and votes", re.compile(r"\b__(shfl|ballot|any|all|activemask|match|reduce)\w*\b")),
    ("atomics", re.compile(r"\batomic[A-Z]\w*\b|\bcuda::atomic\w*\b")),
    ("inline PTX (asm)", re.compile(r"\b(__asm__|__asm|asm)\b")),
    ("__nanosleep", re.compile(r"\b__nanosleep\b")),
    ("cooperative groups", re.compile(r"\bcooperative_groups\b|\bthis_grid\b|\bgrid\.sync\b")),
    ("clock-based waits", re.compile(r"\b(clock|clock64|globaltimer)\s*\(")),
    ("memory fences", re.compile(r"\b__threadfence\w*\b")),
)
# Applied with .match (one start) to one line; each part is a run of one class followed by a character outside it
# (\s then a digit or 'l', \d then \s, [^"] then '"'), so it cannot backtrack super-linearly.
_LINEMARK = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"([^"]*)"')
MAX_UNIT_BYTES = 20_000_000  # of the preprocessed unit; the parent never reads more than this of it


def unsupported(preprocessed: str, filename: str) -> list[str]:
    """What the student's file uses that the layer cannot run faithfully: "what (file:line)", first use each."""
    found: dict[str, str] = {}
    line, mine = 0, False
    for text in preprocessed.splitlines():
        m = _LINEMARK.match(text)
        if m:
            line, mine = int(m.group(1)), os.path.basename(m.group(2)) == filename
            continue
        if mine:
            for what, pat in UNSUPPORTED:
                if what not in found and pat.search(text):
                    found[what] = f"{what} ({filename}:{line})"
        line += 1
    return list(found.values())
