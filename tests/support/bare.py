"""Bare hosts for `tfcompose bootstrap`'s tests and bench (bench/bootstrap.py): boxes with nothing on
them but Debian 12, OpenSSH's server and sudo, as a lab admin gets them.

A bare host is a network namespace on a lab bridge (support.netns.Lan, as the LAN lab's hosts)
plus a mount and UTS namespace with a root filesystem of its own: a fresh Debian 12 tree, made once
per session by installing only openssh-server and sudo into a container of the
`offline-base-rootfs:bookworm` image (a debootstrap minbase) and exporting it. Each host gets a
copy of that tree, a user `admin` whose key logs in and who may sudo without a password (a test
can change that), a host key of its own, and its sshd running chrooted in its namespaces. Every
package bootstrap installs there is installed by the host's own apt and dpkg, and the Docker
engine it starts runs inside that host's namespaces (its own docker0 in its own network
namespace; never with --bridge=none in this machine's).

The tree has no init, so two things of the rig stand in for one (and only in the rig):
`/usr/local/bin/systemctl`, which starts, stops and reports the host's dockerd (the docker unit
only), and `/usr/sbin/policy-rc.d`, which keeps packages from starting services themselves, as in
any Debian chroot. On a real host, systemd does both.

Networks: an online host reaches the Debian mirror this machine uses and nothing else (a route to
the mirror's address alone; NAT on the bridge only to that address and port 80; the mirror named
in the host's /etc/hosts, there being no DNS); an offline host has no route at all. Everything is
removed by `down`, which works from names alone (so it also cleans up after a crashed run).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from support.netns import Lan, ip, own_subnet
from support.rigs import TEST_CACHE
from support.sshd import keygen, wait_for_port

ROOT = Path("/tmp/tfcompose-bare")
TREE_IMAGE = "offline-base-rootfs:bookworm"
MIRROR_NAME = "deb.debian.org"
USER = "admin"
APT_STATE = ("var/lib/dpkg", "var/lib/apt", "var/cache/apt")    # on a real filesystem in every host

SOURCES = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

# The rig's stand-in for systemd's systemctl (see the module's doc): the docker unit only.
SYSTEMCTL = r"""#!/bin/sh
# Stand-in for systemctl in tfcompose's bare-host test rig (tests/support/bare.py): this root
# filesystem has no init, so the host's dockerd is started and stopped here, in the host's own
# namespaces. Only the docker unit is known.
pidfile=/run/standin-dockerd.pid
wants=/etc/systemd/system/multi-user.target.wants/docker.service
running() { [ -f $pidfile ] && kill -0 "$(cat $pidfile)" 2>/dev/null; }
start() {
  running && return 0
  setsid dockerd >>/var/log/dockerd.log 2>&1 </dev/null & echo $! > $pidfile
  i=0; while [ $i -lt 120 ]; do docker info >/dev/null 2>&1 && return 0
    running || { tail -n 5 /var/log/dockerd.log >&2; return 1; }; i=$((i + 1)); sleep 0.5; done; return 1
}
stop() {
  running && kill "$(cat $pidfile)"
  i=0; while running && [ $i -lt 60 ]; do sleep 0.25; i=$((i + 1)); done; rm -f $pidfile
}
now=0; args=""
for a in "$@"; do case "$a" in --now) now=1;; -*) ;; *) args="$args $a";; esac; done
set -- $args
cmd=${1:-}; unit=${2:-docker}; unit=${unit%.service}
case "$unit" in docker|docker.socket|containerd) ;; *) echo "systemctl (rig stand-in): unit $unit is not known here" >&2; exit 5;; esac
case "$cmd" in
  start) start;;
  stop) stop;;
  restart) stop; start;;
  enable) mkdir -p "$(dirname $wants)"; [ -e $wants ] || ln -s /lib/systemd/system/docker.service $wants
          if [ $now = 1 ]; then start; fi;;
  is-active) if running; then echo active; else echo inactive; exit 3; fi;;
  is-enabled) if [ -e $wants ]; then echo enabled; else echo disabled; exit 1; fi;;
  daemon-reload|reload) ;;
  *) echo "systemctl (rig stand-in): $cmd is not known here" >&2; exit 1;;
