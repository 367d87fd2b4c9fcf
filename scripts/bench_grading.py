"""The grading benchmark (issue 32 item 5): a class built from the repository's kernels, graded by the batch and
then submission by submission, on a GPU host or on CPU.

What it measures:
- throughput: submissions per hour per GPU (`--device cuda`: the class over the batch's wall time times its GPUs,
  and the batch's own task-time figure from batch_summary.json) or per hour on this machine (`--device cpu`);
- the wall time of the batch and of each single grade;
- the per-phase breakdown (build, correctness, sanitizer, performance, ...: results.json's extra_data.phases_s)
  summed over the class, for the batch's grades and for the single grades;
- the score agreement: each submission graded by `python -m grader batch --engine local` and again by one
  `python -m grader grade`. Every row but a performance row (build, correctness, kernel check, sanitizer) must have
  the same score and status, and each performance row the same verdict (status, flagged or not); a performance
  row's points may differ by the timing noise of two runs, at most CREDIT_NOISE of its points (a case's median
  moves < 2% between grades on the H200, docs/performance.md, and 2% of the time moves the credit by ~0.03 between
  the thresholds). On CPU there is no performance stage, so every row must agree.

The class (`--size N`, default all): the staff solutions first, then in turn one each of the problem's broken
kernels (tests/data/problems/<problem>/broken), its correct kernels of other designs (.../correct), its CUDA kernels
run through the CPU layer (.../cuda_cpu), the exploits (a few CPU-gradable ones of tests/exploits, and on a GPU the
ones the batch check used), and the assignment's stubs; the first N of that order, so any N is a mix of honest and
broken kernels and the same N gives the same class. `--problem P` builds it from P's files (default: the default
problem).

Both sides grade with one key file (`--secret-file KEY`, or one made in DIR): the same secret, so the same inputs,
and grades as the batch makes them (signed, `--allow-advisory` because a benchmark is not an official grade).

    python scripts/bench_grading.py --out DIR [--device cpu|cuda] [--size N] [--problem P] [--gpus 0,1]
        [--no-shared-baselines] [--single-sample K] [--phase batch|single|compare|all]
    nox -s bench-grading -- --out DIR --size 6

DIR/bench.json holds everything (the class, every results.json of both phases, the walls, the phase sums, the
throughput, the agreement): the one file to bring back from a device run (`--out /tmp/b`, then
`cp /tmp/b/bench.json "$OUT"`); `--phase compare --out D` with it in D compares again. Each phase may also run
alone (`--phase batch`, then `--phase single` in another device command: a phase that a time limit cuts keeps what
it graded, and `--phase single` grades only what is missing; `--phase compare` alone judges the submissions the
single phase was asked to regrade, kept in bench.json).

Duration: a CPU grade of a glu submission takes 5-25 s on 2 cores, so `--device cpu --size 6` (6 batch grades, 6
single grades) takes 2-5 minutes; on one H200 a grade is ~30-50 s, so the whole class (about 40 submissions) is
~30 minutes of batch and as much again of single grades (use `--size` and `--single-sample` to fit a 10-minute
device command). Exit 0 when every submission agrees, 1 when one differs or is missing, 2 on bad use.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
T = ROOT / "tests"
DATA = T / "data" / "problems"  # each problem's test submissions: DATA/<problem>/<kind>/<name>/
CREDIT_NOISE = 0.05  # of a performance row's points: two grades' timing noise (see the docstring)
# Exploits that grade on CPU with the default options (scripts/compare_grades.py CPU_EXPLOITS): a few that attack
# the grader in different ways and finish quickly, then the one that hangs a case (it costs its case limit).
CPU_EXPLOITS = ("negated_output", "patch_timers", "nan_wildcard", "inplace_view", "numpy_with_alibi_kernel",
                "reach_staff", "hang_one_case")  # fmt: skip
GPU_EXPLOITS = ("numpy_compute", "cache_by_ptr", "gpu_side_stream")  # the batch GPU check's (issue 19)
SOURCES = ("correct", "broken", "cuda_cpu", "exploits")  # the problem's folders of DATA, and tests/exploits
PREFIX = {"correct": "correct", "broken": "broken", "cuda_cpu": "cuda_cpu", "exploits": "exploit"}
PHASES = ("batch", "single")


def default_problem() -> str:
    """The problem whose spec says `default: true` (what `grader grade` grades without --problem)."""
    for spec in sorted((ROOT / "reference").glob("*/spec.yaml")):
        if any(line.strip() == "default: true" for line in spec.read_text(encoding="utf-8").splitlines()):
            return spec.parent.name
    return "glu"


def _files(folder: Path, problem: str) -> dict[str, Path]:
    """A submission folder's files for `problem` (target name -> source): <problem>_triton.py, <problem>_cuda.cu."""
    names = (f"{problem}_triton.py", f"{problem}_cuda.cu")
    return {n: folder / n for n in names if (folder / n).is_file()}


