"""A real one-node Slurm on this machine, for the Slurm test (tests/slurm/test_slurm.py) and by hand.

Debian's own packages (slurmctld, slurmd, slurm-client, munge; `apt-get install` when missing and allowed), started
as plain daemons, without systemd: a munge key and socket of its own, a generated slurm.conf (partitions `cpu`,
the default, and `gpu`, as profiles/slurm names them; the node's real CPUs and memory from `slurmd -C`;
proctrack/linuxproc, task/none, no cgroups, no accounting; select/cons_tres; a job-completion record a line,
jobcomp/filetxt), every state file and log under one folder, then waits until `sinfo` shows the node idle.

    python tests/slurm/local_cluster.py start     # prints the folder; `stop` ends the daemons, `status` shows them

The daemons run as root (SlurmUser=root): meant for a throw-away machine or container. slurm.conf is written to
/etc/slurm/slurm.conf as well (only where none is there, or the one there is this module's), because the jobstep
plugin runs `srun` inside each job with every SLURM_* variable, SLURM_CONF included, taken out of its environment.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
DAEMONS = ("slurmctld", "slurmd", "munged", "sinfo", "squeue", "sbatch", "scontrol", "scancel")
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by towers tests/slurm/local_cluster.py"
DEFAULT_DIR = Path(os.environ.get("TOWERS_SLURM_DIR", "/tmp/towers-slurm"))
PARTITIONS = ("cpu", "gpu")   # profiles/slurm: `cpu` by default, `gpu` for the GPU rules


class Unavailable(RuntimeError):
    """Slurm cannot be installed or started here (the test skips with this one line)."""


@dataclass
class Cluster:
    folder: Path
    node: str
    cpus: int
    memory_mb: int

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    @property
    def ctld_log(self) -> Path:
        return self.folder / "log/slurmctld.log"

    @property
    def jobcomp(self) -> Path:
        return self.folder / "log/jobcomp.txt"

    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *command, check=True) -> str:
        done = subprocess.run([str(c) for c in command], env=self.env(), capture_output=True, text=True, timeout=60)
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(map(str, command))}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T").split("\n")[0].strip()

    def submitted(self) -> list[int]:
        """Job ids of every batch job slurmctld accepted since it started (its log)."""
        import re

        text = self.ctld_log.read_text(errors="replace") if self.ctld_log.exists() else ""
        return [int(i) for i in re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", text)]

    def completions(self) -> list[dict]:
        """One record a finished job (jobcomp/filetxt): JobId, JobState, Partition, ProcCnt, ..."""
        if not self.jobcomp.exists():
            return []
        records = []
        for line in self.jobcomp.read_text(errors="replace").splitlines():
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            if "JobId" in fields:
                records.append(fields)
        return records


def _missing() -> list[str]:
    return [name for name in DAEMONS if not shutil.which(name) and not Path("/usr/sbin", name).exists()]


def install(allow: bool = True) -> None:
    """Debian's Slurm and munge, when a daemon or client is missing; Unavailable where they cannot be had."""
    if not _missing():
        return
    if not allow or os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable(f"Slurm is not installed ({', '.join(_missing())} missing) and cannot be installed here "
                          f"(needs root and apt-get: apt-get install {' '.join(PACKAGES)})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], env=env, capture_output=True, text=True)
    if done.returncode:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        done = subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], env=env, capture_output=True, text=True)
    if done.returncode or _missing():
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise Unavailable(f"apt-get install {' '.join(PACKAGES)} failed: {tail}")


def _node_line() -> tuple[str, int, int, str]:
    """(hostname, CPUs, RealMemory, slurmd -C's NodeName line): the node as Slurm itself measures it."""
    out = subprocess.run([_bin("slurmd"), "-C"], capture_output=True, text=True).stdout
    line = next((l for l in out.splitlines() if l.startswith("NodeName=")), "")
    if not line:
        raise Unavailable(f"slurmd -C printed no NodeName line: {out.strip()[:200]}")
    fields = dict(part.split("=", 1) for part in line.split())
    return fields["NodeName"], int(fields["CPUs"]), int(fields["RealMemory"]), line


def _bin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def slurm_conf(folder: Path, node_line: str, node: str, munge_socket: Path) -> str:
    return "\n".join([
        MARK,
        "ClusterName=towers-local",
        f"SlurmctldHost={node}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket},cred_expire=10",   # a requeued job waits this long (default 120 s)
        "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc",   # no cgroups
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",   # no slurmdbd: sacct answers "accounting storage is disabled"
        "JobCompType=jobcomp/filetxt",         # but one line a finished job, for the test's counts
        f"JobCompLoc={folder}/log/jobcomp.txt",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "ReturnToService=1",                  # an admin-set DOWN node stays down until resumed
        "MinJobAge=300",                       # finished jobs stay in squeue 5 minutes: the plugin's squeue status
        "SchedulerParameters=sched_interval=2,batch_sched_delay=1",
        "MessageTimeout=30",
        "SlurmdTimeout=300",
        "InactiveLimit=0",
        "KillWait=5",
        f"StateSaveLocation={folder}/state",
        f"SlurmdSpoolDir={folder}/spool",
        f"SlurmctldPidFile={folder}/run/slurmctld.pid",
        f"SlurmdPidFile={folder}/run/slurmd.pid",
        f"SlurmctldLogFile={folder}/log/slurmctld.log",
        f"SlurmdLogFile={folder}/log/slurmd.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        node_line + " State=UNKNOWN",   # slurmd -C: the node's own CPUs, sockets, cores and RealMemory
        f"PartitionName={PARTITIONS[0]} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        f"PartitionName={PARTITIONS[1]} Nodes={node} MaxTime=INFINITE State=UP",
        "",
    ])


