"""A real Slurm on the LAN lab (tests/support/lab.py), for tests and `bench/lanlab.py up N --slurm`.

Each lab host (a network namespace with its own sshd and Docker engine) is also a Slurm node: a
`slurmd` started in its namespace and named after it (h0, h1, …). `slurmctld` and a munged of
the lab's own (own key and socket: the machine's munge is left alone) run in this machine's
namespace, reached by the nodes at the bridge address. Folders under `shared` are seen by every
node alike (one filesystem), as a cluster's shared filesystem would be.

What a real cluster has and the lab must make (tried by hand first:
../shared/research/slurm-on-this-machine.md): each task's `docker` talks to its own node's engine (a TaskProlog sets
DOCKER_HOST), and the node names of SLURM_JOB_NODELIST resolve inside `--network host`
containers (every engine sees the lab's hosts file as /etc/hosts). Jobs are submitted as the
unprivileged `JOB_USER`, who may use the engines (their sockets' group), as a cluster's users are
in the docker group.

Everything lives under the lab's folder and is found from the tag alone: `down` kills the daemons
by their pid files and removes the lab, so it also cleans up after a crash, and twice is fine.
"""
from __future__ import annotations

import grp
import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.common import free_ports
from support.lab import Lab, available as lab_available, enter, kill_pidfile

SUBNET = "10.213.31"          # `bench/lanlab.py up N --slurm`; the tests pick their own
JOB_USER = "nobody"
TOOLS = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
PACKAGES = "slurm-wlm slurmctld slurmd munge slurm-client"


