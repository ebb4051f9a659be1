"""The cluster's hosts for the length of a command: one lazily opened Connection per host (and
one session per bastion, shared by the hosts behind it: jump.py), and `run`/`staged` to call a
step on every host at once (through fanout.py)."""
from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Callable, Iterable, Optional, TypeVar

from launcher.inventory.model import Cluster, Host
from launcher.reporter import NullReporter, Reporter
from launcher.ssh.connection import Connection
from launcher.ssh.fanout import GroupResult, fan_out
from launcher.ssh.jump import Bastions

T = TypeVar("T")


class Group:
    """The cluster's hosts, one SSH connection each (opened on first use), and a Reporter."""

    def __init__(self, cluster: Cluster, reporter: Reporter | None = None, parallel: Optional[int] = None):
        self.cluster, self.reporter, self.parallel = cluster, reporter or NullReporter(), parallel
        self.cancel = threading.Event()      # set while an interrupted run calls its hosts' work off
        self._stack = ExitStack()
        ssh = cluster.spec.ssh
        # Entered first, so closed last: the hosts' sessions run inside the bastions'.
        self.jumps = self._stack.enter_context(Bastions(cluster.known_hosts, ssh.host_key_policy, ssh.connect_timeout_s,
                                                        cancel=self.cancel))
        self._conns = {h.name: self._stack.enter_context(connect(cluster, h, self.cancel, self.jumps))
                       for h in cluster.hosts}

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def narrowed(self, cluster: Cluster) -> "Group":
        """The same sessions for fewer hosts (an elastic run's survivors, renumbered): `run` reaches
        only these; the sessions stay this group's to close."""
        return _Fewer(self, cluster)

    def conn(self, host: Host):
        return self._conns[host.name]

    def run(self, step: str, fn: Callable[[Host, object], T], hosts: Optional[Iterable[Host]] = None) -> GroupResult[T]:
        """`fn(host, connection)` on every host (or `hosts`), all at once."""
        return fan_out(self.cluster.hosts if hosts is None else hosts, step, lambda h: fn(h, self.conn(h)), self.parallel,
                       self.cancel)

    def staged(self, step: str, fn: Callable[[Host, object], T], hosts: Optional[Iterable[Host]] = None) -> GroupResult[T]:
        """Like run, reporting `step` for each host as it begins; raises GroupError if any failed."""
        def one(host: Host, conn) -> T:
            self.reporter.stage(host.name, step)
            return fn(host, conn)
        return self.run(step, one, hosts).raise_if_failed()


class _Fewer(Group):
    """A group's sessions for fewer hosts. Its reporter is always the whole group's: telemetry puts
    its own in place while the run is watched, and takes it back after."""

    def __init__(self, whole: Group, cluster: Cluster):           # noqa: super().__init__ would open new sessions
        self.__dict__.update({k: v for k, v in whole.__dict__.items() if k != "reporter"})
        self._whole, self.cluster = whole, cluster

    @property
    def reporter(self):
        return self._whole.reporter

    @reporter.setter
    def reporter(self, value) -> None:
        self._whole.reporter = value


def connect(cluster: Cluster, host: Host, cancel: Optional[threading.Event] = None,
            jumps: Optional[Bastions] = None) -> Connection:
    """A Connection to one host with the inventory's SSH settings (opened on first use); through
    `jumps`' bastions, else bastions of its own."""
    ssh = cluster.spec.ssh
    return Connection(host, cluster.known_hosts, ssh.host_key_policy, ssh.connect_timeout_s,
                      command_timeout=ssh.command_timeout_s, cancel=cancel, jumps=jumps)
