"""The scores of `python -m grader similarity`: each file of a part as a Doc (its own fingerprints and statements,
less the boilerplate the class was given), weighted by how rare each run is in the class (Rarity), and every pair's
similarity, flag and reason (`compare`), with the groups of pairwise-flagged files (`groups`). The method:
docs/architecture.md ("The similarity check").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from grader.report import simnorm
from grader.report.simtokens import K, Vocabulary, kgram_hashes, normalize, tokenize, winnow

MIN_MATCH_TOKENS = 60  # own tokens matched (rarity-weighted) a pair needs on each side, whatever its share
PREFILTER = 0.7  # a pair's exact score is computed when its shared sets reach this share of the threshold
MIN_RUN = (
    2 * K
)  # own tokens in a row a shared run needs to count: shorter ones are what two kernels of one design share
MIN_STMT_TOKENS = 8  # statements shorter than this (`return y`, `}`, `i += step;`) are no evidence alone
RARE_MIN, RARE_SHARE, COMMON_SHARE = 3, 0.1, 0.5  # Rarity's weights: full up to max(3, 10%), none from 50%
OUTLIER_MIN_FILES = 10  # a class this large is its own baseline; a smaller one is read by the threshold alone
OUTLIER_MIN = 3.0  # robust deviations above the class's median pair a flagged pair needs
MIN_SPREAD = 0.05


# -- files -------------------------------------------------------------------------------------------------------


@dataclass
class Doc:
    """One file of one part: a submission's, or a staff solution's (staff=True)."""

    name: str  # the submission id, or staff:<problem>/<file>, known:<file>
    part: str
    path: str  # where it was read from, for the report
    text: str
    staff: bool
    lines: list[int]  # each normalised token's line
    own: bytearray  # per token: 1 when no boilerplate run covers it
    fingerprints: dict[int, list[int]]  # non-boilerplate fingerprint hash -> its token positions
    keys: frozenset[int]
    n_own: int
    stmt_len: dict[int, int]  # own statement hash -> its tokens (summed over repeats)
    stmt_lines: dict[int, list[int]]  # own statement hash -> its lines
    skeys: frozenset[int]
    n_stmt: int  # tokens in own statements
    how: str = ""
    hashes: list[int] = field(default_factory=list)  # every K-token run's hash, at its first token
    weight: list[float] = field(default_factory=list)  # per token: its rarity in the class (Rarity.apply), 0-1
    cum_weight: list[float] = field(default_factory=list)  # prefix sums of the own tokens' weights
    w_own: float = 0.0  # own tokens, weighted
    w_stmt: float = 0.0  # own statements' tokens, weighted

    @property
    def tokens(self) -> int:
        return len(self.lines)


def make_doc(
    name: str,
    part: str,
    path: str,
    text: str,
    lang: str,
    vocab: Vocabulary,
    boiler: Boilerplate,
    staff: bool,
    normal: simnorm.Normal | None = None,
) -> Doc:
    t = normal if normal is not None else normalize(text, lang)
    ids = vocab.encode(t.kinds)
    hashes = kgram_hashes(ids)
    own = bytearray(b"\x01") * len(t.kinds)
    for i, h in enumerate(hashes):
        if h in boiler.kgrams:
            own[i : i + K] = bytes(len(own[i : i + K]))
    fps: dict[int, list[int]] = {}
    for p in winnow(hashes):
        h = hashes[p]
        if h not in boiler.kgrams:
            fps.setdefault(h, []).append(p)
    slen: dict[int, int] = {}
    slines: dict[int, list[int]] = {}
    for a, b in t.stmts:
        if b - a < MIN_STMT_TOKENS:
            continue
        h = hash(tuple(ids[a:b]))
        if h in boiler.stmts or sum(own[a:b]) * 2 < b - a:
            continue
        slen[h] = slen.get(h, 0) + (b - a)
        slines.setdefault(h, []).extend(sorted(set(t.lines[a:b])))
    d = Doc(
        name, part, path, text, staff, t.lines, own, fps, frozenset(fps), sum(own), slen, slines,
        frozenset(slen), sum(slen.values()), t.how, hashes,
    )  # fmt: skip
    Rarity(0, {}, {}).apply(d)
    return d


@dataclass
class Boilerplate:
    kgrams: frozenset[int]
    stmts: frozenset[int]


def boilerplate(texts: Iterable[tuple[str, str]], vocab: Vocabulary) -> Boilerplate:
    """Every K-token hash and statement of what the class was given: (text, lang) pairs of code, each also read
    for the code in its comments and string literals (a stub's TODO that spells out the line to write is given code
    too). Normalised as the submissions are."""
    grams: set[int] = set()
    stmts: set[int] = set()
    for text, lang in texts:
        inner = "\n".join(tokenize(text, lang, keep_texts=True).texts)
        for code in (text, inner):
            n = normalize(code, lang)
            ids = vocab.encode(n.kinds)
            grams.update(kgram_hashes(ids))
            stmts.update(hash(tuple(ids[a:b])) for a, b in n.stmts)
    return Boilerplate(frozenset(grams), frozenset(stmts))


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


# -- rarity -------------------------------------------------------------------------------------------------------


@dataclass
class Rarity:
    """How many files of the part hold each K-token run and statement, and the weight that gives it: 1 while at
    most max(RARE_MIN, RARE_SHARE * files) hold it, falling to 0 at COMMON_SHARE of the class (MOSS's document
    frequency: what much of the class wrote is the obvious kernel, not a copy). A token weighs as its commonest run.
    Both sides of a share are weighted: a verbatim copy covers all of its file's weight, however common its code;
    two honest files that share only the obvious kernel cover little of theirs."""

    files: int
    kgram: dict[int, float]  # weight of the runs under 1 (the rest weigh 1)
    stmt: dict[int, float]

    @staticmethod
    def of(docs: Sequence[Doc]) -> Rarity:
        n = len(docs)
        full = max(RARE_MIN, RARE_SHARE * n)
        zero = max(full + 1, COMMON_SHARE * n)

        def weights(counts: dict[int, int]) -> dict[int, float]:
            return {h: max(0.0, (zero - c) / (zero - full)) for h, c in counts.items() if c > full}

        kc: dict[int, int] = {}
        stc: dict[int, int] = {}
        for d in docs:
            for h in set(d.hashes):
                kc[h] = kc.get(h, 0) + 1
            for h in d.skeys:
                stc[h] = stc.get(h, 0) + 1
        rare = Rarity(n, weights(kc), weights(stc))
        for d in docs:
            rare.apply(d)
        return rare

    def apply(self, d: Doc) -> None:
        """d's per-token weights and weighted totals."""
        w = [1.0] * d.tokens
        for j, h in enumerate(d.hashes):
            x = self.kgram.get(h)
            if x is not None:
                for i in range(j, min(j + K, d.tokens)):
                    if x < w[i]:
                        w[i] = x
        d.weight = w
        cum = [0.0]
        for x, o in zip(w, d.own, strict=True):
            cum.append(cum[-1] + (x if o else 0.0))
        d.cum_weight = cum
        d.w_own = cum[-1]
        d.w_stmt = sum(self.stmt.get(h, 1.0) * n for h, n in d.stmt_len.items())