@dataclass
class SlurmLab(Lab):
    tag: str = "slurm"
    subnet: str = SUBNET
    prefix: str = "tfs"
    name_hosts: bool = True
    engine_group: str = field(default_factory=lambda: grp.getgrgid(pwd.getpwnam(JOB_USER).pw_gid).gr_name)

    @property
    def slurm_dir(self) -> Path:
        return self.root / "slurm"

    @property
    def munge_dir(self) -> Path:
        return self.root / "munge"

    @property
    def conf(self) -> Path:
        return self.slurm_dir / "slurm.conf"

    @property
    def shared(self) -> Path:
        """Every node sees it (and JOB_USER may make folders in it)."""
        return self.root / "shared"

    def _note(self) -> None:
        if os.environ.get("TFC_TEST_RUN"):
            from support import rigs
            rigs.note("slurm", tag=self.tag, root_dir=str(self.root_dir), subnet=self.subnet)

    def up(self, n: int = 2, **kw) -> "SlurmLab":
        super().up(n, **kw)
        for folder in (self.root_dir, self.root, *(h.folder for h in self.hosts)):   # whatever the umask:
            folder.chmod(0o755)      # munge and JOB_USER reach their files, JOB_USER the engines' sockets
        self.shared.mkdir()
        self.shared.chmod(0o1777)
        self._start_munge()
        self._write_conf(free_ports(1)[0])
        self._start(["slurmctld", "-D", "-f", str(self.conf)], "slurmctld")
        for host in self.hosts:
            # nsenter, not `ip netns exec`: that one remounts /sys and slurmd finds no cgroup mount.
            self._start([*enter(host.ns), "slurmd", "-D", "-f", str(self.conf), "-N", host.name], f"slurmd-{host.name}")
        self.wait_until_idle()
        return self

    def _start(self, argv: list[str], name: str) -> None:
        log = open(self.slurm_dir / f"{name}.out", "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        (self.slurm_dir / f"{name}.started.pid").write_text(str(proc.pid))

    def _start_munge(self) -> None:
        m = self.munge_dir
        m.mkdir()
        m.chmod(0o755)
        (m / "munge.key").write_bytes(os.urandom(1024))
        (m / "munge.key").chmod(0o400)
        for path in (m, m / "munge.key"):
            shutil.chown(path, "munge", "munge")
        proc = subprocess.Popen(
            ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "munged", "-F",
             f"--socket={m}/munge.socket", f"--key-file={m}/munge.key", f"--pid-file={m}/munged.pid",
             f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"],
            stdout=subprocess.DEVNULL, stderr=open(self.root / "munged.err", "w"), start_new_session=True)
        (self.root / "munged.started.pid").write_text(str(proc.pid))
        for _ in range(100):
            if (m / "munge.socket").exists():
                return
            time.sleep(0.1)
        raise RuntimeError(f"munged did not start: {(self.root / 'munged.err').read_text()[-2000:]}")

    def _write_conf(self, ctld_port: int) -> None:
        s = self.slurm_dir
        s.mkdir()
        s.chmod(0o755)
        prolog = s / "task_prolog.sh"
        # Each node's own engine: tasks inherit the submitter's environment, not slurmd's.
        prolog.write_text(f'#!/bin/sh\necho "export DOCKER_HOST=unix://{self.root}/$SLURMD_NODENAME/docker.sock"\n')
        prolog.chmod(0o755)
        nodes = [f"NodeName={h.name} NodeAddr={h.address} CPUs=1 RealMemory=1000 State=UNKNOWN" for h in self.hosts]
        self.conf.write_text("\n".join([
            f"ClusterName=tfs{self.tag}"[:40],
            # slurmctld checks that this names the machine it runs on.
            f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.subnet}.1)", f"SlurmctldPort={ctld_port}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munge_dir}/munge.socket",
            "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={s}/ctld", f"SlurmdSpoolDir={s}/spool-%n",
            f"SlurmctldPidFile={s}/slurmctld.pid", f"SlurmdPidFile={s}/slurmd-%n.pid",
            f"SlurmctldLogFile={s}/slurmctld.log", f"SlurmdLogFile={s}/slurmd-%n.log",
            # No cgroups: the nodes share this machine's; processes are tracked by parentage.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none", "ReturnToService=2",
            "SchedulerType=sched/backfill", "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
            # No accounting here: finished jobs stay visible to `scontrol show job` for 10 minutes.
            "MinJobAge=600", f"TaskProlog={prolog}",
            *nodes,
            f"PartitionName=lab Nodes={','.join(h.name for h in self.hosts)} Default=YES MaxTime=INFINITE State=UP",
        ]) + "\n")
        self.conf.chmod(0o644)      # JOB_USER's sbatch reads it

    @property
    def env(self) -> dict[str, str]:
        """The environment of a Slurm command (sbatch, squeue, …) on this lab."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, user: str | None = None, cwd: Path | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm client command, as `user` when given (as a cluster's users submit their jobs)."""
        prefix = ["runuser", "-u", user, "--"] if user else []
        done = subprocess.run([*prefix, *argv], env=self.env, cwd=cwd, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} (as {user or 'root'}) exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout
        return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)

    def wait_until_idle(self, seconds: float = 90) -> None:
        """Every node idle (registered, and no job still running or completing on it)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            states = self.node_states()
            if len(states) == len(self.hosts) and set(states.values()) == {"idle"}:
                return
            time.sleep(0.5)
        logs = "".join(f"\n--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.slurm_dir.glob("*.log")))
        raise RuntimeError(f"Slurm nodes not idle after {seconds:.0f} s: {self.node_states()}{logs}")

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a mapping (JobState, ExitCode, …); {} when Slurm knows no such job."""
        out = self.run("scontrol", "show", "job", "-o", job_id, check=False).stdout
        return dict(item.split("=", 1) for item in out.split() if "=" in item)

    def down(self) -> None:
        """Stop the daemons by their pid files, then remove the lab; safe twice and after a crash."""
        if self.root.is_dir():
            for pidfile in [*self.root.glob("*.pid"), *self.slurm_dir.glob("*.pid"), *self.munge_dir.glob("*.pid")]:
                kill_pidfile(pidfile)
        super().down()


def available() -> tuple[bool, str]:
    """Can this machine build a Slurm lab? (the LAN lab's needs, Slurm and munge)"""
    ok, why = lab_available(prefix="tfs")
    if not ok:
        return ok, why
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    try:
        pwd.getpwnam("munge")
    except KeyError:
        missing.append("a munge user")
    if missing:
        return False, f"the Slurm lab needs {', '.join(missing)} (apt-get install {PACKAGES})"
    return True, ""
