"""The student handout's noxfile.py: the course's, with the student sessions only (STUDENT_SESSIONS), and what the
staff sessions alone use dropped with them (`student_noxfile`). grader/publish/handout.py writes it into the handout.
"""

from __future__ import annotations

import ast
import re

from grader.errors import UsageError

# The nox sessions a student runs: the ones assignment/README.md and STUDENT_README name (grade, bench, profile),
# and tests, which runs STUDENT_TESTS. Every other session of the course's noxfile is staff tooling.
STUDENT_SESSIONS = ("grade", "bench", "profile", "tests")
# What the handout's `nox -s tests` installs besides requirements.txt: STUDENT_TESTS import only these (the staff
# list adds linters, hadolint, uv and build for tests the handout does not ship).
STUDENT_TEST_DEPS = ("pytest", "hypothesis")
NOXFILE = "noxfile.py"
STUDENT_TESTS_DOC = (
    "The grader's own tests that come with the handout. Args after `--` go to pytest; `-- --all` also runs\n"
    "    those marked slow."
)


class NoxfileError(UsageError):
    """The course's noxfile changed shape and the student one cannot be made from it; str(err) is one line.
    grader/publish/handout.py reports it as its HandoutError."""


def student_noxfile(text: str) -> str:
    """The handout's noxfile.py from the course's: the sessions of STUDENT_SESSIONS only (their lines in the module
    docstring too), TEST_DEPS = STUDENT_TEST_DEPS, and what the staff sessions alone use dropped with them: a
    top-level function, constant or import that no kept session needs, directly or through a kept helper
    (`_live`), goes with the comment block above it (LINT_DEPS, lint's ACTIONLINT and _optional_tool, and the
    `import shutil` only _optional_tool used). The rest (the shared environment, _env, _grader) is the course's own
    code, unchanged, so a student's `nox -s grade` behaves as the staff's.
    Raises NoxfileError when the result is not the student noxfile (a student session missing, or it does not parse):
    the course's noxfile changed shape, and this function must follow."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    drop: set[int] = set()  # 0-based line numbers
    replace: dict[int, str] = {}

    def span(node: ast.stmt) -> range:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#"):
            first -= 1  # the comment block above a dropped statement says what it was for
        return range(first, node.end_lineno or node.lineno)

    def rewrite(where: range, new: str, keep_from: int | None = None) -> None:
        """Lines `where` become `new` (the lines from keep_from on stay: a statement whose comment alone changes)."""
        drop.update(range(where.start, where.stop if keep_from is None else keep_from))
        replace[where.start] = new

    live = _live(tree, STUDENT_SESSIONS)
    kept: list[str] = []
    for node in tree.body:
        name = _session_name(node) if isinstance(node, ast.FunctionDef) else None
        target = _assigned_name(node)
        if name in STUDENT_SESSIONS:
            kept.append(name)
            doc = node.body[0] if isinstance(node, ast.FunctionDef) else None
            if name == "tests" and isinstance(doc, ast.Expr):
                # the course's docstring says how long the staff suite takes and how CI runs it
                rewrite(range(doc.lineno - 1, doc.end_lineno or doc.lineno), f'    """{STUDENT_TESTS_DOC}"""\n')
        elif node not in live:  # a staff session, or what only staff sessions use
            drop.update(span(node))
        elif target == "INSTALL_ARGS":  # its comment names the Dockerfile and a staff test
            note = "# The one install step: requirements.txt at constraints.txt's versions.\n"
            rewrite(span(node), note, keep_from=node.lineno - 1)
        elif target == "TEST_DEPS":
            deps = ", ".join(f'"{d}"' for d in STUDENT_TEST_DEPS)
            rewrite(span(node), f"# What the handout's tests import besides requirements.txt.\nTEST_DEPS = [{deps}]\n")
    if sorted(kept) != sorted(STUDENT_SESSIONS):
        raise NoxfileError(
            f"{NOXFILE}: sessions {', '.join(sorted(set(STUDENT_SESSIONS) - set(kept)))} missing, which the handout "
            "needs (STUDENT_SESSIONS in grader/publish/handout_noxfile.py)"
        )
    drop |= _docstring_sessions_dropped(tree, lines)
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in replace:
            out.append(replace[i])
        if i not in drop:
            out.append(line)
    # At most two blank lines where a session went, and one newline at the end (ruff format's layout). The course's
    # tests include the lint checks (tests/test_lint.py); the handout's tests do not, so its docstring does not say so.
    result = re.sub(r"\n{4,}", "\n\n\n", "".join(out).replace(" (includes the lint checks)", "")).rstrip("\n") + "\n"
    try:
        ast.parse(result)
    except SyntaxError as e:
        raise NoxfileError(f"{NOXFILE}: the student version does not parse (line {e.lineno}): {e.msg}") from None
    return result


def _defines(node: ast.stmt) -> set[str]:
    """The names a top-level statement of the noxfile defines, where defining them is all it does: a function that
    is no session, a class, `NAME = ...` (also annotated or augmented; not a dunder), an import (not
    `from __future__`). Empty for every other statement (a session, `nox.options... = `, a call): `_live` keeps those
    of the kept sessions and all the others whatever they name."""
    if isinstance(node, ast.FunctionDef):
        return set() if _session_name(node) is not None else {node.name}
    if isinstance(node, (ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    if targets:
        if not all(isinstance(t, ast.Name) for t in targets):
            return set()  # `x.y = ...`, `a[i] = ...`: a side effect, not a definition
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        return set() if any(n.startswith("__") and n.endswith("__") for n in names) else names
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.module != "__future__":
        return {a.asname or a.name for a in node.names if a.name != "*"}
    return set()


def _live(tree: ast.Module, sessions: tuple[str, ...]) -> set[ast.stmt]:
    """The top-level statements of a noxfile that the sessions `sessions` keep: every statement that defines nothing
    (`_defines`) but is no other session, and, transitively, each definition of a name one of those uses. A helper
    or constant only a dropped session uses (lint's _optional_tool, LINT_DEPS) is not live, nor an import only such
    a helper used."""
    live: set[ast.stmt] = set()
    defs: list[tuple[ast.stmt, set[str]]] = []
    for node in tree.body:
        names = _defines(node)
        session = _session_name(node) if isinstance(node, ast.FunctionDef) else None
        if names:
            defs.append((node, names))
        elif session is None or session in sessions:
            live.add(node)
    needed: set[str] = set()
    todo = list(live)
    while todo:
        node = todo.pop()
        needed |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
        for d, names in defs:
            if d not in live and names & needed:
                live.add(d)
                todo.append(d)
    return live


def _docstring_sessions_dropped(tree: ast.Module, lines: list[str]) -> set[int]:
    """The lines (0-based) of the module docstring's list of sessions that name a session the handout has not."""
    doc = tree.body[0] if tree.body and isinstance(tree.body[0], ast.Expr) else None
    if doc is None:
        return set()
    out = set()
    for i in range(doc.lineno - 1, doc.end_lineno or doc.lineno):
        m = re.match(r"^\s+nox (?:--no-venv )?-s ([\w-]+)", lines[i])
        if m and m.group(1) not in STUDENT_SESSIONS:
            out.add(i)
    return out


def _assigned_name(node: ast.stmt) -> str | None:
    """NAME of a top-level `NAME = ...`, else None."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    return None


def _session_name(fn: ast.FunctionDef) -> str | None:
    """The session a function of the noxfile defines (`@nox.session` or `@nox.session(name=...)`), or None."""
    for d in fn.decorator_list:
        call = d if isinstance(d, ast.Call) else None
        target = call.func if call is not None else d
        if isinstance(target, ast.Attribute) and target.attr == "session":
            for kw in call.keywords if call is not None else []:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
            return fn.name
    return None