# -- pairs --------------------------------------------------------------------------------------------------------


@dataclass
class Side:
    """What one file of a pair shares with the other."""

    runs: float  # share of its own tokens inside shared runs (weighted by rarity)
    statements: float  # share of its own statements' tokens the other has too, in any order (weighted)
    longest: int  # the longest run of its own tokens inside shared runs
    longest_lines: tuple[int, int]

    @property
    def coverage(self) -> float:
        return max(self.runs, self.statements)


@dataclass
class Pair:
    a: Doc
    b: Doc
    part: str
    similarity: float
    covered_a: int  # own tokens of a in shared runs or shared statements
    covered_b: int
    lines_a: list[int]  # the lines of a with matched own tokens
    lines_b: list[int]
    side_a: Side | None = None
    side_b: Side | None = None
    outlier: float = 0.0  # how far above the class's typical nearest neighbour, in robust deviations
    reason: str = ""
    group: int = 0  # the clique (3 or more submissions, every two of them a pair) it belongs to; 0: none

    @property
    def staff(self) -> bool:
        return self.a.staff or self.b.staff

    def swap(self) -> None:
        self.a, self.b, self.covered_a, self.covered_b = self.b, self.a, self.covered_b, self.covered_a
        self.lines_a, self.lines_b, self.side_a, self.side_b = self.lines_b, self.lines_a, self.side_b, self.side_a


