"""The shape of grader/: no import cycles between its modules, and every import points down the layers below,
counting the imports made inside functions too (a lazy import that closes a cycle, or that reaches up a layer, still
makes the lower module depend on the upper one: it hides an order the code depends on)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRADER = ROOT / "grader"


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _edges(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(the grader module imported, the line) for every import anywhere in `name`'s body: at module level, inside
    functions, under TYPE_CHECKING. `from pkg import mod` is an edge to pkg.mod when that is a module, else to pkg;
    relative imports are resolved against `name`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                if sub in modules:
                    out.append((sub, node.lineno))
                elif mod in modules:
                    out.append((mod, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name in modules]
    return sorted({(m, line) for m, line in out if m != name}, key=lambda e: (e[1], e[0]))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The grader modules `name` imports anywhere in its body."""
    return {m for m, _ in _edges(name, path, modules)}


# The layers of grader/, top first. A module may import modules of its own layer or of a layer below it, never one
# above (docs/architecture.md): the arrows point down, so a layer can be read, tested and changed without the ones
# above it. Within a layer, siblings may import each other as long as no cycle forms (test_the_grader_has_no_import_
# cycles). An entry names one module (`grader.cli`; `grader` is the package's __init__) or, ending in `.*`, a package
# and every module in it; a new module that no entry names fails test_every_grader_module_has_a_layer until it is
# given a layer here.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # app: the command line, what a user runs (`python -m grader ...`); nothing imports it.
    ("app", ("grader", "grader.__main__", "grader.cli", "grader.app.*")),
    # batch: a class, one grade per submission (local, Slurm). It runs grades (as `python -m grader grade`
    # processes) and checks before the first whether they will be official (preflight), so it sits above both.
    ("batch", ("grader.batch.*",)),
    # pipeline and preflight: the one place that knows the stages' order (admit, prepare, check, time, finish; the
    # record its steps share, graderun; the prepare and finish steps, partprep and gradefinish), and
    # the admission questions it asks: is this grade official (preflight, staffprobe). `profile` (profiling.py)
    # admits a submission as a grade does (device, scratch, identity), then uses the stages' workers: here too.
    (
        "pipeline/preflight",
        (
            "grader.pipeline",
            "grader.graderun",
            "grader.partprep",
            "grader.gradefinish",
            "grader.preflight",
            "grader.staffprobe",
            "grader.profiling",
        ),
    ),
    # performance: times the parts that passed; it uses correctness's target and checks for its sampled outputs.
    ("performance", ("grader.performance.*",)),
    # correctness: the cases against the truth, the pattern checks, the kernel check, and the correctness pass under
    # compute-sanitizer; it uses the CUDA build and the problem, never the timing.
    ("correctness", ("grader.correctness.*",)),
    # tools and outputs the stages use, side by side: building and running CUDA code (cuda/), reading grades and
    # writing reports (report/), the handout and the autograder zip (publish/), and a class's files on disk
    # (classfiles/: where its submissions are, what a batch keeps under OUT), read by the batch and by the report.
    ("cuda, report, publish", ("grader.cuda.*", "grader.report.*", "grader.publish.*", "grader.classfiles.*")),
    # problem: the problem as data (spec, hints, the fp64 reference, inputs and operands, layout, the course file).
    ("problem", ("grader.problem.*",)),
    # trust files: the handles on what is untrusted (a worker: sandbox, wire; its uid, scratch and box: identity,
    # box; text and trees a submission influenced: textscan, filetree) and the key (signing, keyfile). Everything
    # above reaches the child and student files only through them.
    (
        "trust files",
        (
            "grader.sandbox",
            "grader.wire",
            "grader.wire_decode",
            "grader.identity",
            "grader.box",
            "grader.textscan",
            "grader.filetree",
            "grader.signing",
            "grader.keyfile",
        ),
    ),
    # results and errors: the records and words every layer shares, each importing nothing of the grader: the typed
    # grade (results), the usage error (errors), how a message names a command to run (commands), and whether
    # Triton can run on this machine (availability).
    (
        "results/errors",
        (
            "grader.results",
            "grader.perfsummary",
            "grader.resultvalues",
            "grader.errors",
            "grader.commands",
            "grader.availability",
        ),
    ),
    # child: what runs beside student code imports nothing of the trusted side (tests/test_boundary.py); the trusted
    # side imports what both ends must agree on (the wire format, the inputs, the launch records), so it is lowest.
    ("child", ("grader.child.*",)),
]
RANK = {layer: len(LAYERS) - i for i, (layer, _) in enumerate(LAYERS)}

# Imports that still point up a layer, as (importer, imported): none. An entry here is a known back-arrow, with a
# comment saying why it remains; the test asserts this set exactly, so a new one fails and a removed one must go.
BACK_ARROWS: set[tuple[str, str]] = set()


def layers_of(module: str) -> list[str]:
    """The layers whose entries name a grader module: one, for every module of grader/. An entry of LAYERS names one
    module, or with `.*` a package and every module in it."""
    return [
        layer
        for layer, names in LAYERS
        for n in names
        if module == n.removesuffix(".*") or (n.endswith(".*") and module.startswith(n[:-1]))
    ]


def layer_of(module: str) -> str | None:
    """The layer of a grader module (None: no layer)."""
    found = layers_of(module)
    return found[0] if found else None


def back_arrows(modules: dict[str, Path]) -> list[tuple[str, int, str]]:
    """Every import that points up a layer: (importer, line, imported)."""
    out = []
    for name, path in sorted(modules.items()):
        mine = layer_of(name)
        for imported, line in _edges(name, path, modules):
            theirs = layer_of(imported)
            if mine and theirs and RANK[theirs] > RANK[mine]:
                out.append((name, line, imported))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import_and_none_in_a_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_grader_has_no_import_cycles():
    modules = _modules(GRADER)
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert len(graph) > 50  # the walk found the package, not an empty folder
    assert cycles(graph) == []


