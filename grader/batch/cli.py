"""`python -m grader batch ...`: grade a class (grader/batch/__init__.py lists the modules and the exit codes).

batch SUBMISSIONS --out OUT [--engine local|slurm] [grade options] [engine options]
batch status OUT                 done / failed / missing, and the command that resubmits the missing ones
batch resubmit OUT [--indices I] Slurm: submit these array indices again (default: the missing ones)
batch collect OUT                the TA report and the summary (the Slurm collect job runs this)
batch task OUT --index I         one submission (what the engines run)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shlex
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from grader import availability, identity
from grader.batch import EXIT_INCOMPLETE, EXIT_INFRA, EXIT_NOT_GRADABLE, EXIT_OK, EXIT_USAGE, collect, engines
from grader.batch.progress import Counts, Progress
from grader.batch.task import ROOT, run_task
from grader.classfiles import state
from grader.classfiles.discover import DiscoverError, Found, discover
from grader.classfiles.state import Status
from grader.commands import grader_command

if TYPE_CHECKING:
    from grader.keyfile import Key
    from grader.problem.spec import Problem

SUBCOMMANDS = ("status", "resubmit", "collect", "task")


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m grader batch",
        description="Grade every submission of a class, each by `python -m grader grade` in its own process; "
        "resumable (a rerun grades only what is missing or changed). Also: `batch status OUT`, `batch resubmit OUT`, "
        "`batch collect OUT`.",
    )
    p.add_argument(
        "submissions",
        type=Path,
        metavar="SUBMISSIONS",
        help="a folder of per-student folders, a Gradescope export (folder or zip with submission_metadata.yml), "
        "or a text file of git repositories (`URL` or `ID URL` a line; needs --deadline)",
    )
    p.add_argument("--out", type=Path, required=True, help="results: one folder per student, the TA report")
    p.add_argument("--engine", choices=("local", "slurm"), default="local")
    p.add_argument(
        "--problem",
        default=None,  # find_problem(None): the spec marked `default: true`, as grade's --problem
        help="problem name under reference/, or a spec.yaml path (default: the spec marked default: true)",
    )
    p.add_argument("--only", action="append", default=[], help="grade only this implementation; repeatable")
    p.add_argument("--no-perf", action="store_true", help="correctness only (no timing)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="default: cuda with GPU slots")
    p.add_argument("--secret-file", type=Path, default=None, metavar="KEY", help="the grading key (official grades)")
    p.add_argument(
        "--allow-advisory",
        action="store_true",
        help="with --secret-file: grade even where grades cannot be official (checked before the first grade)",
    )
    p.add_argument("--deadline", default=None, help="git lists: grade each repository's last commit before this")
    p.add_argument("--retries", type=int, default=2, help="retries of an infrastructure fault (default 2)")
    lo = p.add_argument_group("local engine")
    lo.add_argument("--gpus", default=None, help="GPU indices or UUIDs, one task each at a time (default: all)")
    lo.add_argument("--slots", type=int, default=None, help="N CPU slots instead of GPUs (CPU-only grading)")
    lo.add_argument(
        "--per-gpu",
        type=int,
        default=2,
        metavar="N",
        help="grades at once on each GPU, their timing stages one at a time (default 2; 1: one grade per GPU)",
    )
    lo.add_argument(
        "--shared-baselines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the baselines once per GPU (no grade using it meanwhile) and time only the control baseline "
        "in each grade, re-measuring when it drifts past 1.5%% (default: on; every score of a 12-submission class "
        'on an H100 agreed with its single grade: docs/performance.md, "A batch\'s baselines"). '
        "--no-shared-baselines: each grade times every baseline",
    )
    sl = p.add_argument_group("slurm engine")
    sl.add_argument("--gres", default="gpu:1", help="per task (default gpu:1; 'none' on a CPU partition)")
    sl.add_argument("--max-parallel", type=int, default=16, help="K in --array=0-N%%K (default 16; 0: no limit)")
    sl.add_argument("--partition", default=None)
    sl.add_argument("--account", default=None)
    sl.add_argument("--qos", default=None)
    sl.add_argument("--cpus-per-task", type=int, default=8)
    sl.add_argument("--mem", default="32G", help="per task (default 32G)")
    sl.add_argument("--time", type=int, default=None, metavar="MIN", help="per task (default: the spec's limits)")
    sl.add_argument("--sbatch-arg", action="append", default=[], help="another #SBATCH line, e.g. --constraint=h200")
    sl.add_argument("--job-name", default="kernel-grade")
    sl.add_argument("--container-image", default=None, help="run in the course image (pyxis/enroot or .sif)")
    sl.add_argument("--container-runtime", choices=("pyxis", "apptainer"), default=None)
    sl.add_argument("--container-workdir", default="/grader", help="the grader's folder in the image")
    sl.add_argument("--image-digest", default=None, help="the image's digest, when the reference has none")
    sl.add_argument("--dry-run", action="store_true", help="write the scripts and print the sbatch lines only")
    return p


def _usage(msg: str) -> int:
    print(f"grader error: {msg}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str]) -> int:
    if os.name != "posix":  # process groups, signals and file locks: a Linux (or macOS) host or cluster
        return _usage("batch runs on Linux or macOS (process groups and signals); grade one submission with `grade`")
    # Everything a batch makes (OUT, the unpacked or cloned inputs, logs, each task's scratch and arguments file) is
    # the grader's alone: a submission's code, run as an unprivileged uid, must find no classmate's work, id or
    # name there (docs/SECURITY.md, "A grade's inputs are private to it"). Folders the grade's own uid must pass
    # through are opened explicitly (grader/identity.py).
    old = os.umask(0o077)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return _sub(argv[0], argv[1:])
        args = _run_parser().parse_args(argv)
        return _run(args, argv)
    finally:
        os.umask(old)  # a caller's own (the tests call main in-process)


def _sub(cmd: str, argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog=f"python -m grader batch {cmd}")
    p.add_argument("out", type=Path, metavar="OUT")
    if cmd == "task":
        p.add_argument("--index", type=int, required=True)
        p.add_argument("--engine", default="local")
        p.add_argument("--slot", default=None)
    if cmd == "resubmit":
        p.add_argument("--indices", default=None, help="e.g. 3,7-9 (default: the missing ones)")
    a = p.parse_args(argv)
    if cmd == "task":
        # The slot: the local engine names it; under Slurm it is the GPU Slurm gave the task (its gres).
        slot = a.slot or os.environ.get("GRADER_BATCH_SLOT")
        if slot is None and a.engine == "slurm":
            slot = os.environ.get("CUDA_VISIBLE_DEVICES") or None
        return run_task(a.out, a.index, engine=a.engine, slot=slot)
    try:
        manifest = state.read_manifest(a.out)
    except (FileNotFoundError, ValueError, OSError) as e:
        return _usage(str(e))
    out = a.out.resolve()
    if cmd == "status":
        return _status(out, manifest)
    if cmd == "collect":
        return _collect(out, manifest)
    return _resubmit(out, manifest, a.indices)


def _parse_indices(text: str) -> list[int]:
    got: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        got += list(range(int(lo), int(hi or lo) + 1))
    return got


def _exit(entries: list[state.Entry]) -> int:
    sts = {e.status for e in entries}
    if sts & {Status.MISSING, Status.RUNNING}:
        return EXIT_INCOMPLETE
    if Status.INFRA in sts:
        return EXIT_INFRA
    return EXIT_NOT_GRADABLE if Status.REFUSED in sts else EXIT_OK


def _missing_hint(out: Path, manifest: dict[str, Any], entries: list[state.Entry]) -> str:
    missing = [e.index for e in entries if e.status in (Status.MISSING, Status.INFRA)]
    if not missing:
        return ""
    if manifest["engine"] == "slurm":
        return engines.resubmit_command(out, [e.index for e in entries if e.status == Status.MISSING] or missing)
    return str(manifest.get("rerun", ""))


def _status(out: Path, manifest: dict[str, Any]) -> int:
    live = engines.live_indices(out) if manifest["engine"] == "slurm" else None
    entries = state.status_of(out, manifest, live)
    n = {st: sum(1 for e in entries if e.status == st) for st in Status}
    print(
        f"{out}: {len(entries)} submissions: {n[Status.DONE]} done, {n[Status.RUNNING]} running or queued, "
        f"{n[Status.INFRA] + n[Status.REFUSED]} failed ({n[Status.INFRA]} not graded: infrastructure, "
        f"{n[Status.REFUSED]} not gradable), {n[Status.MISSING]} missing"
    )
    for e in entries:
        if e.status not in (Status.DONE,):
            print(f"  [{e.index}] {e.sid}: {e.status}{' (' + e.why + ')' if e.why else ''}, {e.attempts} attempt(s)")
    missing = [e for e in entries if e.status == Status.MISSING]
    if missing:
        hint = _missing_hint(out, manifest, entries)
        which = ", ".join(f"{e.index}: {e.sid}" for e in missing[:20])
        print(f"resubmit only the {len(missing)} missing task(s) ({which}):\n  {hint}")
        if manifest["engine"] == "slurm":
            a, b = engines.sbatch_lines(out, manifest, [e.index for e in missing])
            print(f"  (which runs: sbatch {shlex.join(a)}, then sbatch {shlex.join(b)})")
    return _exit(entries)


def _resubmit(out: Path, manifest: dict[str, Any], indices: str | None) -> int:
    if manifest["engine"] != "slurm":
        return _usage(f"{out} is a local batch: run it again to grade what is missing: {manifest.get('rerun', '')}")
    live = engines.live_indices(out)
    entries = state.status_of(out, manifest, live)
    if indices:
        try:
            want = _parse_indices(indices)
        except ValueError:
            return _usage(f"--indices {indices!r}: e.g. 3,7-9")
        known = {e.index for e in entries}
        if set(want) - known:
            return _usage(
                f"--indices: no submission {sorted(set(want) - known)[:5]} in this batch (0-{len(entries) - 1})"
            )
    else:
        want = [e.index for e in entries if e.status == Status.MISSING]
    busy = sorted(set(want) & (live or set()))
    want = [i for i in want if i not in (live or set())]
    if busy:
        print(f"not resubmitted, still queued or running: {engines.array_spec(busy)}")
    if not want:
        print("nothing to resubmit")
        return _exit(entries)
    run = uuid.uuid4().hex[:12]
    by_index = {e.index: e for e in entries}
    for i in want:
        state.new_run(out, by_index[i].sid, run)
    try:
        array, coll = engines.submit(out, manifest, want, why="resubmit")
    except engines.EngineError as e:
        return _usage(str(e))
    print(f"submitted array job {array} (tasks {engines.array_spec(want)}) and collect job {coll}")
    return EXIT_OK


def _collect(out: Path, manifest: dict[str, Any], elapsed_slot_s: float | None = None) -> int:
    resubmit = ""
    live = None
    if manifest["engine"] == "slurm":
        live = engines.live_indices(out)
        resubmit = _retry_slurm(out, manifest, live)
        live = engines.live_indices(out)
    s = collect.summarize(out, manifest, live, report=True)
    s.resubmit = (
        "" if not any(e.status == Status.MISSING for e in s.entries) else _missing_hint(out, manifest, s.entries)
    )
    collect.write_summary(out, s)
    collect.print_summary(s)
    if resubmit:
        print(resubmit)
    if elapsed_slot_s and s.graded:
        print(
            f"throughput over this run's elapsed time x slots: {s.graded / (elapsed_slot_s / 3600):.1f} "
            "submissions per slot-hour (idle tails included)"
        )
    return _exit(s.entries)


def _retry_slurm(out: Path, manifest: dict[str, Any], live: set[int] | None) -> str:
    """Resubmit the tasks whose last attempt was an infrastructure fault with retries left, away from the nodes
    they failed on where the cluster has others."""
    retries = int(manifest["options"].get("retries", 0))
    want, bad_hosts = [], set()
    for it in manifest["items"]:
        sid, key, i = it["sid"], it["key"], int(it["index"])
        if (live and i in live) or state.is_done(out, sid, key) or state.is_refused(out, sid, key):
            continue
        hist = state.attempts(out, sid)
        last = state.last_attempt(hist, key)
        if last is not None and last.get("outcome") == state.Outcome.INFRA and state.infra_faults(hist, key) <= retries:
            want.append(i)
            if last.get("host"):
                bad_hosts.add(str(last["host"]))
    if not want:
        return ""
    exclude = sorted(bad_hosts) if bad_hosts and engines.other_nodes(bad_hosts) else []
    try:
        array, coll = engines.submit(out, manifest, want, exclude, why="retry of infrastructure faults")
    except engines.EngineError as e:
        return f"could not resubmit the infrastructure faults ({engines.array_spec(want)}): {e}"
    return (
        f"retrying {len(want)} infrastructure fault(s) (tasks {engines.array_spec(want)}"
        f"{', not on ' + ','.join(exclude) if exclude else ''}): array job {array}, collect job {coll}; "
        "this report is interim"
    )


def _separated_grades() -> bool:
    """Whether this batch's grades run submission code as uids of their own (root, grader/identity.py): then no
    input may be open to every user. Otherwise submission code runs as the TA's own user, and the grade says it is
    advisory."""
    return hasattr(os, "getuid") and os.getuid() == 0 and os.environ.get("GRADER_SAME_UID") != "1"


def _preflight(args: argparse.Namespace, problem: Any) -> int | None:
    """Will this batch's grades be official? Asked once, before the first grade and before OUT is made
    (grader/preflight.py); EXIT_USAGE with what to fix when not, unless --allow-advisory. Grades in a container
    image on a cluster's nodes are not this machine's: not checked here."""
    if args.engine == "slurm" and args.container_image:
        print("preflight: not checked here (the grades run in the container image on the cluster's nodes)")
        return None
    from grader import box, preflight

    # Several grades share this host or container: none may count on "one grade per container" (the image's
    # GRADER_CONTAINMENT). Without a box they are not official; the check below, and each task, say so.
    os.environ.pop(box.DECLARE_ENV, None)

    go, text = preflight.check(problem, args.allow_advisory, "this batch's grades")
    if text:
        print(text, file=sys.stderr)
    return None if go else EXIT_USAGE


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    out: Path = args.out.resolve()
    checked = _check_args(args)
    if isinstance(checked, int):
        return checked
    problem, key = checked
    lock = _make_out(out, args.engine)  # the batch's lock on OUT: held (this reference) until _run returns
    if isinstance(lock, int):
        return lock
    _warn_without_jsonschema(out)
    if why := availability.torch_compiled_each_start():
        print(f"warning: {why}", file=sys.stderr)
    files = tuple(i.file for i in problem.implementations.values())
    try:
        found = discover(args.submissions, files, state.inputs_dir(out), args.deadline)
    except DiscoverError as e:
        return _usage(str(e))
    if found.metadata is not None:  # the TA report names each folder's submitters from it
        shutil.copyfile(found.metadata, out / "submission_metadata.yml")
    for skip in found.skipped:
        print(f"not graded: {skip.sid}: {skip.why}", file=sys.stderr)
    placed = _slots_and_device(args, out)
    if isinstance(placed, int):
        return placed
    slots, device = placed
    manifest = _manifest(args, argv, out, problem, key, found, device)
    state.write_manifest(out, manifest)
    items: list[dict[str, Any]] = manifest["items"]
    # Done, or refused by the grader with the same key (it would refuse it again): skipped.
    todo = [
        it
        for it in items
        if not state.is_done(out, it["sid"], it["key"]) and not state.is_refused(out, it["sid"], it["key"])
    ]
    run = uuid.uuid4().hex[:12]
    print(
        f"batch: {len(items)} submission(s) from {args.submissions} ({found.kind}); {len(items) - len(todo)} already "
        f"done with this grader, spec and options; {len(todo)} to grade ({args.engine}, device {device})"
    )
    if args.engine == "slurm":
        return _submit_slurm(out, manifest, todo, run, args.dry_run)
    code = _grade_local(out, manifest, todo, slots, run, device)
    if found.skipped and code == EXIT_OK:
        code = EXIT_NOT_GRADABLE
    return code


def _check_args(args: argparse.Namespace) -> tuple[Problem, Key | None] | int:
    """The problem and the key, after every check that needs nothing made under OUT; else the exit code (a usage
    error, said on stderr)."""
    from grader import keyfile
    from grader.problem.spec import SpecError, find_problem, load_problem

    if args.retries < 0:
        return _usage(f"--retries {args.retries}: 0 or more")
    try:
        keyfile.refuse_environment()
        key = keyfile.load(args.secret_file) if args.secret_file is not None else None
    except keyfile.KeyFileError as e:
        return _usage(str(e))
    try:
        problem = load_problem(find_problem(args.problem, ROOT))
    except SpecError as e:
        return _usage(str(e))
    for o in args.only:
        if o not in problem.implementations:
            return _usage(f"--only {o}: no such implementation (choose from {', '.join(problem.implementations)})")
    if not args.submissions.exists():  # before anything is made under OUT
        return _usage(
            f"{args.submissions}: no such file or folder (pass a folder of submissions, an export zip or a list)"
        )
    if key is not None:
        stop = _preflight(args, problem)
        if stop is not None:
            return stop
    if _separated_grades() and identity.open_to_everyone(args.submissions):
        # Its path is on this batch's command line, which every user can read in /proc.
        return _usage(
            f"{args.submissions} can be read by every user of this machine, so a submission's code could read its "
            f"classmates' work there: make it private (chmod 700 it, or a folder above it) and run again"
        )
    return problem, key


def _make_out(out: Path, engine: str) -> TextIO | int:
    """OUT and the inputs' folder, the grader's only, and the batch's lock on OUT, held (the open file returned)
    for the whole run; else the exit code (a usage error, said on stderr)."""
    try:
        (state.batch_dir(out)).mkdir(parents=True, exist_ok=True)
        os.chmod(out, 0o700)  # OUT holds every student's grade, report and log: the grader's only
        state.inputs_dir(out).mkdir(mode=0o700, exist_ok=True)
        os.chmod(state.inputs_dir(out), 0o700)  # the unpacked export and the clones: every student's code
    except OSError as e:
        return _usage(f"cannot write to {out}: {e.strerror or e} (pass --out DIR)")
    import fcntl  # POSIX only (main checked)

    lock = open(state.batch_dir(out) / "lock", "w")  # noqa: SIM115 (held for the whole run)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return _usage(f"another `batch` is running on {out} (wait for it, or use another --out)")
    if engine == "slurm" and engines.live_indices(out):
        return _usage(f"{out}: tasks of an earlier submission are still queued or running (`batch status {out}`)")
    return lock


def _warn_without_jsonschema(out: Path) -> None:
    if importlib.util.find_spec("jsonschema") is None:  # said now, not after hours of grading
        from grader.report.validate import NEEDS_JSONSCHEMA

        print(
            "warning: the jsonschema package is not installed: every submission will be graded, but the TA report "
            f"at the end will not be written ({NEEDS_JSONSCHEMA}; or make it later with "
            f"`{grader_command('report', str(out))}`)",
            file=sys.stderr,
        )


def _slots_and_device(args: argparse.Namespace, out: Path) -> tuple[list[engines.Slot], str] | int:
    """The local engine's slots (none under Slurm) and the grades' device (--device auto: cuda with GPU slots or a
    GPU gres); else the exit code (a usage error, said on stderr)."""
    if args.engine != "local":
        return [], args.device if args.device != "auto" else ("cpu" if args.gres in ("", "none") else "cuda")
    try:
        records = state.batch_dir(out) / "baselines" if args.shared_baselines and not args.no_perf else None
        slots = engines.make_slots(args.gpus, args.slots, args.per_gpu, state.batch_dir(out) / "locks", records)
    except engines.EngineError as e:
        return _usage(str(e))
    if not slots:
        print("no GPU found (nvidia-smi lists none): grading on CPU with 1 slot (--slots N for more)")
        slots = [engines.Slot("cpu0", "")]
    gpu_slots = any(s.cuda for s in slots)
    device = args.device if args.device != "auto" else ("cuda" if gpu_slots else "cpu")
    if device == "cuda" and not gpu_slots:
        return _usage("--device cuda with CPU slots: give --gpus (or drop --device cuda)")
    return slots, device


def _manifest(
    args: argparse.Namespace, argv: list[str], out: Path, problem: Problem, key: Key | None, found: Found, device: str
) -> dict[str, Any]:
    """The batch's manifest (grader/classfiles/state.py): its options, each submission's item and result key, and the
    Slurm settings under Slurm."""
    image_digest = state.image_digest(args.container_image, args.image_digest)
    key_parts = {
        "grader": state.grader_version(),
        "spec": state.spec_hash(problem.path, problem.reference),
        "image": image_digest,
        "only": sorted(args.only),
        "perf": not args.no_perf,
        "device": device,
        # Which key graded it (a hash of the signing key, which reveals nothing of it): a new key regrades.
        "key": hashlib.sha256(key.signing).hexdigest()[:16] if key is not None else None,
    }
    items = [
        {"index": i, **x.to_json(), "key": state.result_key(x.content, key_parts)} for i, x in enumerate(found.items)
    ]
    limits = problem.limits
    grade_timeout = limits.build_s + limits.correctness_s + limits.timing_s + 300
    options = {
        "problem": str(problem.path),
        "only": args.only,
        "perf": not args.no_perf,
        "device": device,
        "secret_file": str(args.secret_file.resolve()) if args.secret_file else None,
        "retries": args.retries,
        "image": args.container_image,
        "image_digest": image_digest,
        "grade_timeout_s": grade_timeout,
        "shared_baselines": bool(getattr(args, "shared_baselines", False)) and args.engine == "local",
    }
    manifest: dict[str, Any] = {
        "engine": args.engine,
        "source": str(args.submissions.resolve()),
        "kind": found.kind,
        "options": options,
        "key_parts": key_parts,
        "items": items,
        "skipped": [{"sid": s.sid, "why": s.why} for s in found.skipped],
        "created": time.time(),
        "rerun": f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, '-m', 'grader', 'batch', *argv])}",
    }
    if args.engine == "slurm":
        manifest["slurm"] = _slurm_settings(args, out, options, grade_timeout)
    return manifest


def _slurm_settings(
    args: argparse.Namespace, out: Path, options: dict[str, Any], grade_timeout: float
) -> dict[str, Any]:
    """The manifest's "slurm": the sbatch options, the container and the folders mounted in it."""
    runtime = args.container_runtime or (
        "apptainer" if args.container_image and args.container_image.endswith((".sif", ".img")) else "pyxis"
    )
    # What the task reads and writes, at the same paths inside the image: the submissions, OUT, the key.
    src = args.submissions.resolve()
    mounts = {str(src if src.is_dir() else src.parent), str(out)}
    if options["secret_file"]:
        mounts.add(str(Path(options["secret_file"]).parent))
    return {
        "gres": args.gres,
        "max_parallel": args.max_parallel,
        "partition": args.partition,
        "account": args.account,
        "qos": args.qos,
        "cpus": args.cpus_per_task,
        "mem": args.mem,
        "time_min": args.time or engines._minutes(grade_timeout + 300),
        "sbatch_args": args.sbatch_arg,
        "job_name": args.job_name,
        "image": args.container_image,
        "runtime": runtime,
        "workdir": args.container_workdir,
        "mounts": sorted(mounts),
    }


