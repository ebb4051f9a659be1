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

`bastions=N` adds N jump hosts (`j0`, …): namespaces on the same bridge running sshd alone, no
engine; `only_through(bastion)` then makes every host's firewall drop SSH from this machine and
accept it from the bastion, as a lab behind a jump host (tests/integration/test_jump_lab.py).

`name_hosts=True` gives every engine a mount namespace of its own whose /etc/hosts names every
host, so `--network host` containers resolve the hosts' names (tests/support/slurm.py needs it:
Slurm gives tasks their peers by name).

Everything it makes carries the tag in its name (and starts with `prefix`, so a lab of another
kind never takes one of these for its own) and is removed by `down`, which works from names
alone, so it also cleans up after a crashed run. Traffic only goes to the addresses it made.
"""
from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.netns import Lan, burst, ip, own_subnet, own_tag
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
    def bin(self) -> Path:
        """A folder first on the PATH of this host's SSH sessions (stand-ins such as nvidia-smi go there)."""
        return self.folder / "bin"

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
    bastions: list[LabHost] = field(default_factory=list)
    user: str = field(default_factory=getpass.getuser)
    prefix: str = "tf"            # starts every namespace, link and bridge name
    name_hosts: bool = False      # containers on every engine resolve the hosts' names (<root>/hosts)
    engine_group: str | None = None    # the group that may use the engines' sockets (dockerd -G)
    template: Path | None = None       # engines start with this data root's images (support/engine.py)

    @property
    def tf_port(self) -> int:
        """The hosts' TensorFlow port, the lab's own: two labs whose h0 is this machine (local_first)
        may train at once in one namespace, and an elastic run takes the ports above it too."""
        return 47001 + 16 * (int(self.subnet.rsplit(".", 1)[1]) % 256)

    def __post_init__(self):
        self.subnet, self.tag = own_subnet(self.subnet), own_tag(self.tag)
        self.root_dir = test_root(self.root_dir, "l")

    @property
    def root(self) -> Path:
        return self.root_dir / self.tag

    @property
    def user_key(self) -> Path:
        return self.root / "id_user"

    @property
    def lan(self) -> Lan:
        return Lan(self.tag, self.subnet, prefix=self.prefix)

    def up(self, n: int, rate: str | None = None, latency: str = "20ms", local_first: bool = False,
           services: bool = True, bastions: int = 0) -> "Lab":
        """n hosts (and `bastions` jump hosts after them); services=False: the namespaces and
        links only (no sshd, no dockerd)."""
        self.down()
        self.clear_stale_labs()
        self.root.mkdir(parents=True)
        self._note()
        keygen(self.user_key)
        lan = self.lan.up((n - 1 if local_first else n) + bastions)
        if local_first:
            # Port 2222: this machine may run an sshd of its own on port 22.
            self.hosts.append(LabHost("h0", f"{self.subnet}.1", self.root / "h0", None, port=2222, tf_port=self.tf_port))
        offset, namespaces = len(self.hosts), lan.hosts[:len(lan.hosts) - bastions]
        self.hosts += [LabHost(f"h{i + offset}", lan.address(i), self.root / f"h{i + offset}", ns, tf_port=self.tf_port)
                       for i, ns in enumerate(namespaces)]
        self.bastions = [LabHost(f"j{i}", lan.address(len(namespaces) + i), self.root / f"j{i}", ns)
                         for i, ns in enumerate(lan.hosts[len(namespaces):])]
        if rate:
            self.shape(rate, latency)
        if self.name_hosts:
            lines = "".join(f"{h.address}\t{h.name}\n" for h in self.hosts)
            (self.root / "hosts").write_text(Path("/etc/hosts").read_text() + f"# the lab {self.tag}\n" + lines)
        for host in self.hosts if services else []:
            self._start_host(host)
        for bastion in self.bastions if services else []:
            self._start_host(bastion, engine=False)
        self._record()
        return self

    def _note(self) -> None:
        """In a test run, the run's ledger names the lab, so that a killed run's is taken down."""
        if os.environ.get("TFC_TEST_RUN"):
            from support import rigs
            rigs.note("lab", tag=self.tag, root_dir=str(self.root_dir), subnet=self.subnet, prefix=self.prefix)

    def _record(self) -> None:
        """<root>/lab.json: what this lab is and who made it when, so that another `lanlab.py up`
        of the same tag (a colleague's, on a shared box) can name it instead of removing it."""
        import datetime as dt
        doc = {"tag": self.tag, "kind": type(self).__name__, "subnet": self.subnet,
               "hosts": [[h.name, h.address] for h in self.hosts + self.bastions],
               "made_by": os.environ.get("SUDO_USER") or self.user,
               "made_at": dt.datetime.now().isoformat(timespec="seconds")}
        (self.root / "lab.json").write_text(json.dumps(doc) + "\n")

    @property
    def launcher_address(self) -> str:
        """Where this machine's traffic to the hosts comes from (the bridge's address)."""
        return f"{self.subnet}.1"

    def only_through(self, bastion: LabHost) -> None:
        """Every namespaced host's firewall accepts SSH from the bastion and drops it from this
        machine (dropped, not refused: as a real firewall, a direct attempt waits, then fails)."""
        for host in (h for h in self.hosts if h.ns):
            for source, verdict in ((bastion.address, "ACCEPT"), (self.launcher_address, "DROP")):
                ip("iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(host.port), "-s", source, "-j", verdict,
                   ns=host.ns)

    def shape(self, rate: str, latency: str = "20ms") -> None:
        """Every link at `rate`: the launcher's uplink, and each host's uplink and downlink."""
        lan = self.lan
        tbf = ["tbf", "rate", rate, "burst", burst(rate), "latency", latency]
        ip("tc", "qdisc", "replace", "dev", lan.bridge, "root", *tbf)
        for host in self.hosts:
            if host.ns:
                ip("tc", "qdisc", "replace", "dev", veth(lan, host.ns), "root", *tbf)
                ip("tc", "qdisc", "replace", "dev", "eth0", "root", *tbf, ns=host.ns)

    def _start_host(self, host: LabHost, engine: bool = True) -> None:
        host.workdir.mkdir(parents=True)
        host.bin.mkdir()
        (host.folder / "dot-ssh").mkdir(mode=0o700)
        host.authorized_keys.write_text(self.user_key.with_suffix(".pub").read_text())
        if host.ns and engine:
            self._start_engine(host)
        self._start_sshd(host)

    def _start_engine(self, host: LabHost) -> None:
        f = host.folder
        if self.template:
            from support.engine import seed
            seed(self.template, f / "data")
        log = open(f / "dockerd.log", "w")
        dockerd = ["dockerd", "--data-root", f"{f}/data", "--exec-root", f"{f}/exec", "--pidfile", f"{f}/docker.pid",
                   "-H", host.docker_host, "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
                   *(["--group", self.engine_group] if self.engine_group else [])]
        if self.name_hosts:
            # `--network host` containers copy the engine's /etc/hosts: in a mount namespace of
            # its own, this engine's is the lab's, naming every host.
            script = 'mount --bind "$1" /etc/hosts && shift && exec "$@"'
            dockerd = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(self.root / "hosts"),
                       *dockerd]
        # nsenter, not `ip netns exec`: that one remounts /sys, hiding the cgroup mounts dockerd needs.
        subprocess.Popen([*enter(host.ns), *dockerd], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(240):          # generous: on a busy machine dockerd's containerd takes its time
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
            f"SetEnv PATH={host.bin}:{os.environ.get('PATH', '/usr/bin:/bin')} DOCKER_HOST={host.docker_host}"]) + "\n")
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

    def load_image(self, image: str) -> None:
        """This machine's image into every namespaced host's engine: one `docker save`, read once
        and fed to all the `docker load`s at the same time."""
        engines = [h for h in self.hosts if h.ns]
        loads = [subprocess.Popen(["docker", "load", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=h.env) for h in engines]
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        try:
            while chunk := save.stdout.read(1 << 20):
                for load in loads:
                    load.stdin.write(chunk)
        finally:
            for load in loads:
                load.stdin.close()
        outputs = [load.stdout.read().decode(errors="replace") for load in loads]
        if save.wait() != 0 or any(load.wait() for load in loads):
            raise RuntimeError(f"loading {image} into the lab's engines failed: {outputs}")

    def known_hosts(self, hosts: list[LabHost] | None = None, name: str = "known_hosts") -> Path:
        """A known_hosts file with the keys of `hosts` (default: every host and bastion)."""
        path = self.root / name
        path.write_text("".join(h.known_hosts_line() for h in (self.hosts + self.bastions if hosts is None else hosts)))
        return path

    def clear_stale_labs(self) -> None:
        """A lab of this kind left on this subnet by a killed run (another tag: tags carry the pid)
        would own the same addresses, and this lab's hosts would not answer: take it down first."""
        shown = ip("ip", "-o", "-4", "addr", "show", check=False).stdout.splitlines()
        for line in shown:
            device, address = line.split()[1], line.split()[3] if len(line.split()) > 3 else ""
            stale = device[len(self.prefix) + 1:]
            if (address == f"{self.subnet}.1/24" and device.startswith(f"{self.prefix}b") and stale
                    and stale != self.tag):
                Lab(tag=stale, root_dir=self.root_dir, subnet=self.subnet, prefix=self.prefix).down()

    def down(self) -> None:
        """Remove everything this tag made; safe to call twice and after a crash."""
        for pidfile in self.root.glob("*/*.pid") if self.root.is_dir() else []:
            kill_pidfile(pidfile)
        self.lan.down()                      # kills what runs in the namespaces, then removes them
        leftovers = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                     if line.split()[1].startswith(str(self.root))]
        for mount in sorted(leftovers, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
        self.hosts, self.bastions = [], []


def test_root(default: Path, kind: str) -> Path:
    """In a test run (TFC_TEST_RUN), rigs live under the run's root; elsewhere (a bench, a user's
    lab) where they were asked to."""
    run = os.environ.get("TFC_TEST_RUN")
    return Path(run) / kind if run and default in (ROOT, Path("/tmp/tfcompose-bare")) else default   # short: sockets


def enter(ns: str) -> list[str]:
    """Run in network namespace `ns` only (the mount namespace stays this machine's)."""
    return ["nsenter", f"--net=/run/netns/{ns}"]


def kill_pidfile(pidfile: Path) -> None:
    try:
        os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
    except (ValueError, OSError):
        pass


def veth(lan: Lan, ns: str) -> str:
    return lan.veth(int(ns.rsplit('h', 1)[1]))


def available(prefix: str = "tf") -> tuple[bool, str]:
    """Can this machine build a lab? (root, ip netns, dockerd, sshd, tc)"""
    if os.getuid() != 0:
        return False, "the LAN lab needs root (network namespaces)"
    for tool in ("ip", "tc", "dockerd", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return False, f"the LAN lab needs {tool}"
    if not Path(SSHD).exists():
        return False, "the LAN lab needs OpenSSH's sshd (apt-get install openssh-server)"
    probe = subprocess.run(["ip", "netns", "add", f"{prefix}nprobe"], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", f"{prefix}nprobe"], capture_output=True)
    return (probe.returncode == 0, f"ip netns is not permitted here: {probe.stderr.strip()}")