def _pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().split()[0])
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError, IndexError):
        return None


def start(folder: Path = DEFAULT_DIR, install_missing: bool = True, timeout: float = 60) -> Cluster:
    """munged, slurmctld and slurmd from a clean `folder`, then wait for the node to be idle."""
    install(install_missing)
    if os.geteuid() != 0:
        raise Unavailable("the local Slurm runs its daemons as root; not root here")
    node, cpus, memory, line = _node_line()
    try:
        socket.gethostbyname(node)
    except OSError:
        raise Unavailable(f"this machine's hostname {node!r} does not resolve (slurmctld needs it: add it to "
                          "/etc/hosts)")
    folder = Path(folder)
    stop(folder)
    if SYSTEM_CONF.exists() and MARK not in SYSTEM_CONF.read_text(errors="replace"):
        raise Unavailable(f"{SYSTEM_CONF} is another Slurm's configuration; not touching it")
    shutil.rmtree(folder, ignore_errors=True)
    for sub in ("state", "spool", "run", "log", "munge"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(folder / "munge", 0o700)
    key = folder / "munge/munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    munge_socket = folder / "munge/munge.socket.2"
    subprocess.run([_bin("munged"), "--force", f"--socket={munge_socket}", f"--key-file={key}",
                    f"--pid-file={folder}/run/munged.pid", f"--log-file={folder}/log/munged.log",
                    f"--seed-file={folder}/munge/munged.seed"], check=True, capture_output=True)
    cluster = Cluster(folder, node, cpus, memory)
    text = slurm_conf(folder, line, node, munge_socket)
    cluster.conf.write_text(text)
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.write_text(text)
    env = cluster.env()
    for daemon in ("slurmctld", "slurmd"):
        done = subprocess.run([_bin(daemon), "-f", str(cluster.conf)], env=env, capture_output=True, text=True)
        if done.returncode:
            stop(folder)
            raise Unavailable(f"{daemon} did not start: {done.stderr.strip()[:300]}")
    deadline = time.time() + timeout
    state = ""
    while time.time() < deadline:
        try:
            state = cluster.node_state()
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            state = str(err)
        if state == "idle":
            return cluster
        time.sleep(1)
    logs = "; ".join(p.read_text(errors="replace").strip().splitlines()[-1] for p in (folder / "log").glob("slurm*.log")
                     if p.read_text(errors="replace").strip())
    stop(folder)
    raise Unavailable(f"the node did not become idle in {timeout:.0f} s (sinfo: {state!r}; {logs})")


def _end(folder: Path, name: str) -> None:
    """End one daemon of this folder's (by its pid file): SIGTERM, SIGKILL after 10 s."""
    pid = _pid(folder / f"run/{name}.pid")
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if _pid(folder / f"run/{name}.pid") != pid:
            break
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)


def stop(folder: Path = DEFAULT_DIR) -> None:
    """End this folder's slurmd, slurmctld and munged (by their pid files), and remove the system slurm.conf
    this module wrote."""
    folder = Path(folder)
    for name in ("slurmd", "slurmctld", "munged"):
        _end(folder, name)
    if SYSTEM_CONF.exists() and MARK in SYSTEM_CONF.read_text(errors="replace"):
        SYSTEM_CONF.unlink()


def restart_controller(cluster: Cluster, forget_jobs: bool = False, timeout: float = 60) -> str:
    """Stop slurmctld and start it again, with forget_jobs from a clean state (`slurmctld -c`: every job record
    gone, as when a controller loses its StateSaveLocation; the node reports the jobs it runs as orphans, which
    slurmctld ends); then wait until the node is back. Returns the node's state."""
    _end(cluster.folder, "slurmctld")
    command = [_bin("slurmctld"), "-f", str(cluster.conf)] + (["-c"] if forget_jobs else [])
    done = subprocess.run(command, env=cluster.env(), capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"slurmctld did not start again: {done.stderr.strip()[:300]}")
    deadline, state = time.time() + timeout, ""
    while time.time() < deadline:
        try:
            state = cluster.node_state()
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            state = str(err)
        if state in ("idle", "mixed", "allocated"):
            return state
        time.sleep(1)
    raise RuntimeError(f"the node did not come back in {timeout:.0f} s after slurmctld restarted (sinfo: {state!r})")


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "status"
    folder = Path(argv[1]) if len(argv) > 1 else DEFAULT_DIR
    if what == "start":
        try:
            cluster = start(folder)
        except Unavailable as why:
            print(f"slurm: {why}", file=sys.stderr)
            return 1
        print(f"slurm: node {cluster.node} idle ({cluster.cpus} CPUs, {cluster.memory_mb} MB), partitions "
              f"{', '.join(PARTITIONS)}; state and logs in {folder}; export SLURM_CONF={cluster.conf}")
        return 0
    if what == "stop":
        stop(folder)
        print(f"slurm: stopped ({folder})")
        return 0
    if what == "status":
        pids = {name: _pid(folder / f"run/{name}.pid") for name in ("munged", "slurmctld", "slurmd")}
        print(" ".join(f"{name}={pid or '-'}" for name, pid in pids.items()))
        return 0 if all(pids.values()) else 1
    print("usage: local_cluster.py start|stop|status [FOLDER]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
