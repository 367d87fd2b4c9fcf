"""Reading and scanning text a submission influenced, in the trusted parent, in bounded memory and linear time.

Everything here is hostile input: it is size-capped *before* it is read, and parsed in linear time.

Why: docs/SECURITY.md, "Modules: the why", grader/textscan.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple


def cut_note(limit: int) -> str:
    """The line a report carries when a text was cut at its cap."""
    return f"[output cut at {limit} bytes]"


def cut_at_word(text: str, limit: int) -> str:
    """`text` whole when it has at most `limit` characters; else cut at the last whitespace at or before `limit`
    (never inside a word: a student reads every word it keeps whole), with a note of how much was left out. Only a
    single word longer than half the cap (no whitespace to cut at: hostile or binary output) is cut inside itself,
    and the note says so. Linear: three rfinds over at most `limit` characters each."""
    if len(text) <= limit:
        return text
    at = text.rfind(" ", 0, limit + 1)
    at = max(at, text.rfind("\n", 0, limit + 1), text.rfind("\t", 0, limit + 1))
    inside = at < limit // 2
    kept = (text[:limit] if inside else text[:at]).rstrip()
    left = len(text) - len(kept)
    return kept + f" [... {left} more characters{' (cut inside a word)' if inside else ''}]"


# -- reading with a cap -------------------------------------------------------------------------------------------


def read_capped_bytes(path: Path | str, limit: int) -> tuple[bytes, bool]:
    """(at most `limit` bytes of the file, True when it had more). Never reads more than limit + 1 bytes: the size
    on disk is not trusted (the file may still be growing, or be a device)."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    return data[:limit], len(data) > limit


def read_capped(path: Path | str, limit: int) -> tuple[str, bool]:
    """(the file's first `limit` bytes decoded as UTF-8, bad bytes replaced; True when it had more)."""
    data, truncated = read_capped_bytes(path, limit)
    return data.decode("utf-8", errors="replace"), truncated


# -- C/C++/CUDA comments and literals ------------------------------------------------------------------------------


class Span(NamedTuple):
    """A comment (comment=True) or a string/character literal in a source text: src[start:end]."""

    start: int
    end: int
    comment: bool


# Single characters or one fixed class each: a search for them cannot backtrack.
_INTERESTING = re.compile(r"[/\"']")
_IN_STRING = {'"': re.compile(r'["\\\n]'), "'": re.compile(r"['\\\n]")}
_RAW_PREFIXES = ("u8R", "LR", "uR", "UR", "R")
_RAW_DELIM_MAX = 16  # the C++ standard's limit on a raw string's delimiter


def _ident(c: str) -> bool:
    return c.isalnum() or c == "_"


def _line_comment_end(src: str, i: int) -> int:
    """The end of a // comment starting at i: the next newline not spliced by a backslash (C's phase 2 joins a line
    ending in a backslash to the next, comment included). The newline itself is not part of the comment."""
    n = len(src)
    while True:
        j = src.find("\n", i)
        if j < 0:
            return n
        k = j - 1
        if k >= 0 and src[k] == "\r":
            k -= 1
        if k >= 0 and src[k] == "\\":
            i = j + 1
            continue
        return j


def _quoted_end(src: str, i: int, quote: str) -> int:
    """The end of the string or character literal whose opening quote is at i: after its closing quote, or at the
    end of the line when it is not closed (the compiler rejects that; the scan just stops there)."""
    find = _IN_STRING[quote]
    j = i + 1
    while True:
        m = find.search(src, j)
        if m is None:
            return len(src)
        c = m.group()
        if c == quote:
            return m.end()
        if c == "\n":
            return m.start()
        j = m.end() + 1  # a backslash: skip the character it escapes (a spliced newline included)


def _raw_prefix(src: str, i: int) -> bool:
    """Whether the '"' at i opens a raw string: R"...( with a prefix that is a whole token (not `FOOR"`)."""
    for p in _RAW_PREFIXES:
        s = i - len(p)
        if s >= 0 and src.startswith(p, s) and (s == 0 or not _ident(src[s - 1])):
            return True
    return False


