"""`python -m grader similarity OUT`: which submissions of a class share code beyond what everyone was given.

A kernel assignment has a small solution space and a public starter file, so copying is the cheating a TA meets
most often, and the one a grade cannot see. This compares every pair of submissions per part (each of the
problem's student implementations: the Triton .py, the CUDA .cu) and writes, for a TA to read:

    OUT/similarity.html   the pairs above the threshold, sorted, each with both files side by side and the matched
                          lines marked; three or more submissions linked by such pairs shown as one group
    OUT/pairs.csv         one row per pair above the threshold: the two names, part, similarity, matched lines

A match is evidence for a human to read, never a verdict: the grader takes no points for it (README, "Similar
submissions").

How (winnowing, Schleimer, Wilkerson and Aiken, SIGMOD 2003: the method of MOSS and copydetect):

1. Each file becomes a list of tokens in linear time (`tokenize`: a hand scanner, no backtracking regex):
   comments dropped, string and number literals made one token each ("S", "N"), and every name a student chooses
   made "V". Keywords, builtins (`range`, `int`, `blockIdx`, `__expf`) and names after a '.' or '->' (`tl.load`,
   `x.stride`, `blockIdx.x`) are kept: a student cannot rename them, and they are what tells two kernels apart.
   So renaming variables, changing comments, docstrings, spacing or constants changes nothing.
2. Every run of K tokens is hashed; of every W consecutive hashes the smallest is kept (the file's fingerprints).
   Any run of K + W - 1 equal tokens shared by two files shares a fingerprint, and nothing shorter than K does:
   K is the minimum match length.
3. Boilerplate: every K-token hash of what the class was given (the starter stub of the part, the code suggested
   in its comments and docstrings, the handout's code blocks) is removed from every file's fingerprints, and the
   tokens it covers count for nobody. The 30 unchanged stubs of a class match nothing.
4. A pair's similarity is the share of both files' own (non-boilerplate) tokens covered by shared fingerprints:
   (covered in A + covered in B) / (own tokens of A + own tokens of B), between 0 and 1 (Dolos's measure). A pair
   is reported when it is at least the threshold and at least MIN_MATCH_TOKENS tokens matched on each side, so the
   few lines a spec forces on everybody (an elementwise one-liner) are never enough alone.

Staff solutions (reference/<problem>/solution_*, and any --known FILE) are compared with every submission, named
`staff:<problem>/<file>` (`known:<file>`), never with each other: a submission close to one is flagged as such.

Every file is hostile: it is read with a size cap before it is read (never through a link, never a device or a
pipe), and a binary, empty, huge or non-UTF-8 one is listed with the reason and left out; the report is written
whatever some files hold. Nothing here runs or imports submission code.

Measured on a generated class of 500 submissions: docs/performance.md#similarity (scripts/similarity_bench.py)."""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

from grader import textscan
from grader.commands import grader_command
from grader.errors import UsageError
from grader.problem.spec import Implementation, Problem, SpecError, find_problem, load_problem

ROOT = Path(__file__).resolve().parents[2]

# Tuned on the generated class of scripts/similarity_bench.py and tests/test_similarity.py (the real correct designs
# of tests/data/problems/glu/correct/ and the staff solutions included): every planted copy there scores >= 0.6, no
# pair of independently written kernels reaches 0.4.
DEFAULT_THRESHOLD = 0.5
K = 15  # tokens per hashed run: the minimum match length (about two lines of kernel code)
W = 8  # winnowing window: every shared run of K + W - 1 = 22 tokens is found
MIN_MATCH_TOKENS = 80  # matched own tokens a pair needs on each side (about five lines), whatever its share
MAX_FILE_BYTES = 1 << 20  # a kernel source is a few kB; a file over 1 MiB is listed, not compared
MAX_TOKENS = 200_000  # tokens kept per file (1 MiB of dense code is fewer)
MAX_SHOWN_LINES = 600  # lines of a file shown in the report (pairs.csv and the scores use all of them)
MAX_SHOWN_LINE_CHARS = 240
MAX_DETAILED_PAIRS = 200  # pairs shown side by side per part; the rest are in the table and pairs.csv
MAX_TABLE_ROWS = 2000  # pairs listed in the report's table per part; all of them are in pairs.csv
PREFILTER = 0.25  # a pair's exact score is computed when its shared fingerprints reach this share of the threshold
HTML_NAME, CSV_NAME = "similarity.html", "pairs.csv"
STAFF_PREFIX, KNOWN_PREFIX = "staff:", "known:"


