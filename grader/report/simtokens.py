"""The tokens and fingerprints `python -m grader similarity` compares: a file normalised (grader/report/simnorm.py)
into token classes (`tokenize`: a hand scanner, linear; every name a student picks is "V"), every run of K tokens
hashed, and of every W consecutive hashes the smallest kept (`winnow`). The method: docs/architecture.md ("The
similarity check").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from grader import textscan
from grader.report import simnorm

K = 15  # tokens per hashed run: the minimum match length (about two lines of kernel code)
W = 8  # winnowing window: every shared run of K + W - 1 = 22 tokens is found
MAX_TOKENS = 200_000  # tokens kept per file (1 MiB of dense code is fewer)
CPP_MAX_BYTES = 256 << 10  # a CUDA file larger than this is compared by its own tokens (cpp is not run on it)


# -- tokens -------------------------------------------------------------------------------------------------------

PY_KEEP = frozenset(
    # Python's keywords and the builtins a kernel wrapper uses; every other name a student picks becomes "V".
    "False None True and as assert async await break class continue def del elif else except finally for from "
    "global if import in is lambda nonlocal not or pass raise return try while with yield "
    "abs all any bool dict divmod enumerate float getattr hasattr int isinstance len list max min print range "
    "reversed round set slice sorted str sum tuple type zip self".split()
)
C_KEEP = frozenset(
    # C, C++ and CUDA keywords and types, CUDA's built-in variables and the math library a kernel calls. Names that
    # start with two underscores (__global__, __expf, __half2float, __nv_bfloat16) are kept by their prefix.
    "auto bool break case char const constexpr continue default do double else enum extern false float for goto if "
    "inline int long namespace nullptr operator private public register reinterpret_cast return short signed "
    "sizeof static static_assert static_cast struct switch template this true typedef typename union unsigned "
    "using void volatile while dynamic_cast const_cast class "
    "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t uintptr_t intptr_t ptrdiff_t "
    "threadIdx blockIdx blockDim gridDim warpSize cudaStream_t cudaError_t cudaSuccess cudaGetLastError "
    "float2 float4 half half2 "
    "expf exp exp2f logf log1pf tanhf tanh fabsf fmaxf fminf max min rsqrtf sqrtf erff fmaf "
    "include define ifdef ifndef endif pragma unroll".split()
)
C_DIRECTIVE_WORDS = frozenset("include define ifdef ifndef endif pragma".split())  # fallback: no cpp
PY_STRING_PREFIXES = frozenset("r u b f rb br fr rf".split())
_SPACE = re.compile(r"[ \t\r\f\v\\]+")  # one character class: cannot backtrack
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"[\w.]+")
_PY_IN_STRING = {'"': re.compile(r'["\\\n]'), "'": re.compile(r"['\\\n]")}


@dataclass
class Tokens:
    kinds: list[str]  # the normalized tokens ("V" for a name, "N", "S", keywords, punctuation)
    lines: list[int]  # each token's line, from 1
    texts: list[str] = field(default_factory=list)  # comments and string literals (for the boilerplate's code)


def _py_string_end(src: str, i: int) -> int:
    """The end of the Python string literal whose quote is at i: a triple-quoted one at its closing triple (or the
    end of the text), a one-line one at its quote, or at the line's end when it is not closed."""
    q = src[i]
    if src.startswith(q * 3, i):
        k = src.find(q * 3, i + 3)
        return len(src) if k < 0 else k + 3
    pat, j = _PY_IN_STRING[q], i + 1
    while True:
        m = pat.search(src, j)
        if m is None:
            return len(src)
        c = src[m.start()]
        if c == "\\":
            j = m.start() + 2
        elif c == "\n":
            return m.start()
        else:
            return m.start() + 1


def _comment_text(s: str) -> str:
    """A comment or string literal without its markers, for tokenizing the code a stub suggests in it."""
    for a, b in (('"""', '"""'), ("'''", "'''"), ("/*", "*/"), ("//", ""), ("#", ""), ('"', '"'), ("'", "'")):
        if s.startswith(a):
            s = s[len(a) :]
            return s[: -len(b)] if b and s.endswith(b) else s
    return s


def _literal(out: Tokens, src: str, at: tuple[int, int, int], line: int, *, string: bool, keep_texts: bool) -> int:
    """A comment or string literal, src[start:end] of at = (start, here, end), met at `here` on `line`: one "S" token
    for a string (a comment is no token), its text kept when asked. Returns the line after it."""
    start, here, end = at
    if string:
        out.kinds.append("S")
        out.lines.append(line)
    if keep_texts:
        out.texts.append(_comment_text(src[start:end]))
    return line + src.count("\n", here, end)


def _word(src: str, i: int, lang: str, keep: AbstractSet[str], kinds: list[str]) -> tuple[str | None, int]:
    """The token of the word at src[i] and where the word ends: the word itself when it is kept (a keyword, a
    builtin, a CUDA name, a member after . or ->), else "V"; None for a Python string prefix (r"...", f'...': the
    string comes next, as one "S")."""
    m = _WORD.match(src, i)
    j = m.end() if m is not None else i + 1
    word = src[i:j]
    if lang == "py" and j < len(src) and src[j] in "\"'" and word.lower() in PY_STRING_PREFIXES:
        return None, j
    after = kinds[-1] if kinds else ""
    member = after == "." or (after == ">" and len(kinds) > 1 and kinds[-2] == "-")
    named = word in keep or (lang == "c" and word.startswith("__")) or member
    return (word if named else "V"), j


