"""A folder's entries, walked without recursion, links not followed, to a depth and a count.

Path.rglob and os.walk recurse in Python 3.11: a folder nested 1,100 deep in one student's submission raised
RecursionError out of the batch's discovery (the whole class stopped before anyone was graded) and out of the TA
report. Here the walk keeps its own stack, does not go below `max_depth` (the folders it did not enter are
returned, for the caller to say so), and stops with TreeError past `max_entries`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import UsageError


class TreeError(UsageError):
    """The tree holds more entries than the caller takes; one line saying so (the CLI: exit 2)."""


@dataclass
class Tree:
    entries: list[tuple[str, os.stat_result, Path]] = field(default_factory=list)  # (relative posix path, lstat, path)
    too_deep: list[str] = field(default_factory=list)  # folders at max_depth, not entered (relative posix paths)


def walk(root: Path, *, max_depth: int = 64, max_entries: int = 200_000, skip: frozenset[str] = frozenset()) -> Tree:
    """Every entry under root (not root itself), sorted by relative path; a name in `skip` (e.g. `.git`) is left
    out with everything under it. Links are entries, never followed. An unreadable folder is left out."""
    tree = Tree()
    stack: list[tuple[Path, str, int]] = [(Path(root), "", 0)]
    while stack:
        folder, prefix, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                found = list(it)
        except OSError:
            continue
        for e in found:
            if e.name in skip:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = prefix + e.name
            tree.entries.append((rel, st, Path(e.path)))
            if len(tree.entries) > max_entries:
                raise TreeError(f"{root}: over {max_entries} files and folders")
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 >= max_depth:
                    tree.too_deep.append(rel)
                else:
                    stack.append((Path(e.path), rel + "/", depth + 1))
    tree.entries.sort(key=lambda x: x[0])
    tree.too_deep.sort()
    return tree