def candidates(problem: str, device: str) -> dict[str, dict[str, dict[str, Path]]]:
    """Every submission the repository has for `problem`, by kind: id -> files. Folders under
    tests/data/problems/<problem>/<kind>/ (tests/exploits/ for the exploits) one or two levels deep whose files are
    the problem's."""
    out: dict[str, dict[str, dict[str, Path]]] = {}
    ref, stub = ROOT / "reference" / problem, ROOT / "assignment" / problem
    staff = {
        f"{problem}_{p}": ref / f"solution_{p}" for p in ("triton.py", "cuda.cu") if (ref / f"solution_{p}").is_file()
    }
    out["staff"] = {"staff": staff} if staff else {}
    out["stubs"] = {"stubs": _files(stub, problem)} if _files(stub, problem) else {}
    for kind in SOURCES:
        found: dict[str, dict[str, Path]] = {}
        base = T / kind if kind == "exploits" else DATA / problem / kind
        folders = sorted(p for p in [*base.glob("*/"), *base.glob("*/*/")] if p.is_dir())
        if kind == "exploits":
            wanted = (*GPU_EXPLOITS, *CPU_EXPLOITS) if device == "cuda" else CPU_EXPLOITS
            folders = [base / name for name in wanted]
        for folder in folders:
            files = _files(folder, problem)
            if files:
                found[PREFIX[kind] + "_" + "_".join(folder.relative_to(base).parts)] = files
        out[kind] = found
    return out


def class_order(problem: str, device: str) -> list[tuple[str, dict[str, Path]]]:
    """The class in its fixed order: staff, then in turn one broken, one correct, one CUDA-on-CPU, one exploit,
    the stubs (once), and again, until every kind is used up. Its first N is a mix of honest and broken kernels."""
    c = candidates(problem, device)
    order: list[tuple[str, dict[str, Path]]] = list(c["staff"].items())
    queues = [list(c[k].items()) for k in ("broken", "correct", "cuda_cpu", "exploits", "stubs")]
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def select(problem: str, device: str, size: int | None, ids: list[str] | None = None) -> dict[str, dict[str, Path]]:
    """The class: the first `size` of class_order (all of it for None), or exactly `ids` in their order."""
    order = class_order(problem, device)
    if ids is not None:
        known = dict(order)
        missing = [i for i in ids if i not in known]
        if missing:
            raise ValueError(f"no submission {missing[:5]} for {problem} (known: {', '.join(known)})")
        return {i: known[i] for i in ids}
    return dict(order[: len(order) if size is None else size])


def make_class(d: Path, cls: dict[str, dict[str, Path]]) -> Path:
    """The class as the batch reads it: DIR/class/<id>/<target name>, private to this user (the batch refuses a
    class folder that other users can read: a submission could read its classmates')."""
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    for sid, files in cls.items():
        (d / sid).mkdir(parents=True, exist_ok=True)
        for name, src in files.items():
            shutil.copyfile(src, d / sid / name)
    return d