_RUNS = re.compile(rb"\x01+")  # one repeated byte: cannot backtrack


def _side(d: Doc, shared: AbstractSet[int], sshared: AbstractSet[int], rare: Rarity) -> tuple[Side, int, list[int]]:
    """(the Side of d, its own tokens matched (weighted), their lines)."""
    n = len(d.lines)
    mark = bytearray(n)
    fps = d.fingerprints
    for h in shared:
        for p in fps[h]:
            mark[p : p + K] = b"\x01" * len(mark[p : p + K])
    both = (int.from_bytes(mark, "big") & int.from_bytes(d.own, "big")).to_bytes(n, "big") if n else b""
    cum, lines = d.cum_weight, d.lines
    weighted = 0.0
    best = best_end = 0
    matched: set[int] = set()
    for m in _RUNS.finditer(both):
        a, b = m.span()
        if b - a > best:
            best, best_end = b - a, b - 1
        if b - a >= MIN_RUN:  # a shared run shorter than MIN_RUN is what any two kernels of a design share
            weighted += cum[b] - cum[a]
            matched.update(lines[a:b])
    runs = weighted / d.w_own if d.w_own > 0 else 0.0
    st = 0.0
    n_matched = weighted
    if sshared and d.w_stmt > 0:
        ws = sum(rare.stmt.get(h, 1.0) * d.stmt_len[h] for h in sshared)
        st = ws / d.w_stmt
        for h in sshared:
            matched.update(d.stmt_lines[h])
        n_matched = max(n_matched, ws)
    span = (lines[best_end - best + 1], lines[best_end]) if best else (0, 0)
    return Side(min(runs, 1.0), min(st, 1.0), best, span), round(n_matched), sorted(matched)


def combine(ca: float, na: float, cb: float, nb: float) -> float:
    """A pair's similarity from its sides' coverage: the mean of the both-sides share (Dolos's measure, over both
    files' own tokens) and the larger side's (a copy padded with dead code, or half a file copied, still covers
    most of one side)."""
    both = (ca * na + cb * nb) / (na + nb) if na + nb else 0.0
    return (both + max(ca, cb)) / 2


def score(a: Doc, b: Doc, rare: Rarity | None = None) -> Pair | None:
    """The pair's score, or None when they share no fingerprint and no statement."""
    rare = rare or Rarity(0, {}, {})
    shared = a.keys & b.keys
    sshared = a.skeys & b.skeys
    if not shared and not sshared:
        return None
    sa, ca, la = _side(a, shared, sshared, rare)
    sb, cb, lb = _side(b, shared, sshared, rare)
    sim = combine(sa.coverage, a.w_own, sb.coverage, b.w_own)
    return Pair(a, b, a.part, sim, ca, cb, la, lb, sa, sb)


def _estimate(a: Doc, b: Doc) -> float:
    """An upper-ish bound of the pair's coverage from set sizes alone: the larger share of either file's
    fingerprints or statements the other has."""
    best = 0.0
    c = len(a.keys & b.keys)
    if c:
        best = c / min(len(a.keys), len(b.keys))
    if a.skeys and b.skeys:
        s = len(a.skeys & b.skeys)
        if s:
            best = max(best, s / min(len(a.skeys), len(b.skeys)))
    return best


