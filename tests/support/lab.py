"""A LAN of hosts on this machine, for tests and benchmarks (`bench/lanlab.py up N` / `down`).

Each host is a network namespace with its own address on a bridge, its own OpenSSH server (with
its own host key and its own ~/.ssh, bind-mounted in that sshd's mount namespace, so keys added to
one host's authorized_keys are that host's alone) and its own Docker engine (`dockerd` started
inside the namespace with its own data-root, exec-root and socket: `network_mode: host`
containers live in that host's namespace). Links are shaped with `tc tbf`: each host's uplink (its
eth0) and downlink (the bridge side of its veth), and the launcher's uplink (the bridge device,
which carries what this machine's own namespace sends). The launcher stays in the root namespace
and reaches the hosts only over those links. This kernel has no netem, so there is no added
propagation delay: `latency` is tbf's bound on queueing delay.

`local_first=True` makes host 0 this machine itself (root namespace, the main Docker engine, sshd
on the bridge address): a host that already holds every image without loading 3 GB first.

Everything it makes carries the tag in its name and is removed by `down`, which works from names
alone, so it also cleans up after a crashed run. Traffic only goes to the addresses it made.
"""
from __future__ import annotations

import getpass
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.netns import Lan, burst, ip
from support.sshd import SSHD, keygen, wait_for_port

ROOT = Path("/tmp/tfcompose-lab")
SUBNET = "10.213.9"


@dataclass
class LabHost:
    name: str
    address: str
    folder: Path
    ns: str | None            # None: this machine's own namespace (local_first)
    port: int = 22
    tf_port: int = 47001

    @property
    def workdir(self) -> Path:
        return self.folder / "work"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.folder}/docker.sock" if self.ns else "unix:///var/run/docker.sock"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.docker_host}

    @property
    def authorized_keys(self) -> Path:
        return self.folder / "dot-ssh" / "authorized_keys"

    def known_hosts_line(self) -> str:
        kind, b64 = (self.folder / "host_key.pub").read_text().split()[:2]
        name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"   # as OpenSSH writes it
        return f"{name} {kind} {b64}\n"

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True, check=check)

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """A command inside this host's namespace (e.g. a trainer process for the benchmarks)."""
        prefix = enter(self.ns) if self.ns else []
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, check=check)