def _raw_end(src: str, i: int) -> int | None:
    """The end of the raw string whose '"' is at i, or None when what follows is not a valid delimiter."""
    j = src.find("(", i + 1, i + 2 + _RAW_DELIM_MAX)
    if j < 0:
        return None
    delim = src[i + 1 : j]
    if any(c in delim for c in ' ()\\\t\v\f\n"'):
        return None
    k = src.find(")" + delim + '"', j + 1)
    return len(src) if k < 0 else k + len(delim) + 2


def literal_spans(src: str) -> list[Span]:
    """Every comment and string/character literal of a C, C++ or CUDA source, in order, in one linear pass.

    Follows the compiler where a plain regex does not: a quote inside a comment or a comment marker inside a string
    opens nothing; `//` comments continue over a backslash-newline; C++11 raw strings (R"x(...)x") end only at their
    delimiter; a quote inside a number is a C++14 digit separator (1'000'000), not a character literal. An
    unterminated block comment or raw string runs to the end of the text."""
    spans: list[Span] = []
    n = len(src)
    pos = 0
    # For digit separators: the start of the identifier/number token that ends just before the current position,
    # found by scanning back no further than `floor` (the end of the previous thing handled), so the back-scans
    # together cover each character at most once. `number_at` is where the last separator quote was seen.
    floor = 0
    number_at = -2
    while pos < n:
        m = _INTERESTING.search(src, pos)
        if m is None:
            break
        i = m.start()
        c = src[i]
        if c == "/":
            nxt = src[i + 1 : i + 2]
            if nxt == "/":
                end = _line_comment_end(src, i + 2)
                spans.append(Span(i, end, True))
            elif nxt == "*":
                k = src.find("*/", i + 2)
                end = n if k < 0 else k + 2
                spans.append(Span(i, end, True))
            else:
                end = i + 1
        elif c == "'":
            if _digit_separator(src, i, floor, number_at):
                number_at = i
                end = i + 1
            else:
                end = _quoted_end(src, i, "'")
                spans.append(Span(i, end, False))
        else:  # '"'
            raw = _raw_end(src, i) if _raw_prefix(src, i) else None
            end = raw if raw is not None else _quoted_end(src, i, '"')
            spans.append(Span(i, end, False))
        pos = floor = max(end, i + 1)
    return spans


def _digit_separator(src: str, i: int, floor: int, number_at: int) -> bool:
    """Whether the quote at i sits inside a number (a pp-number: a digit, or '.' and a digit, then letters, digits,
    '_', '.' and separators). Scans back over the token no further than `floor`; a token that reaches back to the
    separator quote at `number_at` is the rest of that number."""
    j = i
    while j > floor and (_ident(src[j - 1]) or src[j - 1] == "."):
        j -= 1
    if j == i:
        return False  # nothing before the quote: L'x', u8'x' and plain 'x' all have a letter or nothing here
    if j == floor and floor == number_at + 1:
        return True
    return src[j].isdigit() or (src[j] == "." and j + 1 < i and src[j + 1].isdigit())


def _blank(segment: str) -> str:
    """Spaces for every character but newlines (line numbers stay right)."""
    return "\n".join(" " * len(part) for part in segment.split("\n"))


def strip_comments(src: str, *, literals: bool = True) -> str:
    """The source with every comment (and, with literals=True, every string and character literal) replaced by
    spaces, newlines kept: the same length and the same line numbers as `src`, offsets unchanged."""
    out: list[str] = []
    pos = 0
    for s in literal_spans(src):
        if not s.comment and not literals:
            continue
        out.append(src[pos : s.start])
        out.append(_blank(src[s.start : s.end]))
        pos = s.end
    out.append(src[pos:])
    return "".join(out)


def code_mask(src: str) -> bytearray:
    """For each character of `src`: 1 when it is code, 0 when it is in a comment or a string/character literal."""
    mask = bytearray(b"\x01") * len(src)
    for s in literal_spans(src):
        mask[s.start : s.end] = bytes(s.end - s.start)
    return mask