def compare(
    docs: Sequence[Doc],
    threshold: float,
    min_tokens: int = MIN_MATCH_TOKENS,
    rare: Rarity | None = None,
    scored_out: list[Pair] | None = None,
) -> list[Pair]:
    """The pairs of docs (one part's) flagged: similarity at or above the threshold, min_tokens matched on each
    side and, in a class of OUTLIER_MIN_FILES or more, an outlier among the class's pairs (OUTLIER_MIN robust
    deviations above their median: baseline). Most similar first; staff against staff is never compared.
    The exact score is computed only where the set sizes allow it to reach a share of the threshold."""
    rare = rare or Rarity.of(docs)
    live = [d for d in docs if d.keys or d.skeys]
    scored: list[Pair] = []
    among = [p for p in live if not p.staff]
    for i, a in enumerate(live):
        for b in live[i + 1 :]:
            if a.staff and b.staff:
                continue
            if _estimate(a, b) < PREFILTER * threshold:
                continue
            p = score(a, b, rare)
            if p is not None:
                scored.append(p)
    n_pairs = len(among) * (len(among) - 1) // 2
    sims = [p.similarity for p in scored if not p.staff]
    med, spread = baseline(sims, n_pairs - len(sims))
    use_outlier = len(among) >= OUTLIER_MIN_FILES
    if scored_out is not None:
        scored_out.extend(scored)
    got: list[Pair] = []
    for p in scored:
        p.outlier = (p.similarity - med) / spread
        if p.similarity < threshold or min(p.covered_a, p.covered_b) < min_tokens:
            continue
        if use_outlier and p.outlier < OUTLIER_MIN:
            continue
        if p.a.staff:  # a staff solution is named second
            p.swap()
        p.reason = reason(p, med, use_outlier)
        got.append(p)
    got.sort(key=lambda p: (-p.similarity, p.a.name, p.b.name))
    return got


def baseline(sims: Sequence[float], unscored: int = 0) -> tuple[float, float]:
    """(median, robust spread) of the similarity of every pair of the class's submissions (`unscored` more pairs,
    too unlike to be scored, count as 0): 1.4826 x their median absolute deviation, at least MIN_SPREAD. In a
    class whose kernels are all alike the median is high, and a pair must stand out from it to be flagged."""
    xs = sorted([0.0] * max(0, unscored) + list(sims))
    if not xs:
        return 0.0, MIN_SPREAD

    def median(v: list[float]) -> float:
        n = len(v)
        return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

    med = median(xs)
    mad = median(sorted(abs(x - med) for x in xs))
    return med, max(1.4826 * mad, MIN_SPREAD)


def reason(p: Pair, med: float, outlier: bool) -> str:
    """Why the pair is flagged, in one sentence for the report."""
    assert p.side_a is not None and p.side_b is not None
    parts = []
    for who, s in ((p.a.name, p.side_a), (p.b.name, p.side_b)):
        how = "in shared runs" if s.runs >= s.statements else "as the same statements, in any order"
        parts.append(f"{s.coverage:.0%} of {who}'s own code {how}")
    longest = max(p.side_a.longest, p.side_b.longest)
    la, lb = p.side_a.longest_lines, p.side_b.longest_lines
    text = (
        f"{'; '.join(parts)} (rarity-weighted: what much of the class wrote counts less); the longest shared run is "
        f"{longest} tokens (lines {la[0]}-{la[1]} and {lb[0]}-{lb[1]})"
    )
    if outlier:
        text += f"; {p.outlier:.1f} robust deviations above the class's median pair ({med:.2f})"
    return text + "."


def groups(pairs: Sequence[Pair]) -> list[list[str]]:
    """Cliques of three or more names, every two of them a reported pair, found greedily (the strongest pair
    first, then every name paired with all members, strongest first): no group links two files that are not a pair
    themselves. Each pair inside one gets its number (Pair.group, from 1); largest first."""
    adj: dict[str, dict[str, float]] = {}
    for p in pairs:
        adj.setdefault(p.a.name, {})[p.b.name] = p.similarity
        adj.setdefault(p.b.name, {})[p.a.name] = p.similarity
    used: set[str] = set()
    cliques: list[list[str]] = []
    for p in pairs:  # most similar first
        if p.a.name in used or p.b.name in used:
            continue
        members = [p.a.name, p.b.name]
        cands = sorted(
            (x for x in adj[p.a.name] if x not in used and x not in members),
            key=lambda x: -adj[p.a.name][x],
        )
        for x in cands:
            if all(x in adj[m] for m in members):
                members.append(x)
        if len(members) >= 3:
            cliques.append(sorted(members))
            used.update(members)
    cliques.sort(key=lambda c: (-len(c), c))
    number = {x: n for n, c in enumerate(cliques, 1) for x in c}
    for p in pairs:
        na, nb = number.get(p.a.name, 0), number.get(p.b.name, 0)
        p.group = na if na and na == nb else 0
    return cliques


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
