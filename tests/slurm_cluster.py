"""A real single-node Slurm cluster for the tests (tests/test_batch_slurm.py): Debian's slurm-wlm and munge,
installed when missing (`apt-get install -y slurm-wlm munge`, as root), configured in a temporary folder with its
own ports, munge key and socket, and two fake GPUs (gres entries backed by plain files), then munged, slurmctld and
slurmd started in the foreground as our children. stop() cancels every job of this cluster and ends the three
daemons by their pids, so nothing is left running.

`start` raises Unavailable, with the reason, where Slurm cannot be started (not root, no apt-get, no network to
Debian's mirrors, a daemon that will not come up); the test then skips and says why.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "squeue", "scancel", "sinfo")
APT_TIMEOUT_S = 900


class Unavailable(Exception):
    pass


def _find(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d) / name).exists()), None)


def install() -> None:
    """Debian's packages, when any of the programs is missing."""
    if all(_find(x) for x in DAEMONS + COMMANDS):
        return
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        raise Unavailable("slurm-wlm and munge are not installed, and installing them needs root")
    if shutil.which("apt-get") is None:
        raise Unavailable("slurm-wlm and munge are not installed, and there is no apt-get to install them")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=APT_TIMEOUT_S, env=env, check=False)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"{' '.join(cmd)} did not finish in {APT_TIMEOUT_S} s") from None
        if r.returncode != 0:
            raise Unavailable(f"{' '.join(cmd)} failed: {' '.join((r.stderr or r.stdout).split())[-300:]}")
    missing = [x for x in DAEMONS + COMMANDS if not _find(x)]
    if missing:
        raise Unavailable(f"installed slurm-wlm and munge, yet {', '.join(missing)} not found")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]  # os.environ plus SLURM_CONF
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def run(self, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=self.env, check=False)

    def jobs(self) -> list[tuple[str, str]]:
        r = self.run("squeue", "-h", "-r", "-o", "%i %T")
        return [tuple(ln.split()[:2]) for ln in r.stdout.splitlines() if ln.strip()]  # type: ignore[misc]

    def wait_idle(self, timeout: float = 300) -> None:
        """Until the queue is empty (every job, collect jobs included, has ended)."""
        t0 = time.monotonic()
        while self.jobs():
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"jobs still queued after {timeout} s: {self.jobs()}\n{self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:] for p in sorted((self.root / "log").glob("*"))
        )

    def stop(self) -> None:
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--full", "-u", getpass.getuser())
            t0 = time.monotonic()
            while self.jobs() and time.monotonic() - t0 < 30:
                time.sleep(0.5)
        for name in reversed(DAEMONS):  # slurmd, slurmctld, then munged
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start(root: Path, gpus: int = 2) -> Cluster:
    install()
    host = socket.gethostname().split(".")[0]
    for d in ("munge", "state", "spool", "log", "dev"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "munge", 0o711)  # munged wants its socket's folder searchable by all
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = root / "munge" / "munge.socket"
    for i in range(gpus):
        # The fake GPUs' device files. Slurm sets a task's CUDA_VISIBLE_DEVICES only for character devices: nodes
        # like /dev/null's where mknod is allowed (root, CAP_MKNOD), else plain files (the GPUs are then counted,
        # not named to the task).
        dev = root / "dev" / f"gpu{i}"
        try:
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except OSError:
            dev.touch()
    cpus = os.cpu_count() or 1
    mem = 8000
    conf = root / "slurm.conf"
    conf.write_text(
        f"""ClusterName=gradertest
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=5
MinJobAge=600
InactiveLimit=0
NodeName={host} CPUs={cpus} RealMemory={mem} Gres=gpu:{gpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    (root / "gres.conf").write_text(f"NodeName={host} Name=gpu File={root / 'dev'}/gpu[0-{gpus - 1}]\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    c = Cluster(root, env)
    cmds = {
        "munged": [_find("munged"), "-F", "--force", f"--socket={sock}", f"--key-file={key}",
                   f"--log-file={root / 'log' / 'munged.log'}", f"--pid-file={root / 'munge' / 'munged.pid'}",
                   f"--seed-file={root / 'munge' / 'seed'}"],
        "slurmctld": [_find("slurmctld"), "-D", "-f", str(conf)],
        "slurmd": [_find("slurmd"), "-D", "-f", str(conf)],
    }  # fmt: skip
    try:
        for name, cmd in cmds.items():
            out = open(root / "log" / f"{name}.out", "wb")  # noqa: SIM115 (the daemon's for its life)
            c.procs[name] = subprocess.Popen([str(x) for x in cmd], stdout=out, stderr=subprocess.STDOUT, env=env)
            time.sleep(1.0 if name == "munged" else 0.5)
            if c.procs[name].poll() is not None:
                raise Unavailable(f"{name} exited at once ({c.procs[name].returncode}):\n{c.logs()}")
        t0 = time.monotonic()
        while True:
            r = c.run("sinfo", "-h", "-N", "-o", "%T")
            if r.returncode == 0 and r.stdout.strip() in ("idle", "mixed", "allocated"):
                return c
            if time.monotonic() - t0 > 60:
                raise Unavailable(f"the node did not come up in 60 s (sinfo: {r.stdout.strip() or r.stderr.strip()})")
            time.sleep(0.5)
    except BaseException:
        c.stop()
        raise