@dataclass
class Lab:
    tag: str = "lab"
    root_dir: Path = ROOT
    subnet: str = SUBNET
    hosts: list[LabHost] = field(default_factory=list)
    user: str = field(default_factory=getpass.getuser)

    @property
    def root(self) -> Path:
        return self.root_dir / self.tag

    @property
    def user_key(self) -> Path:
        return self.root / "id_user"

    @property
    def lan(self) -> Lan:
        return Lan(self.tag, self.subnet)

    def up(self, n: int, rate: str | None = None, latency: str = "20ms", local_first: bool = False,
           services: bool = True) -> "Lab":
        """n hosts; services=False: the namespaces and links only (no sshd, no dockerd)."""
        self.down()
        self.root.mkdir(parents=True)
        keygen(self.user_key)
        lan = self.lan.up(n - 1 if local_first else n)
        if local_first:
            # Port 2222: this machine may run an sshd of its own on port 22.
            self.hosts.append(LabHost("h0", f"{self.subnet}.1", self.root / "h0", None, port=2222))
        offset = len(self.hosts)
        self.hosts += [LabHost(f"h{i + offset}", lan.address(i), self.root / f"h{i + offset}", ns)
                       for i, ns in enumerate(lan.hosts)]
        if rate:
            self.shape(rate, latency)
        for host in self.hosts if services else []:
            self._start_host(host)
        return self

    def shape(self, rate: str, latency: str = "20ms") -> None:
        """Every link at `rate`: the launcher's uplink, and each host's uplink and downlink."""
        lan = self.lan
        tbf = ["tbf", "rate", rate, "burst", burst(rate), "latency", latency]
        ip("tc", "qdisc", "replace", "dev", lan.bridge, "root", *tbf)
        for host in self.hosts:
            if host.ns:
                ip("tc", "qdisc", "replace", "dev", veth(self.tag, host.ns), "root", *tbf)
                ip("tc", "qdisc", "replace", "dev", "eth0", "root", *tbf, ns=host.ns)

    def _start_host(self, host: LabHost) -> None:
        host.workdir.mkdir(parents=True)
        (host.folder / "dot-ssh").mkdir(mode=0o700)
        host.authorized_keys.write_text(self.user_key.with_suffix(".pub").read_text())
        if host.ns:
            self._start_engine(host)
        self._start_sshd(host)

    def _start_engine(self, host: LabHost) -> None:
        f = host.folder
        log = open(f / "dockerd.log", "w")
        # nsenter, not `ip netns exec`: that one remounts /sys, hiding the cgroup mounts dockerd needs.
        subprocess.Popen([*enter(host.ns), "dockerd", "--data-root", f"{f}/data", "--exec-root",
                          f"{f}/exec", "--pidfile", f"{f}/docker.pid", "-H", host.docker_host, "--bridge=none",
                          "--iptables=false", "--ip6tables=false", "--ip-masq=false"],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(120):
            if host.docker("info", check=False).returncode == 0:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{host.name}'s dockerd did not answer: {(f / 'dockerd.log').read_text()[-2000:]}")

    def _start_sshd(self, host: LabHost) -> None:
        f = host.folder
        keygen(f / "host_key")
        config = f / "sshd_config"
        config.write_text("\n".join([
            f"Port {host.port}", f"ListenAddress {host.address}", f"HostKey {f}/host_key", f"PidFile {f}/sshd.pid",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
            "StrictModes no", "UsePAM no", "Subsystem sftp internal-sftp", "LogLevel VERBOSE",
            f"SetEnv PATH={os.environ.get('PATH', '/usr/bin:/bin')} DOCKER_HOST={host.docker_host}"]) + "\n")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        Path("/root/.ssh").mkdir(mode=0o700, exist_ok=True)   # the mount point of each host's own ~/.ssh
        home_ssh = Path.home() / ".ssh"
        home_ssh.mkdir(mode=0o700, exist_ok=True)
        # A mount namespace of its own: this host's
        # ~/.ssh is its own folder, so what is added to its authorized_keys stays on this host.
        prefix = [*(enter(host.ns) if host.ns else []), "unshare", "-m", "--propagation", "private"]
        script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
        log = open(f / "sshd.log", "w")
        proc = subprocess.Popen([*prefix, "sh", "-c", script, "sh", str(f / "dot-ssh"), str(home_ssh),
                                 SSHD, "-D", "-e", "-f", str(config)],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(host.port, proc, f / "sshd.log", host.address)

    def known_hosts(self) -> Path:
        path = self.root / "known_hosts"
        path.write_text("".join(h.known_hosts_line() for h in self.hosts))
        return path

    def down(self) -> None:
        """Remove everything this tag made; safe to call twice and after a crash."""
        for pidfile in self.root.glob("h*/*.pid") if self.root.is_dir() else []:
            kill_pidfile(pidfile)
        self.lan.down()                      # kills what runs in the namespaces, then removes them
        leftovers = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                     if line.split()[1].startswith(str(self.root))]
        for mount in sorted(leftovers, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
        self.hosts = []


def enter(ns: str) -> list[str]:
    """Run in network namespace `ns` only (the mount namespace stays this machine's)."""
    return ["nsenter", f"--net=/run/netns/{ns}"]


def kill_pidfile(pidfile: Path) -> None:
    try:
        os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
    except (ValueError, OSError):
        pass


def veth(tag: str, ns: str) -> str:
    return f"tfv{tag}h{ns.rsplit('h', 1)[1]}"


def available() -> tuple[bool, str]:
    """Can this machine build a lab? (root, ip netns, dockerd, sshd, tc)"""
    if os.getuid() != 0:
        return False, "the LAN lab needs root (network namespaces)"
    for tool in ("ip", "tc", "dockerd", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return False, f"the LAN lab needs {tool}"
    if not Path(SSHD).exists():
        return False, "the LAN lab needs OpenSSH's sshd (apt-get install openssh-server)"
    probe = subprocess.run(["ip", "netns", "add", "tfnprobe"], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", "tfnprobe"], capture_output=True)
    return (probe.returncode == 0, f"ip netns is not permitted here: {probe.stderr.strip()}")