class SimilarityError(UsageError):
    """The check cannot run (bad arguments, no submissions): one line saying what is wrong and how to fix it."""


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


@dataclass
class Doc:
    """One file of one part: a submission's, or a staff solution's (staff=True)."""

    name: str  # the submission id, or staff:<problem>/<file>, known:<file>
    part: str
    path: str  # where it was read from, for the report
    text: str
    staff: bool
    lines: list[int]  # each token's line
    own: bytearray  # per token: 1 when no boilerplate run covers it
    fingerprints: dict[int, list[int]]  # non-boilerplate fingerprint hash -> its token positions
    keys: frozenset[int]
    n_own: int

    @property
    def tokens(self) -> int:
        return len(self.lines)


def make_doc(
    name: str, part: str, path: str, text: str, lang: str, vocab: Vocabulary, boiler: frozenset[int], staff: bool
) -> Doc:
    t = tokenize(text, lang)
    hashes = kgram_hashes(vocab.encode(t.kinds))
    own = bytearray(b"\x01") * len(t.kinds)
    for i, h in enumerate(hashes):
        if h in boiler:
            own[i : i + K] = bytes(len(own[i : i + K]))
    fps: dict[int, list[int]] = {}
    for p in winnow(hashes):
        h = hashes[p]
        if h not in boiler:
            fps.setdefault(h, []).append(p)
    return Doc(name, part, path, text, staff, t.lines, own, fps, frozenset(fps), sum(own))


def boilerplate(texts: Iterable[tuple[str, str]], vocab: Vocabulary) -> frozenset[int]:
    """Every K-token hash of what the class was given: (text, lang) pairs of code, each also read for the code in
    its comments and string literals (a stub's TODO that spells out the line to write is given code too)."""
    got: set[int] = set()
    for text, lang in texts:
        t = tokenize(text, lang, keep_texts=True)
        got.update(kgram_hashes(vocab.encode(t.kinds)))
        inner = tokenize("\n".join(t.texts), lang)
        got.update(kgram_hashes(vocab.encode(inner.kinds)))
    return frozenset(got)