def is_perf(row: dict[str, Any]) -> bool:
    return row.get("extra_data", {}).get("kind") == "performance" or "/ performance /" in str(row.get("name"))


def differences(batch: list[dict[str, Any]], single: list[dict[str, Any]]) -> list[str]:
    """What differs between two grades' rows beyond timing noise (see the module's docstring)."""
    if [t["name"] for t in batch] != [t["name"] for t in single]:
        return ["not the same rows"]
    out = []
    for b, s in zip(batch, single, strict=True):
        if not is_perf(b):
            if (b["score"], b["status"], b.get("max_score")) != (s["score"], s["status"], s.get("max_score")):
                out.append(f"{b['name']}: batch {b['score']:g} ({b['status']}), single {s['score']:g} ({s['status']})")
            continue
        bf, sf = bool(b.get("extra_data", {}).get("flags")), bool(s.get("extra_data", {}).get("flags"))
        noise = CREDIT_NOISE * float(b.get("max_score") or 0)
        if b["status"] != s["status"] or bf != sf or abs(b["score"] - s["score"]) > noise + 1e-9:
            out.append(f"{b['name']}: batch {b['score']:.3f} ({b['status']}, flagged {bf}), single "
                       f"{s['score']:.3f} ({s['status']}, flagged {sf}); noise allowed {noise:.3f}")  # fmt: skip
    return out


def agreement(sid: str, batch: dict[str, Any] | None, single: dict[str, Any] | None) -> dict[str, Any]:
    """One submission's verdict: missing (a side has no results.json), DIFFERENT, identical (every score equal) or
    same within timing noise."""
    if batch is None or single is None:
        side = "batch" if batch is None else "single"
        return {"sid": sid, "verdict": f"missing ({side})", "ok": False, "differences": [f"no {side} grade"]}
    diff = differences(batch["tests"], single["tests"])
    exact = batch["score"] == single["score"] and [t["score"] for t in batch["tests"]] == [
        t["score"] for t in single["tests"]
    ]
    verdict = "DIFFERENT" if diff else "identical" if exact else "same within timing noise"
    return {"sid": sid, "batch": float(batch["score"]), "single": float(single["score"]), "verdict": verdict,
            "ok": not diff, "differences": diff}  # fmt: skip