esac
"""

# In the host's new namespaces: its root a mount point (as / is on a real host: `docker load`
# remounts it), /proc, a /sys of its own network namespace, the cgroups, /dev, a fresh /run.
START = r"""
set -e
R=$1
mount --rbind "$R" "$R"
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
mount --rbind /sys/fs/cgroup "$R/sys/fs/cgroup"
mount --rbind /dev "$R/dev"
mount -t tmpfs -o mode=755 tmpfs "$R/run"
mkdir -p "$R/run/sshd" "$R/run/lock"
hostname "$2"
exec chroot "$R" /usr/sbin/sshd -D -e
"""


# The tree's recipe: a change makes a new one (the cache keeps one per recipe).
TREE_RECIPE = "bookworm-minbase+openssh-server,sudo,python3,ca-certificates,procps-v1"
TREE_PACKAGES = "openssh-server,sudo,python3,ca-certificates,procps"
TREE_CACHE = TEST_CACHE          # the tests' cache (support/rigs.py: a run may leave what it gains)


def make_tree(out: Path | None = None, image: str = TREE_IMAGE) -> Path:
    """The bare hosts' root filesystem as a tar: Debian 12 (minbase with python3, procps and the CA
    certificates, as a server install has them), openssh-server and sudo, nothing else. Made once per machine and kept in TREE_CACHE (the README names it): from the Debian
    mirror this machine's apt uses, by debootstrap; or, quicker, from `image` when this machine
    has it (CI's set-up builds it). `out`: a copy there (the bench keeps its own)."""
    cached = TREE_CACHE / f"bare-tree-{TREE_RECIPE}.tar"
    from support.rigs import locked
    with locked(TREE_CACHE / "bare-tree.lock"):
        if not cached.is_file():
            partial = cached.with_suffix(".tar.part")
            if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0:
                tree_from_image(image, partial)
            else:
                tree_from_mirror(partial)
            partial.rename(cached)
            for older in TREE_CACHE.glob("bare-tree-*.tar"):
                if older != cached:
                    older.unlink()
    if out is None:
        return cached
    shutil.copyfile(cached, out)
    return out


RESOLVER_IMAGE = "tfc-test-debian12:tree"      # tfc-test-*: removed by the run's keeper at its end


def resolver_image() -> str:
    """A Debian 12 image for the offline resolution (bootstrap.resolver_images), imported from the
    bare hosts' own tree, so the test needs no image only CI's set-up builds (a user's clone stands
    alone). Imported once per run; the run's keeper removes it."""
    from support.rigs import locked
    tree = make_tree()          # takes the tree's lock itself (flock: a second hold would wait on the first)
    with locked(TREE_CACHE / "resolver-image.lock"):
        if subprocess.run(["docker", "image", "inspect", RESOLVER_IMAGE], capture_output=True).returncode != 0:
            subprocess.run(["docker", "import", str(tree), RESOLVER_IMAGE], check=True, capture_output=True)
    return RESOLVER_IMAGE


def tree_from_image(image: str, out: Path) -> None:
    name = f"tfc-bare-tree-{os.getpid()}"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    script = ("export DEBIAN_FRONTEND=noninteractive; apt-get -q update && apt-get -q install -y --no-install-recommends "
              "openssh-server sudo && apt-get clean && rm -rf /var/lib/apt/lists/*")
    try:
        run = subprocess.run(["docker", "run", "--name", name, image, "sh", "-c", script], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"making the bare hosts' tree failed: {run.stderr[-2000:]}")
        subprocess.run(["docker", "export", "-o", str(out), name], check=True, capture_output=True)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def tree_from_mirror(out: Path) -> None:
    """debootstrap (minbase and TREE_PACKAGES) from the mirror of this machine's apt."""
    work = out.parent / f"tree-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        done = subprocess.run(["debootstrap", "--variant=minbase", f"--include={TREE_PACKAGES}", "bookworm", str(work),
                               apt_mirror()], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"debootstrap of the bare hosts' tree failed: {(done.stdout + done.stderr)[-2000:]}")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (work / junk).glob("*"):
                if path.is_file():
                    path.unlink()
        subprocess.run(["tar", "-C", str(work), "-cf", str(out), "."], check=True, capture_output=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def apt_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 sources first, then sources.list)."""
    for sources in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:") and line.split()[1:]:
                return line.split()[1]
    listed = Path("/etc/apt/sources.list")
    for line in listed.read_text().splitlines() if listed.is_file() else []:
        if line.split()[:1] == ["deb"] and len(line.split()) > 1:
            return line.split()[1]
    return "http://deb.debian.org/debian"


def mirror_address() -> str:
    return socket.gethostbyname(MIRROR_NAME)


@dataclass
class BareHost:
    name: str
    address: str
    ns: str
    folder: Path
    online: bool = True
    port: int = 22
    user: str = USER
    tf_port: int = 47001
    pid: int = 0              # its sshd: the way into its namespaces

    @property
    def root(self) -> Path:
        return self.folder / "root"

    def known_hosts_line(self) -> str:
        kind, b64 = (self.root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()[:2]
        return f"{self.address} {kind} {b64}\n"

    def sh(self, script: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """A shell command as root inside the host (its namespaces, its root filesystem)."""
        enter = ["nsenter", "-t", str(self.pid), "-m", "-u", "-n", "-r", "-w"]
        done = subprocess.run([*enter, "sh", "-c", script], capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"{self.name}: {script!r} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def docker_ok(self) -> bool:
        """`docker info` works for the SSH user (in the docker group, the engine up)."""
        return self.sh(f"su {self.user} -c 'docker info' >/dev/null 2>&1", check=False).returncode == 0

    def preload(self, template: Path) -> None:
        """The engine bootstrap installed, given the images of the run's engine template (its data
        root replaced while it is stopped): `up` then finds the trainer image there, as on a lab
        engine, instead of loading 3 GB into it (what the relay and cluster tests check)."""
        from support.engine import seed
        self.sh("systemctl stop docker")
        data = self.folder / "docker"
        for name in ("overlay2", "image"):
            shutil.rmtree(data / name, ignore_errors=True)
        seed(template, data)
        self.sh("systemctl start docker")

    def installed(self, package: str) -> bool:
        return self.sh(f"dpkg-query -W -f='${{db:Status-Abbrev}}' {package} 2>/dev/null | grep -q '^ii'",
                       check=False).returncode == 0


@dataclass
class BareLab:
    tree: Path                      # make_tree's tar
    tag: str = "bare"
    subnet: str = "10.213.7"
    root_dir: Path = ROOT
    hosts: list[BareHost] = field(default_factory=list)
    mirror: str = ""

    def __post_init__(self):
        from support.lab import test_root
        self.subnet = own_subnet(self.subnet)
        self.root_dir = test_root(self.root_dir, "b")

    @property
    def root(self) -> Path:
        return self.root_dir / self.tag

    @property
    def key(self) -> Path:
        return self.root / "id_user"

    @property
    def lan(self) -> Lan:
        return Lan(self.tag, self.subnet, prefix="tb")

    def up(self, online: list[bool]) -> "BareLab":
        """One bare host per entry, online (a route to the mirror) or offline (none)."""
        self.down()
        self.root.mkdir(parents=True)
        if os.environ.get("TFC_TEST_RUN"):       # the run's ledger names it: a killed run's is taken down
            from support import rigs
            rigs.note("bare", tag=self.tag, subnet=self.subnet, root_dir=str(self.root_dir))
        keygen(self.key)
        lan = self.lan.up(len(online))
        self.mirror = mirror_address()
        self._nat("-A")
        for i, (ns, is_online) in enumerate(zip(lan.hosts, online)):
            host = BareHost(f"b{i}", lan.address(i), ns, self.root / f"b{i}", is_online)
            self.hosts.append(host)
            self.fresh(host)
        return self

    def fresh(self, host: BareHost, online: bool | None = None, root_size_mb: int | None = None) -> BareHost:
        """The host as new: its processes gone, a fresh root filesystem, its sshd started.

        The root is the session's tree under an overlay of the host's own (as fresh as a copy, and
        made in a moment on this machine, whose file operations are slow); Docker's root,
        /var/lib/docker, is a folder of its own on this machine's disk, mounted there (as on many
        servers), since Docker's overlay2 cannot stack on an overlay. root_size_mb puts the host's
        own layer on a tmpfs of that size, so its disk is nearly full (df reads the upper layer)."""
        self._stop(host)
        host.online = host.online if online is None else online
        host.folder.mkdir(parents=True, exist_ok=True)
        layer = host.folder / "layer"
        layer.mkdir()
        if root_size_mb:
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={root_size_mb}m", "tfc-bare", str(layer)], check=True)
        for sub in ("upper", "work"):
            (layer / sub).mkdir()
        host.root.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "overlay", "tfc-bare", "-o", f"lowerdir={self.lower},upperdir={layer}/upper,"
                        f"workdir={layer}/work", str(host.root)], check=True)
        (host.folder / "docker").mkdir()
        (host.root / "var/lib/docker").mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(host.folder / "docker"), str(host.root / "var/lib/docker")], check=True)
        # apt's and dpkg's state on a real filesystem too, as on a real host: a lock's entry in
        # /proc/locks names the file's inode, which an overlay reports differently to stat.
        for i, folder in enumerate(APT_STATE):
            real = host.folder / "apt-state" / str(i)
            real.parent.mkdir(exist_ok=True)
            subprocess.run(["cp", "-a", str(self.lower / folder), str(real)], check=True)
            subprocess.run(["mount", "--bind", str(real), str(host.root / folder)], check=True)
        self._dress(host)
        ip("ip", "route", "flush", "root", self.mirror, ns=host.ns, check=False)
        if host.online:
            ip("ip", "route", "add", self.mirror, "via", f"{self.subnet}.1", ns=host.ns)
        self._start(host)
        return host

    @property
    def lower(self) -> Path:
        """The session's tree, extracted once for every host of the lab (read-only under their overlays)."""
        tree = self.root / "tree"
        if not (tree / "etc/os-release").exists():
            tree.mkdir(parents=True, exist_ok=True)
            # In memory (some 250 MB): unpacking ten thousand files on this machine's disk takes half a minute.
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g", "tfc-bare-tree", str(tree)], check=True)
            subprocess.run(["tar", "-C", str(tree), "-xf", str(self.tree)], check=True, capture_output=True)
        return tree

    def _dress(self, host: BareHost) -> None:
        """What makes the tree this host: its name, the mirror's name, sources as an installed
        Debian 12 has them, the user and its key, a host key, the rig's stand-ins."""
        r = host.root
        host.write("/etc/hostname", host.name + "\n")
        host.write("/etc/hosts", f"127.0.0.1\tlocalhost\n127.0.1.1\t{host.name}\n"
                   + (f"{self.mirror}\t{MIRROR_NAME}\n" if host.online else ""))
        host.write("/etc/resolv.conf", "")
        (r / "etc/apt/sources.list").unlink(missing_ok=True)
        host.write("/etc/apt/sources.list.d/debian.sources", SOURCES)
        host.write("/usr/sbin/policy-rc.d", "#!/bin/sh\n# the rig: packages never start services themselves\nexit 101\n", 0o755)
        host.write("/usr/local/bin/systemctl", SYSTEMCTL, 0o755)
        subprocess.run(["chroot", str(r), "useradd", "-m", "-s", "/bin/bash", host.user], check=True, capture_output=True)
        host.write(f"/etc/sudoers.d/{host.user}", f"{host.user} ALL=(ALL) NOPASSWD: ALL\n", 0o440)
        ssh = r / "home" / host.user / ".ssh"
        ssh.mkdir(mode=0o700)
        (ssh / "authorized_keys").write_text(self.key.with_suffix(".pub").read_text())
        subprocess.run(["chroot", str(r), "chown", "-R", f"{host.user}:{host.user}", f"/home/{host.user}/.ssh"], check=True)
        for old in (r / "etc/ssh").glob("ssh_host_*"):
            old.unlink()
        keygen(r / "etc/ssh/ssh_host_ed25519_key")
        host.write("/etc/ssh/sshd_config.d/rig.conf", "HostKey /etc/ssh/ssh_host_ed25519_key\nPasswordAuthentication no\n")

    def _start(self, host: BareHost) -> None:
        log = open(host.folder / "sshd.log", "w")
        proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{host.ns}", "unshare", "-m", "-u", "--propagation",
                                 "private", "sh", "-c", START, "sh", str(host.root), host.name],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(host.port, proc, host.folder / "sshd.log", host.address, timeout=30)
        time.sleep(0.3)
        if proc.poll() is not None:     # it answered, then ended: the port was another's
            raise RuntimeError(f"{host.name}'s sshd ended: {(host.folder / 'sshd.log').read_text()[-2000:]}")
        host.pid = proc.pid

    def _stop(self, host: BareHost) -> None:
        """Every process of the host ended (in its network namespace: sshd, dockerd, containers
        with host networking, an installation), then its tree removed."""
        for _ in range(40):
            pids = ip("ip", "netns", "pids", host.ns, check=False).stdout.split()
            if not pids and not _listening(host.address, host.port):
                break           # gone, its port too: a new sshd will not find it taken
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            time.sleep(0.25)
        # What its engine left in its network namespace (docker0, its iptables chains) goes too.
        for line in ip("ip", "-o", "link", "show", ns=host.ns, check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
            if name and name not in ("lo", "eth0"):
                ip("ip", "link", "del", name, ns=host.ns, check=False)
        for table in ("filter", "nat", "mangle"):
            ip("iptables", "-t", table, "-F", ns=host.ns, check=False)
            ip("iptables", "-t", table, "-X", ns=host.ns, check=False)
        for mount in (host.root / "var/lib/docker", *(host.root / f for f in APT_STATE), host.root, host.folder / "layer"):
            if mount.is_mount():
                subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        for leftover in (host.folder / "layer", host.folder / "docker", host.folder / "apt-state"):
            discard(leftover, self.root_dir)
        host.pid = 0

    def set_password(self, host: BareHost, password: str) -> None:
        """The user gets a password, and sudo asks for it (as on a box set up by hand)."""
        subprocess.run(["chroot", str(host.root), "chpasswd"], input=f"{host.user}:{password}\n", text=True, check=True)
        host.write(f"/etc/sudoers.d/{host.user}", f"{host.user} ALL=(ALL) ALL\n", 0o440)

    def cut(self, host: BareHost) -> None:
        """The host's link drops everything, as a pulled cable (until `mend`)."""
        ip("iptables", "-I", "INPUT", "-i", "eth0", "-j", "DROP", ns=host.ns)
        ip("iptables", "-I", "OUTPUT", "-o", "eth0", "-j", "DROP", ns=host.ns)

    def mend(self, host: BareHost) -> None:
        ip("iptables", "-D", "INPUT", "-i", "eth0", "-j", "DROP", ns=host.ns, check=False)
        ip("iptables", "-D", "OUTPUT", "-o", "eth0", "-j", "DROP", ns=host.ns, check=False)

    def known_hosts(self) -> Path:
        path = self.root / "known_hosts"
        path.write_text("".join(h.known_hosts_line() for h in self.hosts))
        return path

    def inventory(self, path: Path, cluster: str, hosts: list[BareHost], **top) -> Path:
        """An inventory of these bare hosts, as a lab admin writes one (workdir and lease folder
        their defaults; CPU only)."""
        import yaml
        defaults = {"gpus": 0, "shm_size": "256m", "restart_retries": 0, **top.pop("defaults", {})}
        doc = {"cluster": cluster, "image_mode": "ship",
               "ssh": {"user": USER, "identity_file": str(self.key), "known_hosts": str(self.known_hosts()),
                       "config_file": str(self.root / "no-config"), "connect_timeout_s": 10, **top.pop("ssh", {})},
               "defaults": defaults,
               "hosts": [{"name": h.name, "address": h.address, "tf_port": h.tf_port} for h in hosts], **top}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def _nat(self, action: str) -> None:
        """This machine forwards the bridge's traffic to the mirror's port 80, and nothing else."""
        if not self.mirror:
            return
        rules = [("-t", "nat", action, "POSTROUTING", "-s", f"{self.subnet}.0/24", "-d", self.mirror, "-p", "tcp",
                  "--dport", "80", "-j", "MASQUERADE"),
                 (action if action == "-D" else "-I", "FORWARD", "-i", self.lan.bridge, "-d", self.mirror, "-p", "tcp",
                  "--dport", "80", "-j", "ACCEPT"),
                 (action if action == "-D" else "-I", "FORWARD", "-o", self.lan.bridge, "-s", self.mirror, "-p", "tcp",
                  "--sport", "80", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")]
        for rule in rules:
            ip("iptables", *rule, check=action != "-D")

    def down(self) -> None:
        """Remove everything this tag made; safe twice and after a crash."""
        for host in self.hosts:
            self._stop(host)
        lan = self.lan
        lan.down()
        if not self.mirror:
            try:
                self.mirror = mirror_address()
            except OSError:
                pass
        for _ in range(4):
            self._nat("-D")
        leftovers = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                     if line.split()[1].startswith(str(self.root))]
        for mount in sorted(leftovers, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        discard(self.root, self.root_dir)
        self.hosts = []


def _listening(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def discard(path: Path, under: Path) -> None:
    """Remove a folder without waiting for it: renamed out of the way at once, then deleted by a
    process of its own (this machine's file operations are slow: a host's tree is thousands of
    files, its Docker root tens of thousands)."""
    if not path.exists():
        return
    trash = under / f".trash-{uuid.uuid4().hex}"
    under.mkdir(parents=True, exist_ok=True)
    try:
        path.rename(trash)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        return
    subprocess.Popen(["rm", "-rf", "--one-file-system", str(trash)], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def available() -> tuple[bool, str]:
    """Can this machine make bare hosts? (root, namespaces, chroot, Docker with the tree's image, the mirror's name)"""
    if os.getuid() != 0:
        return False, "bare hosts need root (namespaces, chroot)"
    for tool in ("ip", "iptables", "nsenter", "unshare", "chroot", "docker", "ssh-keygen"):
        if shutil.which(tool) is None:
            return False, f"bare hosts need {tool}"
    have_tree = (TREE_CACHE / f"bare-tree-{TREE_RECIPE}.tar").is_file() or shutil.which("debootstrap") or \
        subprocess.run(["docker", "image", "inspect", TREE_IMAGE], capture_output=True).returncode == 0
    if not have_tree:
        return False, "making the bare hosts' Debian tree needs debootstrap (apt-get install debootstrap)"
    try:
        mirror_address()
    except OSError:
        return False, f"{MIRROR_NAME} does not resolve here (the bare hosts' mirror)"
    return True, ""