def handout_code(markdown: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a handout (staff text): (code, lang) with lang "py" for python blocks, "c" for
    C/C++/CUDA ones, both for an untagged block; shell and other blocks are left out."""
    out: list[tuple[str, str]] = []
    block: list[str] | None = None
    tag = ""
    for ln in markdown.splitlines():
        s = ln.strip()
        if s.startswith("```"):
            if block is None:
                block, tag = [], s[3:].strip().lower()
            else:
                code = "\n".join(block)
                if tag in ("python", "py", ""):
                    out.append((code, "py"))
                if tag in ("c", "cpp", "c++", "cuda", "cu", ""):
                    out.append((code, "c"))
                block = None
            continue
        if block is not None:
            block.append(ln)
    return out


# -- pairs --------------------------------------------------------------------------------------------------------


@dataclass
class Pair:
    a: Doc
    b: Doc
    part: str
    similarity: float
    covered_a: int  # own tokens of a in shared runs
    covered_b: int
    lines_a: list[int]  # the lines of a with matched own tokens
    lines_b: list[int]
    group: int = 0  # the group (3 or more submissions linked by pairs) it belongs to; 0: none

    @property
    def staff(self) -> bool:
        return self.a.staff or self.b.staff


def _covered(d: Doc, shared: Iterable[int]) -> tuple[int, list[int]]:
    """(own tokens of d inside a shared fingerprint's run, their lines)."""
    mark = bytearray(d.tokens)
    for h in shared:
        for p in d.fingerprints[h]:
            mark[p : p + K] = b"\x01" * len(mark[p : p + K])
    idx = [i for i in range(d.tokens) if mark[i] and d.own[i]]
    return len(idx), sorted({d.lines[i] for i in idx})


def score(a: Doc, b: Doc) -> Pair | None:
    """The pair's score, or None when they share no fingerprint."""
    shared = a.keys & b.keys
    if not shared:
        return None
    ca, la = _covered(a, shared)
    cb, lb = _covered(b, shared)
    total = a.n_own + b.n_own
    return Pair(a, b, a.part, (ca + cb) / total if total else 0.0, ca, cb, la, lb)


def compare(docs: Sequence[Doc], threshold: float, min_tokens: int = MIN_MATCH_TOKENS) -> list[Pair]:
    """The pairs of docs (one part's) at or above the threshold with min_tokens matched on each side, most similar
    first; staff against staff is never compared. Every pair's shared fingerprints are counted (a frozenset
    intersection: 125k pairs of 500 files in about a second); the exact score only where that count can reach it."""
    got: list[Pair] = []
    live = [d for d in docs if d.keys]
    for i, a in enumerate(live):
        for b in live[i + 1 :]:
            if a.staff and b.staff:
                continue
            c = len(a.keys & b.keys)
            if not c or 2 * c < PREFILTER * threshold * (len(a.keys) + len(b.keys)):
                continue
            p = score(a, b)
            if p is not None and p.similarity >= threshold and min(p.covered_a, p.covered_b) >= min_tokens:
                if p.a.staff:  # a staff solution is named second
                    p.a, p.b, p.covered_a, p.covered_b, p.lines_a, p.lines_b = (
                        p.b,
                        p.a,
                        p.covered_b,
                        p.covered_a,
                        p.lines_b,
                        p.lines_a,
                    )
                got.append(p)
    got.sort(key=lambda p: (-p.similarity, p.a.name, p.b.name))
    return got


def groups(pairs: Sequence[Pair]) -> list[list[str]]:
    """Names linked by reported pairs (union-find), the components of three or more, largest first. Each pair in
    one gets its number (Pair.group, from 1)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        ra, rb = root(p.a.name), root(p.b.name)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    comps: dict[str, list[str]] = {}
    for x in list(parent):
        comps.setdefault(root(x), []).append(x)
    big = sorted((sorted(c) for c in comps.values() if len(c) >= 3), key=lambda c: (-len(c), c))
    number = {x: n for n, c in enumerate(big, 1) for x in c}
    for p in pairs:
        p.group = number.get(p.a.name, 0)
    return big


def line_ranges(lines: Sequence[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    out: list[str] = []
    start = prev = None
    for x in lines:
        if prev is not None and x == prev + 1:
            prev = x
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = x
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


# -- reading the class --------------------------------------------------------------------------------------------


@dataclass
class Skipped:
    name: str
    part: str
    path: str
    why: str


def read_source(path: Path, limit: int = MAX_FILE_BYTES) -> tuple[str | None, str]:
    """(the file's text, "") or (None, why it is left out). Never follows a link, never opens a device or a pipe
    (O_NOFOLLOW | O_NONBLOCK, then fstat), reads at most limit + 1 bytes, and wants UTF-8 text without NUL bytes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"cannot be read ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return None, "a link (not followed)"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        return None, f"cannot be read ({e.strerror or e})"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None, "not a regular file"
        try:
            data = f.read(limit + 1)
        except OSError as e:
            return None, f"cannot be read ({e.strerror or e})"
    if len(data) > limit:
        return None, f"over {limit >> 10} KiB (a kernel source is a few kB): not compared; read it by hand"
    if not data.strip():
        return None, "empty"
    if b"\0" in data:
        return None, "binary (holds NUL bytes), not source code"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text (bad byte at offset {e.start}): save it as UTF-8 to compare it"
    return text, ""


@dataclass
class Submission:
    name: str
    folder: Path


def find_submissions(src: Path, problem: Problem) -> tuple[list[Submission], str, list[Skipped]]:
    """(the submissions, what src is, those that cannot be read). src: a batch's OUT (its manifest names each
    submission's graded folder) or a folder of submissions the batch would take (per-student folders or a
    Gradescope export folder: grader/batch/discover.py, the same ids)."""
    from grader.batch import discover, state

    if (state.batch_dir(src) / "manifest.json").is_file():
        try:
            m = state.read_manifest(src)
        except (OSError, ValueError) as e:
            raise SimilarityError(f"{src}: its batch manifest cannot be read ({e})") from None
        subs, gone = [], []
        for it in m.get("items", []):
            if not isinstance(it, dict) or not isinstance(it.get("sid"), str) or not isinstance(it.get("path"), str):
                continue
            folder = Path(it["path"])
            if folder.is_dir():
                subs.append(Submission(it["sid"], folder))
            else:
                gone.append(Skipped(it["sid"], "*", str(folder), "its submission folder is gone (batch inputs)"))
        if not subs and gone:
            raise SimilarityError(
                f"{src}: none of the batch's {len(gone)} submission folders is still there (the first was "
                f"{gone[0].path}): run `{grader_command('similarity', f'SUBMISSIONS --out {src}')}` on the "
                "class's files"
            )
        return subs, "batch", gone
    if not src.is_dir():
        raise SimilarityError(
            f"{src}: not a folder (pass a batch's OUT or a folder with one folder of files per student; unzip a "
            "Gradescope export first)"
        )
    files = tuple(i.file for i in problem.student_implementations.values())
    try:
        found = discover.discover(src, files, src / ".similarity-unused")
    except discover.DiscoverError as e:
        raise SimilarityError(str(e)) from None
    return [Submission(it.sid, it.path) for it in found.items], found.kind, []


def staff_files(problem: Problem, impl: Implementation) -> list[Path]:
    """The staff solutions of every implementation of this part's kind (a staff-only row like gelu's naive CUDA
    kernel included: the lecture's code is a known source too), that are on this machine."""
    got = []
    for other in problem.implementations.values():
        if other.kind == impl.kind and other.staff.is_file() and other.staff not in got:
            got.append(other.staff)
    return got


# -- the run ------------------------------------------------------------------------------------------------------


@dataclass
class PartResult:
    part: str
    file: str
    compared: int  # submissions' files compared
    stub_only: int  # of those, files with no code of their own (the stub, or the handout's code)
    staff: list[str]
    pairs: list[Pair]
    groups: list[list[str]]


@dataclass
class Result:
    source: Path
    kind: str
    problem: Problem
    threshold: float
    parts: list[PartResult]
    skipped: list[Skipped]
    submissions: int
    seconds: float = 0.0


def run_check(
    src: Path,
    problem: Problem,
    threshold: float = DEFAULT_THRESHOLD,
    known: Sequence[Path] = (),
    root: Path = ROOT,
    min_tokens: int = MIN_MATCH_TOKENS,
) -> Result:
    """Compare every pair of src's submissions per part. Raises SimilarityError when src holds no submission."""
    t0 = time.monotonic()
    subs, kind, skipped = find_submissions(src, problem)
    if not subs:
        raise SimilarityError(f"{src}: no submissions found (one folder of files per student)")
    handout = root / problem.handout if problem.handout else None
    given = handout_code(read_source(handout)[0] or "") if handout is not None else []
    parts: list[PartResult] = []
    for pname, impl in problem.student_implementations.items():
        lang = lang_of(impl.file)
        vocab = Vocabulary()
        stub_text, _ = read_source(root / problem.stubs / impl.file)
        given_here = [(c, lg) for c, lg in given if lg == lang]
        boiler = boilerplate(([(stub_text, lang)] if stub_text else []) + given_here, vocab)
        docs: list[Doc] = []
        stub_only = 0
        for s in subs:
            path = s.folder / impl.file
            text, why = read_source(path)
            if text is None:
                skipped.append(Skipped(s.name, pname, str(path), why))
                continue
            d = make_doc(s.name, pname, str(path), text, lang, vocab, boiler, staff=False)
            if not d.tokens:
                skipped.append(Skipped(s.name, pname, str(path), "no code (comments or blank lines only)"))
                continue
            stub_only += not d.keys
            docs.append(d)
        staff_names = []
        for p in [*staff_files(problem, impl), *(k for k in known if lang_of(k.name) == lang)]:
            text, why = read_source(p)
            is_staff = p.parent == problem.path.parent
            name = f"{STAFF_PREFIX}{problem.name}/{p.name}" if is_staff else f"{KNOWN_PREFIX}{p.name}"
            if text is None:
                skipped.append(Skipped(name, pname, str(p), why))
                continue
            docs.append(make_doc(name, pname, str(p), text, lang, vocab, boiler, staff=True))
            staff_names.append(name)
        compared = sum(1 for d in docs if not d.staff)
        pairs = compare(docs, threshold, min_tokens)
        parts.append(PartResult(pname, impl.file, compared, stub_only, staff_names, pairs, groups(pairs)))
    skipped = [x for x in skipped if x.why != "missing"] + [x for x in skipped if x.why == "missing"]
    return Result(src, kind, problem, threshold, parts, skipped, len(subs), time.monotonic() - t0)


# -- output -------------------------------------------------------------------------------------------------------


def pairs_csv(result: Result) -> str:
    """pairs.csv: one row per reported pair, most similar first within each part; every cell formula-safe."""
    from grader.report.cells import csv_text

    rows: list[list[object]] = [
        ["submission_a", "submission_b", "part", "similarity", "lines_a", "lines_b", "staff", "group"]
    ]
    for part in result.parts:
        for p in part.pairs:
            rows.append(
                [
                    p.a.name,
                    p.b.name,
                    p.part,
                    f"{p.similarity:.3f}",
                    line_ranges(p.lines_a),
                    line_ranges(p.lines_b),
                    "yes" if p.staff else "",
                    p.group or "",
                ]
            )
    return csv_text(rows)


@dataclass
class ShownLine:
    number: int
    text: str
    matched: bool


@dataclass
class ShownFile:
    name: str
    path: str
    lines: list[ShownLine]
    cut: int  # lines left out at the end


def shown(d: Doc, matched: Iterable[int]) -> ShownFile:
    marks = set(matched)
    all_lines = d.text.splitlines()
    lines = [
        ShownLine(
            n,
            t[:MAX_SHOWN_LINE_CHARS] + (" ..." if len(t) > MAX_SHOWN_LINE_CHARS else ""),
            n in marks,
        )
        for n, t in enumerate(all_lines[:MAX_SHOWN_LINES], 1)
    ]
    return ShownFile(d.name, d.path, lines, max(0, len(all_lines) - MAX_SHOWN_LINES))


def render_html(result: Result, out: Path) -> str:
    from grader.report import html

    views = []
    for part in result.parts:
        members = []
        for n, g in enumerate(part.groups, 1):
            inside = [p for p in part.pairs if p.group == n]
            docs = {p.a.name: p.a for p in inside} | {p.b.name: p.b for p in inside}
            matched: dict[str, set[int]] = {}
            for p in inside:
                matched.setdefault(p.a.name, set()).update(p.lines_a)
                matched.setdefault(p.b.name, set()).update(p.lines_b)
            members.append(
                {
                    "number": n,
                    "names": g,
                    "pairs": inside,
                    "files": [shown(docs[x], matched.get(x, ())) for x in g],
                    "top": max(p.similarity for p in inside),
                }
            )
        detailed = [p for p in part.pairs if not p.group][:MAX_DETAILED_PAIRS]
        views.append(
            {
                "part": part,
                "groups": members,
                "detailed": [(p, shown(p.a, p.lines_a), shown(p.b, p.lines_b)) for p in detailed],
                "not_detailed": len([p for p in part.pairs if not p.group]) - len(detailed),
            }
        )
    total = sum(len(p.pairs) for p in result.parts)
    page = {
        "title": f"Similarity: {total} pair(s) at or above {result.threshold:g}",
        "result": result,
        "views": views,
        "ranges": line_ranges,
        "class_summary": (out / "class_summary.html").is_file(),
        "k": K,
        "w": W,
        "min_tokens": MIN_MATCH_TOKENS,
        "max_rows": MAX_TABLE_ROWS,
    }
    return html.environment().get_template("similarity.html.j2").render(page=page)


def write(result: Result, out: Path) -> tuple[Path, Path]:
    from grader.report import write_text_atomic

    csv_path, html_path = out / CSV_NAME, out / HTML_NAME
    write_text_atomic(csv_path, pairs_csv(result))
    write_text_atomic(html_path, render_html(result, out))
    return csv_path, html_path


# -- command line -------------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        type=Path,
        metavar="DIR",
        help="a batch's OUT (its manifest names each submission's folder) or a folder of submissions (one folder "
        "per student, or a Gradescope export folder)",
    )
    p.add_argument("--out", type=Path, default=None, help=f"where {HTML_NAME} and {CSV_NAME} go (default: DIR)")
    p.add_argument(
        "--problem",
        default=None,
        metavar="NAME",
        help="the problem (a name under reference/, or a spec.yaml); default: the batch's, else the default problem",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        metavar="T",
        help=f"report pairs whose similarity (0-1, the share of both files' own code in shared runs) is at least T "
        f"(default {DEFAULT_THRESHOLD})",
    )
    p.add_argument(
        "--known",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="another known source to compare every submission with (last year's solutions, a published kernel): "
        "named known:<file>, its part by its suffix (.py, .cu); repeatable. The staff solutions are always known "
        "sources",
    )


def _problem_of(src: Path, name: str | None, root: Path) -> Problem:
    if name is None:
        from grader.batch import state

        try:
            spec = state.read_manifest(src).get("options", {}).get("problem")
        except (OSError, ValueError):
            spec = None
        name = spec if isinstance(spec, str) and Path(spec).is_file() else None
    return load_problem(find_problem(name, root))


def main(args: argparse.Namespace, root: Path = ROOT) -> int:
    """`similarity DIR`: exit 0 with the report written (whatever it found), 2 when it cannot run."""
    src: Path = args.dir
    out: Path = args.out or src
    try:
        if not 0.0 < args.threshold <= 1.0:
            raise SimilarityError(f"--threshold {args.threshold:g}: want a share between 0 and 1, e.g. 0.5")
        for k in args.known:
            if not k.is_file() or lang_of(k.name) == "c" and not k.name.endswith((".cu", ".cuh", ".cpp", ".c", ".h")):
                raise SimilarityError(f"--known {k}: want a .py or .cu file that exists")
        if not src.exists():
            raise SimilarityError(f"{src}: no such folder (pass a batch's OUT or a folder of submissions)")
        problem = _problem_of(src, args.problem, root)
        result = run_check(src, problem, args.threshold, tuple(args.known), root)
        out.mkdir(parents=True, exist_ok=True)
        csv_path, html_path = write(result, out)
    except SpecError as e:
        print(f"grader error: {e}", file=sys.stderr)
        return 2
    except SimilarityError as e:
        print(f"grader error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"grader error: cannot write to {out}: {e.strerror or e} (pass --out DIR)", file=sys.stderr)
        return 2
    for part in result.parts:
        staff = sum(1 for p in part.pairs if p.staff)
        print(
            f"{part.part} ({part.file}): {part.compared} file(s) compared, {len(part.pairs)} pair(s) at or above "
            f"{result.threshold:g} ({staff} with a staff or known solution), {len(part.groups)} group(s) of 3+"
        )
    bad = [s for s in result.skipped if s.why != "missing"]
    if bad:
        print(
            f"{len(bad)} file(s) not compared (listed in the report): "
            + "; ".join(f"{s.name} {s.part}: {s.why}" for s in bad[:3])
            + (" ..." if len(bad) > 3 else "")
        )
    print(f"written: {csv_path} and {html_path} ({result.seconds:.1f} s)")
    print("a match is evidence for a TA to read, never a penalty by itself (README, 'Similar submissions')")
    summary = out / "class_summary.html"
    if summary.is_file() and HTML_NAME not in (textscan.read_capped(summary, 16 << 20)[0]):
        print(f"run `{grader_command('report', str(out))}` again to link it from class_summary.html")
    return 0