def tokenize(src: str, lang: str, *, keep_texts: bool = False) -> Tokens:
    """The normalized tokens of a Python ("py") or C/C++/CUDA ("c") source, in one linear pass: each character is
    looked at a bounded number of times (single-class regex runs, str.find). keep_texts: also return the text of
    every comment and string literal (the boilerplate's suggested code). At most MAX_TOKENS tokens."""
    out = Tokens([], [], [])
    kinds, lines, texts = out.kinds, out.lines, out.texts
    keep = PY_KEEP if lang == "py" else C_KEEP
    # C: comments and literals found first by the grader's linear C scanner, then skipped (or made "S") in order.
    spans = [] if lang == "py" else textscan.literal_spans(src)
    si = 0
    n, i, line = len(src), 0, 1
    while i < n and len(kinds) < MAX_TOKENS:
        if si < len(spans) and i >= spans[si].start:
            s = spans[si]
            si += 1
            if s.end <= i:
                continue
            line = _literal(out, src, (s.start, i, s.end), line, string=not s.comment, keep_texts=keep_texts)
            i = s.end
            continue
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        m = _SPACE.match(src, i)
        if m is not None:
            i = m.end()
            continue
        if lang == "py" and c == "#":
            j = src.find("\n", i)
            j = n if j < 0 else j
            if keep_texts:
                texts.append(src[i + 1 : j])
            i = j
            continue
        if lang == "py" and c in "\"'":
            j = _py_string_end(src, i)
            line = _literal(out, src, (i, i, j), line, string=True, keep_texts=keep_texts)
            i = j
            continue
        if c.isdigit() or (c == "." and src[i + 1 : i + 2].isdigit()):
            m = _NUMBER.match(src, i)
            kinds.append("N")
            lines.append(line)
            i = m.end() if m is not None else i + 1
            continue
        if c.isalpha() or c == "_":
            tok, i = _word(src, i, lang, keep, kinds)
            if tok is not None:
                kinds.append(tok)
                lines.append(line)
            continue
        if lang == "py" and c == ";":  # a statement separator: the same as a new line, which is no token
            i += 1
            continue
        kinds.append(c)  # punctuation, one character each (`+=` is "+", "="): the same in every file
        lines.append(line)
        i += 1
    return out


def lang_of(filename: str) -> str:
    return "py" if filename.endswith(".py") else "c"


# -- fingerprints -------------------------------------------------------------------------------------------------


class Vocabulary:
    """Token -> small int, shared by every file of a run, so that a K-token run hashes as a tuple of ints."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def encode(self, kinds: Sequence[str]) -> list[int]:
        ids = self.ids
        return [ids.setdefault(t, len(ids)) for t in kinds]


def kgram_hashes(ids: Sequence[int], k: int = K) -> list[int]:
    """hash(tuple) of every run of k tokens: hashes of ints and tuples of ints do not depend on PYTHONHASHSEED."""
    return [hash(tuple(ids[i : i + k])) for i in range(len(ids) - k + 1)]


def winnow(hashes: Sequence[int], w: int = W) -> list[int]:
    """Positions of the fingerprints: in every window of w consecutive hashes, the rightmost smallest (robust
    winnowing); a file shorter than one window keeps its smallest hash."""
    if not hashes:
        return []
    if len(hashes) <= w:
        m = min(hashes)
        return [len(hashes) - 1 - hashes[::-1].index(m)]
    picked: list[int] = []
    last = -1
    for i in range(len(hashes) - w + 1):
        win = hashes[i : i + w]
        m = min(win)
        j = i + w - 1 - win[::-1].index(m)
        if j != last:
            picked.append(j)
            last = j
    return picked


def normalize(text: str, lang: str) -> simnorm.Normal:
    """The file's tokens after simnorm's normalisation (Python through `ast`, C/CUDA through cpp and its token
    classes), with the statements; the raw tokens where the parser cannot take the file."""
    if lang == "py":
        stmts = simnorm.py_statements(text)
        if stmts is not None:
            kinds: list[str] = []
            lines: list[int] = []
            ranges: list[tuple[int, int]] = []
            for stext, line in stmts:
                start = len(kinds)
                for t in tokenize(stext, "py").kinds:
                    if t != "pass" and len(kinds) < MAX_TOKENS:
                        kinds.append(t)
                        lines.append(line)
                if len(kinds) > start:
                    ranges.append((start, len(kinds)))
            return simnorm.Normal(kinds, lines, ranges, "ast")
        raw = tokenize(text, "py")
        keep = [i for i, k in enumerate(raw.kinds) if k != "pass"]
        kinds, lines = [raw.kinds[i] for i in keep], [raw.lines[i] for i in keep]
        ranges = []
        start = 0
        for i in range(1, len(lines) + 1):
            if i == len(lines) or lines[i] != lines[i - 1]:
                ranges.append((start, i))
                start = i
        return simnorm.Normal(kinds, lines, ranges, "tokens")
    out = simnorm.run_cpp(text) if len(text) <= CPP_MAX_BYTES else None
    if out is not None:
        body, where = simnorm.cpp_lines(out)
        pre = tokenize(body, "c")
        n = simnorm.c_classes(pre.kinds, [where[min(x, len(where)) - 1] for x in pre.lines])
        n.how = "cpp"
        return n
    own = tokenize(text, "c")
    keep = [i for i, k in enumerate(own.kinds) if k not in C_DIRECTIVE_WORDS]
    n = simnorm.c_classes([own.kinds[i] for i in keep], [own.lines[i] for i in keep])
    n.how = "tokens"
    return n