def phase_sums(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Seconds per grading phase (results.json's extra_data.phases_s) summed over the grades, largest first."""
    sums: dict[str, float] = {}
    for r in results.values():
        for k, v in (r.get("extra_data", {}).get("phases_s") or {}).items():
            if isinstance(v, (int, float)):
                sums[k] = sums.get(k, 0.0) + float(v)
    return {k: round(v, 2) for k, v in sorted(sums.items(), key=lambda kv: -kv[1])}


def task_walls(batch_out: Path) -> dict[str, float]:
    """Each submission's task wall time in the batch (its last attempt with a wall time, from the batch's attempt
    log OUT/.batch/attempts/<id>.jsonl, what grader/batch/collect.py counts GPU time from). The batch's wall minus
    their sum is what the batch itself costs: its start, the gaps between tasks, the TA report at the end."""
    walls: dict[str, float] = {}
    for f in sorted((batch_out / ".batch" / "attempts").glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(d, dict) and isinstance(d.get("wall_s"), (int, float)):
                walls[f.stem] = float(d["wall_s"])
    return walls


def throughput(n: int, wall_s: float, device: str, gpus: int) -> float | None:
    """Submissions per hour per GPU (cuda) or per hour on this machine (cpu), over the batch's wall time."""
    if n <= 0 or wall_s <= 0:
        return None
    return round(n / (wall_s / 3600) / (max(gpus, 1) if device == "cuda" else 1), 1)


def _gpu_count(gpus: str | None) -> int:
    if gpus:
        return len([g for g in gpus.split(",") if g.strip()])
    try:
        import torch

        return int(torch.cuda.device_count())
    except ImportError:
        return 0


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def _machine(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        if device == "cuda" and torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info


class Bench:
    """DIR/bench.json, read back at the start (a phase run alone adds to what the others wrote) and written after
    every step."""

    def __init__(self, out: Path) -> None:
        self.path = out / "bench.json"
        self.doc: dict[str, Any] = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.out = out

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, sort_keys=True))
        tmp.replace(self.path)

    def results(self, phase: str) -> dict[str, dict[str, Any]]:
        """Every results.json of a phase: from its folder, else from bench.json, else from the older one-file
        DIR/<phase>.json of scripts/batch_gpu_check.py."""
        d = self.out / phase
        got = {x.name: json.loads((x / "results.json").read_text()) for x in sorted(d.glob("*/"))
               if (x / "results.json").is_file()}  # fmt: skip
        if got:
            return got
        if self.doc.get(phase, {}).get("results"):
            return dict(self.doc[phase]["results"])
        old = self.out / f"{phase}.json"
        return dict(json.loads(old.read_text()).get("results") or {}) if old.is_file() else {}

    def summary(self) -> dict[str, Any] | None:
        sp = self.out / "batch" / "batch_summary.json"
        if sp.is_file():
            return dict(json.loads(sp.read_text()))
        if self.doc.get("batch", {}).get("summary") is not None:
            return dict(self.doc["batch"]["summary"])
        old = self.out / "batch.json"
        return json.loads(old.read_text()).get("summary") if old.is_file() else None


def _key_args(a: argparse.Namespace, out: Path) -> list[str]:
    """One key for both phases (the same inputs); made in DIR once when none is given."""
    key = Path(a.secret_file) if a.secret_file else out / "key"
    if not key.is_file():
        subprocess.run([sys.executable, "-m", "grader", "keygen", "--out", str(key)], cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
    return ["--secret-file", str(key), "--allow-advisory"]  # a measurement, not an official grade


def run_batch(a: argparse.Namespace, b: Bench, cls_dir: Path, n: int, key: list[str]) -> int:
    """The batch over the class; its exit code (2: it refused its command line, nothing graded)."""
    dest = b.out / "batch"
    shutil.rmtree(dest, ignore_errors=True)  # the batch resumes what a folder holds: a benchmark grades it all
    cmd = [sys.executable, "-m", "grader", "batch", str(cls_dir), "--out", str(dest), "--engine", "local",
           "--problem", a.problem, "--device", a.device, *key]  # fmt: skip
    if a.device == "cuda":
        cmd += (["--gpus", a.gpus] if a.gpus else []) + (["--per-gpu", a.per_gpu] if a.per_gpu else [])
        cmd += ["--shared-baselines" if a.shared_baselines else "--no-shared-baselines"]
    else:
        cmd += ["--slots", str(a.slots)]
    t0 = time.monotonic()
    rc = subprocess.run(cmd, cwd=ROOT, check=False).returncode
    wall = time.monotonic() - t0
    print(f"batch: exit {rc}, {n} submissions in {wall:.0f} s wall", flush=True)
    b.doc["batch"] = {"command": cmd[1:], "rc": rc, "wall_s": round(wall, 2)}
    b.doc["batch"].update({"results": b.results("batch"), "summary": b.summary(), "task_walls_s": task_walls(dest)})
    b.save()
    return rc


def run_singles(a: argparse.Namespace, b: Bench, cls_dir: Path, singles: list[str], key: list[str]) -> None:
    env = dict(os.environ)
    if a.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = (a.gpus or "0").split(",")[0]
    done = b.doc.setdefault("single", {"walls_s": {}, "rcs": {}, "results": {}})
    for sid in singles:
        dest = b.out / "single" / sid
        if (dest / "results.json").is_file():
            continue  # graded by an earlier run of this phase (one cut by a time limit)
        cmd = [sys.executable, "-m", "grader", "grade", "--problem", a.problem, "--submission", str(cls_dir / sid),
               "--out", str(dest), "--device", a.device, "--student-id", sid, *key]  # fmt: skip
        t0 = time.monotonic()
        rc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=False).returncode
        wall = time.monotonic() - t0
        print(f"single grade of {sid}: exit {rc} in {wall:.0f} s", flush=True)
        done["walls_s"][sid], done["rcs"][sid] = round(wall, 2), rc
        done["results"] = b.results("single")
        b.save()  # after each grade: a time limit that cuts the phase keeps what was graded


def compare(a: argparse.Namespace, b: Bench, singles: list[str]) -> int:
    batch, single = b.results("batch"), b.results("single")
    rows = [agreement(sid, batch.get(sid), single.get(sid)) for sid in singles]
    for r in rows:
        if "batch" in r:
            print(f"{r['sid']:36s} batch {r['batch']:7.3f}  single {r['single']:7.3f}  {r['verdict']}")
        else:
            print(f"{r['sid']}: {r['verdict']}")
        for line in r["differences"][:5] if r["verdict"] == "DIFFERENT" else []:
            print(f"    {line}")
    bad = sum(not r["ok"] for r in rows)
    summary = b.summary()
    wall = float(b.doc.get("batch", {}).get("wall_s") or 0)
    gpus = _gpu_count(a.gpus) if a.device == "cuda" else 0
    per_hour = throughput(len(batch), wall, a.device, gpus)
    walls = b.doc.get("single", {}).get("walls_s") or {}
    tasks = b.doc.get("batch", {}).get("task_walls_s") or {}
    figures = {
        "device": a.device,
        "gpus": gpus,
        "batch_graded": len(batch),
        "batch_wall_s": round(wall, 2),
        "per_hour": per_hour,
        "per_hour_means": "submissions per hour per GPU" if a.device == "cuda" else "submissions per hour here",
        "batch_submissions_per_gpu_hour": summary.get("submissions_per_gpu_hour") if summary else None,
        "batch_tasks_s": round(sum(tasks.values()), 2),
        "single_graded": len(walls),
        "single_wall_s": round(sum(walls.values()), 2),
        "single_mean_s": round(sum(walls.values()) / len(walls), 2) if walls else None,
        "phases_batch_s": phase_sums(batch),
        "phases_single_s": phase_sums(single),
        # a grade's time outside its phases: the process's start and imports, the worker's start, the reports
        "single_outside_phases_s": round(sum(walls.values()) - sum(phase_sums(single).values()), 2) if walls else None,
        "agreement": rows,
        "disagreeing": bad,
    }
    b.doc["figures"] = figures
    b.save()
    print_figures(figures, summary)
    print(f"{'every submission agrees' if not bad else f'{bad} submission(s) differ'}")
    return 1 if bad else 0


def print_figures(f: dict[str, Any], summary: dict[str, Any] | None) -> None:
    if summary is None:
        print("no batch_summary.json: the batch did not finish")
    else:
        print(f"GPU models: {summary.get('gpu_models')}; warnings: {summary.get('warnings') or 'none'}")
        if summary.get("submissions_per_gpu_hour") is not None:
            print(f"submissions per GPU-hour (task time on GPU slots): {summary['submissions_per_gpu_hour']}")
    if f["batch_wall_s"]:
        print(f"batch: {f['batch_graded']} graded in {f['batch_wall_s']:.0f} s wall: {f['per_hour']} "
              f"{f['per_hour_means']}" + (f" ({f['gpus']} GPU(s))" if f["device"] == "cuda" else ""))  # fmt: skip
    if f["batch_tasks_s"]:
        print(f"batch tasks: {f['batch_tasks_s']:.1f} s summed (the batch's own start, gaps and report: the rest)")
    if f["single_graded"]:
        print(f"single grades: {f['single_graded']} in {f['single_wall_s']:.0f} s ({f['single_mean_s']:.1f} s each)")
    for side in ("batch", "single"):
        ph = f[f"phases_{side}_s"]
        if ph:
            print(f"phases summed over the {side} grades (s): " + ", ".join(f"{k} {v:.1f}" for k, v in ph.items()))
    if f["single_outside_phases_s"] is not None:
        print(f"single grades outside their phases (start, imports, reports): {f['single_outside_phases_s']:.1f} s")


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda if torch sees a GPU")
    ap.add_argument("--size", type=int, default=None, help="the first N submissions of the class (default: all)")
    ap.add_argument("--ids", default=None, help="exactly these submissions (comma-separated ids), not --size")
    ap.add_argument("--problem", default=None, help="default: the default problem")
    ap.add_argument("--gpus", default=None, help="batch --gpus (cuda; default: every GPU)")
    ap.add_argument("--per-gpu", default=None, help="batch --per-gpu N (cuda; default: the batch's own)")
    ap.add_argument("--slots", type=int, default=1, help="batch --slots N (cpu; default 1)")
    ap.add_argument(
        "--shared-baselines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="batch --shared-baselines (cuda; the batch's default): each GPU's baselines measured once; "
        "--no-shared-baselines to compare with every grade timing every baseline",
    )
    ap.add_argument("--single-sample", type=int, default=None, help="regrade singly only the first K (default all)")
    ap.add_argument("--single", default=None, help="regrade singly only these ids (comma-separated)")
    ap.add_argument("--phase", choices=("batch", "single", "compare", "all"), default="all")
    ap.add_argument("--secret-file", default=None, help="the key both phases grade with (default: one made in DIR)")
    a = ap.parse_args(argv)
    a.device = a.device or _default_device()
    a.problem = a.problem or default_problem()
    if a.size is not None and a.size < 1:
        ap.error("--size: 1 or more")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    try:
        cls = select(a.problem, a.device, a.size, [x for x in a.ids.split(",") if x] if a.ids else None)
    except ValueError as e:
        print(f"bench_grading: {e}", file=sys.stderr)
        return 2
    ids = list(cls)
    singles = [x for x in a.single.split(",") if x] if a.single else ids[: a.single_sample]
    b = Bench(out)
    if a.phase == "compare" and not a.single and a.single_sample is None:
        # A compare run alone judges what the single phase regraded (its --single or --single-sample, kept in
        # bench.json), not every submission of the class: the others were never meant to have a single grade.
        kept = [s for s in b.doc.get("single_ids", []) if s in cls]
        regraded = [s for s in ids if s in b.results("single")]
        singles = kept or regraded or singles
    command = ["scripts/bench_grading.py", *(sys.argv[1:] if argv is None else argv)]
    b.doc.update({"problem": a.problem, "device": a.device, "class": {s: sorted(f) for s, f in cls.items()},
                  "machine": _machine(a.device)})  # fmt: skip
    if a.phase in ("single", "all"):
        b.doc["single_ids"] = singles  # what the single phase was asked to regrade: a later compare judges these
    b.doc.setdefault("commands", []).append(command)  # each phase run alone adds its own
    b.save()
    if a.phase != "compare":
        unknown = [s for s in singles if s not in cls]
        if unknown:
            print(f"bench_grading: --single {unknown[:5]}: not in the class", file=sys.stderr)
            return 2
        cls_dir = make_class(out / "class", cls)
        key = _key_args(a, out)
        if a.phase in ("batch", "all") and run_batch(a, b, cls_dir, len(cls), key) == 2:
            print("bench_grading: the batch refused its command line (exit 2, above)", file=sys.stderr)
            return 2
        if a.phase in ("single", "all"):
            run_singles(a, b, cls_dir, singles, key)
    if a.phase in ("compare", "all"):
        return compare(a, b, singles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
