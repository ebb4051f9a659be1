"""A LAN of network namespaces on this machine: each "host" has its own namespace, address and
loopback, joined to the others and to this machine by a bridge. Traffic stays on addresses this
helper made; everything is removed again, also what an earlier crashed run left (same names)."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field


def own_subnet(subnet: str) -> str:
    """`subnet` in the /16 this checkout's labs use: TFC_LAB_NET=N moves every lab from 10.213.x to
    10.N.x, so two checkouts (a branch's and main's) can run their labs on one machine at once."""
    moved = os.environ.get("TFC_LAB_NET", "").strip()
    if moved and subnet.startswith("10.213."):
        return f"10.{int(moved)}." + subnet[len("10.213."):]
    return subnet


def own_tag(tag: str) -> str:
    """`tag` made this checkout's: TFC_LAB_NET=N appends `xN`, so two checkouts running labs of one
    kind at once (a fixed bench tag, or pid-derived tags that happen to collide) never share the
    names of namespaces, links and bridges, nor a lab's folder (tests/support/lab.py), which a
    lab's `up` and `down` remove by name. Interface names stay within Linux's 15 characters."""
    moved = os.environ.get("TFC_LAB_NET", "").strip()
    suffix = f"x{int(moved)}" if moved else ""
    return tag if not suffix or tag.endswith(suffix) else tag + suffix


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    prefix = ["ip", "netns", "exec", ns] if ns else []
    return subprocess.run([*prefix, *args], capture_output=True, text=True, check=check)


@dataclass
class Lan:
    tag: str                       # short and unique: names of namespaces, links and the bridge
    subnet: str = "10.213.0"       # a /24 of the project's own test hosts
    hosts: list[str] = field(default_factory=list)
    prefix: str = "tf"             # every name starts with it (a lab of another kind has its own)

    def __post_init__(self):
        self.subnet, self.tag = own_subnet(self.subnet), own_tag(self.tag)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}b{self.tag}"

    def namespace(self, i: int) -> str:
        return f"{self.prefix}n{self.tag}h{i}"

    def veth(self, i: int) -> str:
        return f"{self.prefix}v{self.tag}h{i}"

    def address(self, i: int) -> str:
        return f"{self.subnet}.{i + 2}"

    def up(self, n: int) -> "Lan":
        self.down()
        if os.environ.get("TFC_TEST_RUN"):       # the run's ledger names it: a killed run's is taken down
            from support import rigs
            rigs.note("lan", tag=self.tag, subnet=self.subnet, prefix=self.prefix)
        ip("ip", "link", "add", self.bridge, "type", "bridge")
        ip("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        ip("ip", "link", "set", self.bridge, "up")
        # Docker loads br_netfilter and sets FORWARD's policy to DROP: bridged traffic between
        # the namespaces would be dropped without this rule.
        ip("iptables", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT")
        for i in range(n):
            ns, veth = self.namespace(i), self.veth(i)
            ip("ip", "netns", "add", ns)
            ip("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("ip", "link", "set", veth, "master", self.bridge, "up")
            ip("ip", "addr", "add", f"{self.address(i)}/24", "dev", "eth0", ns=ns)
            ip("ip", "link", "set", "eth0", "up", ns=ns)
            ip("ip", "link", "set", "lo", "up", ns=ns)
            self.hosts.append(ns)
        return self

    def shape(self, rate: str, latency: str = "20ms") -> None:
        """Every host's link at `rate`, both ways: its uplink (eth0) and downlink (its veth)."""
        tbf = ["tbf", "rate", rate, "burst", burst(rate), "latency", latency]
        for i, ns in enumerate(self.hosts):
            ip("tc", "qdisc", "replace", "dev", self.veth(i), "root", *tbf)
            ip("tc", "qdisc", "replace", "dev", "eth0", "root", *tbf, ns=ns)

    def block(self, i: int, port: int) -> None:
        """Host i's firewall drops the port (as a host firewall would)."""
        ip("iptables", "-I", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP", ns=self.hosts[i])

    def unblock(self, i: int, port: int) -> None:
        ip("iptables", "-D", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP", ns=self.hosts[i], check=False)

    def down(self) -> None:
        names = ip("ip", "netns", "list", check=False).stdout.split()
        for ns in [n for n in names if n.startswith(self.namespace(0)[:-1])]:
            for pid in ip("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            ip("ip", "netns", "del", ns, check=False)
        # A veth goes with its namespace, but only once every process in it is gone: delete it here.
        for line in ip("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
            if name.startswith(self.veth(0)[:-1]):
                ip("ip", "link", "del", name, check=False)
        ip("ip", "link", "del", self.bridge, check=False)
        while ip("iptables", "-D", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT", check=False).returncode == 0:
            pass
        self.hosts = []


def available() -> bool:
    return os.getuid() == 0 and subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


def burst(rate: str) -> str:
    """tbf's bucket: 10 ms worth of the rate (at least 64 KB), enough for full speed at any HZ."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, factor in units.items():
        if rate.endswith(unit):
            return f"{max(64_000, int(float(rate[:-len(unit)]) * factor / 8 / 100))}b"
    raise ValueError(f"rate {rate!r}: expected a number with kbit, mbit or gbit")
