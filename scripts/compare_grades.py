"""Compare the grades of two commits of the grader, byte for byte (issue 31, "Done when").

What it measures: for every submission folder of a corpus, the results.json that commit BEFORE's grader writes and
the one commit AFTER's grader writes, on CPU, with no performance stage, both with one key file made for the run
(`--secret-file KEY --allow-advisory`: without a key every grade draws a fresh secret, so fresh inputs). Each
results.json is normalised
(only the fields that differ between two runs of one grader are dropped: times, durations, timestamps, nonces,
signatures, versions/code hashes, host info; absolute paths of the temporary trees are replaced by placeholders)
and compared as `json.dumps(sort_keys=True)`: scores, states, every reason/message/finding and their order must match.

Each commit is exported with `git archive` into a temporary folder and graded there (cwd and PYTHONPATH = that
tree): the working tree is never graded. The submissions are copied once, from BEFORE's tree (from AFTER's where
BEFORE has no such folder: one moved between the two commits, such as GLU's test submissions, which were tests/broken,
tests/correct and tests/cuda_cpu before they moved to tests/data/problems/glu/), and both graders grade that same
copy.

Command (from the repository root):

    python scripts/compare_grades.py --before 11d2083 --after HEAD            # the default (representative) corpus
    python scripts/compare_grades.py --before 11d2083 --after HEAD --all      # every CPU-gradable folder
    python scripts/compare_grades.py --before A --after B tests/data/problems/glu/broken/row_tail reference/glu

A CORPUS is a folder relative to the repository root: a submission folder (its files say its problem and parts:
<problem>_triton.py, <problem>_cuda.cu), or reference/<problem> (the staff solutions, graded with --staff).
Prints one row per submission (score before, score after, identical, the first differing JSON path with both
values) and exits 1 on any difference.

Some submissions are not deterministic under one grader: a broken kernel that reads memory it never wrote (a
missing mask) reports whatever that memory held, so its `first_wrong.got`, error sizes and message change from run
to run. When BEFORE and AFTER differ, BEFORE grades that submission a second time: a JSON path whose value also
differs between BEFORE's two runs is unstable under one grader, not a change between graders. A submission whose
differences are all unstable paths, with the same score, is reported as `same*` (counted apart, named with its
unstable paths); any other difference is `NO`.

Duration on 2 cores (--jobs 2): a CPU grade takes 5-15 s, so the default corpus (DEFAULT below, 14 submissions, 28
grades) takes about 3-4 minutes; --all (about 85 folders: every problem's test submissions, the CPU exploits and
the staff solutions) about 20-25 minutes at that rate (not timed since it took in the other problems' folders).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = tuple(sorted(p.parent.name for p in (ROOT / "reference").glob("*/spec.yaml")))  # every problem

# A representative subset: correct Triton and CUDA designs, broken kernels of several kinds (wrong values, import
# and syntax errors, a mutated input, sys.exit), CUDA kernels through the CPU layer, exploits that attack the grader
# around a correct kernel or return wrong values, and every problem's staff solutions.
DEFAULT = (
    "tests/data/problems/glu/correct/tiles_2d",
    "tests/data/problems/glu/correct/cuda_pairs",
    "tests/data/problems/glu/broken/row_tail",
    "tests/data/problems/glu/broken/import_error",
    "tests/data/problems/glu/broken/syntax_error",
    "tests/data/problems/glu/broken/mutates_input",
    "tests/data/problems/glu/broken/sys_exit",
    "tests/data/problems/glu/cuda_cpu/scalar",
    "tests/data/problems/glu/cuda_cpu/oob_write",
    "tests/exploits/patch_timers",
    "tests/exploits/negated_output",
    *(f"reference/{p}" for p in PROBLEMS),
)
# --all: every problem's test submissions (tests/data/problems/<problem>/{correct,broken,cuda_cpu}/<name>/).
ALL_KINDS = ("correct", "broken", "cuda_cpu")
ALL_DIRS = tuple(
    f"tests/data/problems/{p.parent.name}/{p.name}"
    for p in sorted((ROOT / "tests" / "data" / "problems").glob("*/*"))
    if p.is_dir() and p.name in ALL_KINDS
)
# Exploits that grade on CPU with the default options (tests/exploits/audit.yaml's CPU entries).
CPU_EXPLOITS = (
    "fake_results_daemon", "fork_hopper_daemon", "fork_sleeper", "kill_grader", "patch_timers",
    "reach_site_packages", "reach_trusted", "results_path_squat", "hang_one_case", "segfault_third_call",
    "profiler_dodge", "numpy_with_alibi_kernel", "gc_truth_hunt", "inplace_view", "late_thread", "nan_wildcard",
    "negated_output", "reach_staff",
)  # fmt: skip

# Keys whose value differs between two runs of one grader on one submission.
VOLATILE = frozenset(
    {
        "execution_time", "phases_s", "seconds", "wall_s", "elapsed_s", "duration_s", "graded_at", "timestamp",
        "nonce", "signature", "hmac", "grader_version", "code_hash", "hostname", "host", "pid",
    }
)  # fmt: skip


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def export(rev: str, dest: Path) -> str:
    """The tree of commit REV in DEST (git archive); returns the full commit id."""
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    data = subprocess.run(["git", "archive", "--format=tar", sha], cwd=ROOT, check=True, capture_output=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        # our own commit's archive; the "data" filter where this Python has it (3.11.4+; Debian 12's 3.11.2 has not)
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return sha


def _parts(folder: Path) -> tuple[str, list[str]]:
    """The problem and the parts a submission folder holds (<problem>_triton.py, <problem>_cuda.cu)."""
    for p in sorted(PROBLEMS, key=len, reverse=True):
        only = [part for part, f in (("triton", f"{p}_triton.py"), ("cuda", f"{p}_cuda.cu")) if (folder / f).exists()]
        if only:
            return p, only
    return "glu", []


KEY: list[Path] = []  # the one key file both graders read (made in main): the same secret, so the same inputs


def grade_cmd(corpus: str, sub_copy: Path, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "grader", "grade", "--device", "cpu", "--no-perf", "--out", str(out)]
    if KEY:  # without a key a grade draws a fresh secret, and so fresh inputs, every time
        cmd += ["--secret-file", str(KEY[0]), "--allow-advisory"]
    if corpus.startswith("reference/"):
        return [*cmd, "--staff", "--problem", corpus.split("/")[1]]
    problem, only = _parts(sub_copy)
    cmd += ["--problem", problem, "--submission", str(sub_copy)]
    if len(only) == 1:
        cmd += ["--only", only[0]]
    return cmd


def grade(tree: Path, corpus: str, sub_copy: Path, out: Path) -> dict[str, Any] | str:
    """TREE's grader on one submission: its results.json, or the reason there is none."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0", "GRADER_SAME_UID": "1"}
    env.pop("GRADER_SECRET", None)
    try:
        p = subprocess.run(
            grade_cmd(corpus, sub_copy, out), cwd=tree, env=env, capture_output=True, text=True, timeout=900
        )
    except subprocess.TimeoutExpired:
        return "timed out (900 s)"
    res = out / "results.json"
    if not res.is_file():
        return f"no results.json (exit {p.returncode}): {(p.stderr or p.stdout)[-300:]}"
    return json.loads(res.read_text())