def _grade_local(
    out: Path, manifest: dict[str, Any], todo: list[dict[str, Any]], slots: list[engines.Slot], run: str, device: str
) -> int:
    """Grade `todo` on this host's slots, then collect (the TA report and the summary); 130 on Ctrl-C."""
    items = manifest["items"]
    for it in todo:
        state.new_run(out, it["sid"], run)
    prog = Progress(Counts(total=len(items), skipped=len(items) - len(todo)))
    t0 = time.monotonic()
    try:
        with prog:
            engines.run_local(out, manifest, todo, slots, prog)
    except KeyboardInterrupt:
        print(
            f"batch: interrupted; what was graded is kept. Run the same command again to go on:\n  {manifest['rerun']}"
        )
        return 130
    elapsed = time.monotonic() - t0
    return _collect(out, manifest, elapsed_slot_s=elapsed * len(slots) if todo and device == "cuda" else None)


def _submit_slurm(out: Path, manifest: dict[str, Any], todo: list[dict[str, Any]], run: str, dry: bool) -> int:
    task, coll = engines.write_scripts(out, manifest)
    if not todo:
        print("nothing to grade: writing the report")
        return _collect(out, manifest)
    indices = [int(it["index"]) for it in todo]
    if dry:
        a, b = engines.sbatch_lines(out, manifest, indices)
        print(f"dry run: wrote {task} and {coll}; would run:\n  sbatch {shlex.join(a)}\n  sbatch {shlex.join(b)}")
        return EXIT_OK
    for it in todo:
        state.new_run(out, it["sid"], run)
    try:
        array, cj = engines.submit(out, manifest, indices, why="batch")
    except engines.EngineError as e:
        return _usage(str(e))
    print(
        f"submitted array job {array} ({len(indices)} task(s): {engines.array_spec(indices)}) and collect job {cj} "
        f"(after it: the TA report in {out}). Watch: {sys.executable} -m grader batch status {out}"
    )
    return EXIT_OK