def test_the_import_walk_counts_lazy_relative_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "grader"
    (pkg / "sub").mkdir(parents=True)
    for f in ("__init__.py", "top.py", "low.py", "sub/__init__.py", "sub/mod.py"):
        (pkg / f).write_text("")
    (pkg / "sub" / "mod.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .. import low\n"
        "if TYPE_CHECKING:\n"
        "    from grader.sub import x\n"
        "def f():\n"
        "    import grader.top\n"
    )
    modules = _modules(pkg)
    edges = _edges("grader.sub.mod", pkg / "sub" / "mod.py", modules)
    assert edges == [("grader.low", 2), ("grader.sub", 4), ("grader.top", 6)]


def test_a_lazy_import_up_a_layer_is_a_back_arrow_and_one_down_is_not(tmp_path):
    pkg = tmp_path / "grader"
    for d in ("problem", "report"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "problem" / "course.py").write_text("import json\n\n\ndef page():\n    from grader.report import html\n")
    (pkg / "report" / "html.py").write_text("from grader.problem import course\n")
    assert back_arrows(_modules(pkg)) == [("grader.problem.course", 5, "grader.report.html")]


def test_every_grader_module_has_a_layer():
    modules = _modules(GRADER)
    assert len(modules) > 50  # the walk found the package, not an empty folder
    assert {m: layers_of(m) for m in sorted(modules) if len(layers_of(m)) != 1} == {}  # one layer each
    assert layer_of("grader.cli") == "app" and layer_of("grader.child.worker") == "child"
    assert layer_of("grader.somethingnew") is None and layer_of("grader.batchx") is None  # no default layer


def test_no_grader_import_points_up_a_layer():
    """app > batch > pipeline/preflight > performance > correctness > cuda, report, publish > problem > trust files >
    results/errors > child: each import, lazy or not, stays in its layer or goes down. On failure, the list names
    every back-arrow (importer:line -> imported): move the shared code down to a module both may import, move the
    upper layer's work up to where it is called, or have the upper layer pass a callable down."""
    modules = _modules(GRADER)
    found = back_arrows(modules)
    listed = "\n".join(f"{a}:{line} -> {b} ({layer_of(a)} -> {layer_of(b)})" for a, line, b in found)
    assert {(a, b) for a, _, b in found} == BACK_ARROWS, listed


ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*\d+|\(#\d+\)", re.IGNORECASE)


def test_the_issue_number_pattern_finds_both_spellings():
    found = [
        t
        for t in ("(issue 40 item 3)", "issues 28", "Issue #7", "fixed (#12)", "# 12 bytes", "tissue 3")
        if ISSUE_NUMBER.search(t)
    ]
    assert found == ["(issue 40 item 3)", "issues 28", "Issue #7", "fixed (#12)"]


def test_no_issue_numbers_in_grader_code():
    """Code says why in words: a reference to an issue's number ("(issue 40 item 3)") says only where the history
    is, and rots when the tracker moves. Comments and docstrings included."""
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sorted(GRADER.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE_NUMBER.search(line)
    ]
    assert found == [], "\n".join(found)


# Modules that another change is rewriting: the docstring check below skips them until that change is merged, and
# this set is then emptied.
DOCSTRING_NOT_YET_TRIMMED: set[str] = set()  # every module's is trimmed now; a new exception names its reason
MAX_MODULE_DOCSTRING_LINES = 10


def _long_module_docstrings(root: Path) -> dict[str, int]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))
        if doc and len(doc.splitlines()) > MAX_MODULE_DOCSTRING_LINES:
            out[p.relative_to(root.parent).as_posix()] = len(doc.splitlines())
    return out


def test_the_docstring_check_finds_a_long_one(tmp_path):
    pkg = tmp_path / "grader"
    pkg.mkdir()
    (pkg / "short.py").write_text('"""One line.\n\nWhy: docs/architecture.md."""\n')
    (pkg / "long.py").write_text('"""' + "\n".join(f"line {i}" for i in range(11)) + '"""\n')
    assert _long_module_docstrings(pkg) == {"grader/long.py": 11}


def test_module_docstrings_are_at_most_ten_lines():
    """A module's docstring says what it does and its one main contract; the why lives in docs/ (each of
    docs/architecture.md, docs/SECURITY.md and docs/performance.md has a section "Modules: the why"), where a
    docstring points."""
    long = _long_module_docstrings(GRADER)
    over = {p: n for p, n in long.items() if p not in DOCSTRING_NOT_YET_TRIMMED}
    assert over == {}, "\n".join(f"{p}: {n} lines (at most {MAX_MODULE_DOCSTRING_LINES})" for p, n in over.items())


MAX_MODULE_LINES = 600
MODULES_NOT_YET_SPLIT: set[str] = set()  # a module that must wait names its reason here


def test_no_grader_module_is_over_600_lines():
    """A module a newcomer can read in one sitting: over 600 lines, split it by responsibility (as correctness/stage,
    pipeline, child/worker, cuda/cudacpu and report/similarity were)."""
    sizes = {
        p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in GRADER.rglob("*.py")
    }
    over = {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES and p not in MODULES_NOT_YET_SPLIT}
    assert over == {}, over
    assert all(sizes.get(p, 0) > MAX_MODULE_LINES for p in MODULES_NOT_YET_SPLIT), "an exception no longer needed"