IGNORED: set[str] = set()  # --ignore KEY
SECONDS = re.compile(r"\b\d+(?:\.\d+)? s\b")  # linear: no nested quantifiers
GRADER_LINE = re.compile(r'(File "grader/[^"\n]*", line )\d+')


def normalise(obj: Any, paths: dict[str, str] | None = None) -> Any:
    """OBJ without the fields that differ between two runs (and the --ignore keys); each absolute path in PATHS
    replaced by its name."""
    paths = paths or {}
    if isinstance(obj, dict):
        return {k: normalise(v, paths) for k, v in obj.items() if k not in VOLATILE and k not in IGNORED}
    if isinstance(obj, list):
        return [normalise(v, paths) for v in obj]
    if isinstance(obj, str):
        for real, name in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            obj = obj.replace(real, name)
        obj = GRADER_LINE.sub(r"\1<n>", obj)  # a grader frame's line in a traceback moves with any edit of its file
        return SECONDS.sub("<t> s", obj)  # a duration inside a message ("compiled ... (0.83 s)")
    return obj


def differences(a: Any, b: Any, path: str = "$") -> Iterator[tuple[str, Any, Any]]:
    """Every JSON path (in sorted-key order) where A and B differ, with both values."""
    if type(a) is not type(b):
        yield path, a, b
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{path}.{k}", a.get(k, "<absent>"), b.get(k, "<absent>")
            else:
                yield from differences(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from differences(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            yield f"{path}.length", len(a), len(b)
    elif a != b:
        yield path, a, b


def first_difference(a: Any, b: Any) -> tuple[str, Any, Any] | None:
    """The first JSON path where A and B differ, with both values; None if equal."""
    return next(differences(a, b), None)


def compare(before: Any, after: Any) -> tuple[str, Any, Any] | None:
    """None when the two normalised results are byte-for-byte equal, else the first difference."""
    if json.dumps(before, sort_keys=True) == json.dumps(after, sort_keys=True):
        return None
    return first_difference(before, after) or ("$", "<order>", "<order>")


def _field(path: str) -> str:
    """A JSON path's last key ("$.tests[3].extra_data.max_abs_err" -> "max_abs_err")."""
    return path.rsplit(".", 1)[-1].split("[", 1)[0]


def unstable_paths(before: Any, before_again: Any, after: Any) -> list[str]:
    """The paths where BEFORE and AFTER differ, if each of them is a field (its last key: `got`, `max_abs_err`,
    `output`) that also moved between BEFORE's two runs somewhere in the result (the grader of BEFORE is not
    deterministic there: which elements uninitialised memory spoils changes per run, so the same path need not
    move twice); [] when some difference is not explained so."""
    if not isinstance(before_again, dict):
        return []
    changed = [p for p, _, _ in differences(before, after)]
    moving = {_field(p) for p, _, _ in differences(before, before_again)}
    return changed if changed and all(_field(p) in moving for p in changed) else []


def _score(r: Any) -> str:
    if not isinstance(r, dict):
        return "-"
    s = r.get("score")
    return f"{s:g}" if isinstance(s, (int, float)) else str(s)


def _short(v: Any) -> str:
    s = json.dumps(v, sort_keys=True) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 160 else s[:157] + "..."


def default_all() -> list[str]:
    out = [f"{d}/{f.name}" for d in ALL_DIRS for f in sorted((ROOT / d).iterdir()) if f.is_dir()]
    out += [f"tests/exploits/{e}" for e in CPU_EXPLOITS]
    return out + [f"reference/{p}" for p in PROBLEMS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, metavar="REV")
    ap.add_argument("--after", default="HEAD", metavar="REV")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="keep the results here (default: a temporary folder)")
    ap.add_argument("--all", action="store_true", help="every CPU-gradable folder, not the default subset")
    ap.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="KEY",
        help="also drop this key wherever it appears (e.g. spec_sha256 when the specs' bytes changed, comments or "
        "paths, between the two commits: the signed hash of the spec file, not a grading difference); say so",
    )
    ap.add_argument("corpus", nargs="*")
    a = ap.parse_args(argv)
    IGNORED.update(a.ignore)
    if a.ignore:
        print("ignored keys (said here, not a grading difference): " + ", ".join(sorted(a.ignore)))
    corpus = a.corpus or (default_all() if a.all else list(DEFAULT))
    start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="compare-grades-"))
    work = a.out.resolve() if a.out else tmp
    try:
        trees = {"before": tmp / "before", "after": tmp / "after"}
        shas = {side: export(rev, trees[side]) for side, rev in (("before", a.before), ("after", a.after))}
        key = tmp / "key"
        subprocess.run(
            [sys.executable, "-m", "grader", "keygen", "--out", str(key)],
            cwd=trees["before"],
            check=True,
            env={**os.environ, "PYTHONPATH": str(trees["before"])},
            capture_output=True,
        )
        KEY[:] = [key]
        subs = tmp / "subs"
        for i, c in enumerate(corpus):
            if not c.startswith("reference/"):
                src = trees["before"] / c
                if not src.is_dir():  # a folder that moved between BEFORE and AFTER: the same files, at AFTER's path
                    src = trees["after"] / c
                if not src.is_dir():
                    sys.exit(f"compare_grades: {c} is not a folder at {a.before} nor at {a.after}")
                shutil.copytree(src, subs / str(i) / Path(c).name)
        paths = {str(trees["before"]): "<tree>", str(trees["after"]): "<tree>", str(subs): "<subs>", str(work): "<out>"}

        def job(arg: tuple[int, str, str]) -> Any:
            i, c, side = arg
            out = work / side / f"{i:03d}-{Path(c).name}"
            out.mkdir(parents=True, exist_ok=True)
            r = grade(trees[side.split("-")[0]], c, subs / str(i) / Path(c).name, out)
            return normalise(r, {**paths, str(out): "<out>"}) if isinstance(r, dict) else r

        jobs = [(i, c, side) for i, c in enumerate(corpus) for side in ("before", "after")]
        with ThreadPoolExecutor(max(1, a.jobs)) as pool:
            results = list(pool.map(job, jobs))
        print(f"before {a.before} = {shas['before'][:12]}, after {a.after} = {shas['after'][:12]}")
        print(f"{'submission':42} {'before':>8} {'after':>8}  identical")
        differ = unstable = 0
        for i, c in enumerate(corpus):
            b, f = results[2 * i], results[2 * i + 1]
            d = compare(b, f)
            if d is not None and isinstance(b, dict) and isinstance(f, dict) and _score(b) == _score(f):
                again = job((i, c, "before-again"))  # the same grader twice: which paths move on their own
                noisy = unstable_paths(b, again, f)
                if noisy:
                    unstable += 1
                    print(
                        f"{c:42} {_score(b):>8} {_score(f):>8}  same* (unstable under one grader: "
                        f"{', '.join(noisy[:3])}{' ...' if len(noisy) > 3 else ''})"
                    )
                    continue
            differ += d is not None
            print(f"{c:42} {_score(b):>8} {_score(f):>8}  {'yes' if d is None else 'NO'}")
            if d:
                print(f"    at {d[0]}:\n      before: {_short(d[1])}\n      after:  {_short(d[2])}")
                rest = [p for p, _, _ in differences(b, f)][1:] if isinstance(b, dict) and isinstance(f, dict) else []
                if rest:
                    print(f"    and {len(rest)} more: {', '.join(rest[:5])}{' ...' if len(rest) > 5 else ''}")
        n = len(corpus)
        print(
            f"{n} submissions, {n - differ - unstable} identical, {unstable} same but for paths unstable under one "
            f"grader, {differ} differ ({time.monotonic() - start:.0f} s)"
        )
        return 1 if differ else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
