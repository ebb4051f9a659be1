"""The lease stage (launcher/leases/take.py), its hosts two folders here (two machines), the host
script run locally: all or nothing across hosts, the queue and its order, a crowded folder refused."""
from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from launcher.errors import RemoteError
from launcher.plan import make
from launcher.reporter import RecordingReporter
from launcher.ssh.connection import Result
from launcher.ssh.fanout import fan_out
from launcher.leases import files as lf, on_host, take as leases
from support.builders import cluster as a_cluster
from support.fakes import FakeConnection
from support.lease_host import UID, Session, a_lease


class LocalHost(FakeConnection):
    """The one fake connection, answering each command by running it here, as the host would."""

    def __init__(self, name: str):
        super().__init__(host=name)
        self.held: list[subprocess.Popen] = []

    def run(self, command, check: bool = True, stdin: bytes | None = None, **kw) -> Result:
        self.commands.append(command)
        done = subprocess.run(command, input=stdin or b"", capture_output=True, timeout=60)
        result = Result(done.returncode, done.stdout.decode(), done.stderr.decode())
        if check and not result.ok:
            raise RemoteError(self.host.name, command, result.status, result.stderr)
        return result

    @property
    def client(self):
        return self

    def hold(self, command, ready: str):
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        assert proc.stdout.readline().decode().strip() == ready
        self.held.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.held:
            proc.stdin.close()
            proc.wait(10)


class LocalGroup:
    """What the stage uses of a Group: the cluster, a reporter, `run` on every host at once."""

    def __init__(self, cluster):
        self.cluster, self.reporter = cluster, RecordingReporter()
        self.conns = {h.name: LocalHost(h.name) for h in cluster.hosts}

    def run(self, step, fn, hosts=None):
        return fan_out(self.cluster.hosts if hosts is None else hosts, step, lambda h: fn(h, self.conns[h.name]))

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def two_machines(tmp_path: Path, name: str = "c", gpus=0, port: int = 2222):
    base = a_cluster(2)
    hosts = tuple(replace(h, lease_dir=str(tmp_path / f"machine{i}"), gpus=gpus, tf_port=port + i)
                  for i, h in enumerate(base.hosts))
    return replace(base, hosts=hosts, spec=base.spec.model_copy(update={"cluster": name}))


@pytest.fixture
def groups():
    made = []

    def group(cluster) -> LocalGroup:
        made.append(LocalGroup(cluster))
        return made[-1]
    yield group
    for g in made:
        g.close()


def test_a_host_held_on_one_machine_refuses_the_up_and_nothing_is_written_on_the_other(tmp_path, groups):
    holder = two_machines(tmp_path, "holder", gpus=[0])
    held = groups(holder)
    leases.take(held, make(holder))
    leases.release(held, [holder.hosts[1]])                     # now it holds machine 0 alone
    mine = two_machines(tmp_path, "mine", gpus=[0])
    with pytest.raises(leases.LeasesRefused) as refused:
        leases.take(groups(mine), make(mine))
    assert str(refused.value).splitlines()[1].startswith("  h0: in use by ") and "refused on 1 of 2" in str(refused.value)
    assert [p.name for p in (tmp_path / "machine1").glob("*.lease")] == []


def test_when_one_machines_folder_changed_under_the_write_the_others_are_written_back(tmp_path, groups):
    mine = two_machines(tmp_path, "mine")
    group = groups(mine)
    sessions = group.run("lease", lambda h, c: on_host.open_session(h, c, group.reporter)).succeeded
    own = lf.lease_file("mine", "h0", UID)
    (tmp_path / "machine0" / own).write_text(lf.lease_text(replace(a_lease(), cluster="mine")))   # an earlier run's
    before = (tmp_path / "machine0" / own).read_text()
    _, rounds = leases.assess(group, make(mine), sessions, None, "me@here", False)
    (tmp_path / "machine1" / "someone.h9.0.lease").write_text("{}")   # another launcher, just now
    assert leases.commit(group, rounds) is False
    assert (tmp_path / "machine0" / own).read_text() == before       # written back as it was
    assert not (tmp_path / "machine1" / lf.lease_file("mine", "h1", UID)).exists()


def test_a_queued_up_says_whom_it_waits_for_and_takes_its_turn_once_they_give_back(tmp_path, groups):
    holder, mine = two_machines(tmp_path, "holder", gpus=[0, 1]), two_machines(tmp_path, "mine", gpus=[1], port=3333)
    held = groups(holder)
    leases.take(held, make(holder))
    waiting = groups(mine)
    done: list = []
    thread = threading.Thread(target=lambda: done.append(leases.take(waiting, make(mine), queue=True, poll_s=0.2)))
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not any(s == "queued" for _, s, _ in waiting.reporter.events) and time.monotonic() < deadline:
            time.sleep(0.1)
        line = next(d for h, s, d in waiting.reporter.events if h == "h0" and s == "queued")
        assert line.startswith("waiting: in use by ") and "cluster holder (from " in line and line.endswith(": GPUs 1")
        assert len(list((tmp_path / "machine0").glob("*.ticket"))) == 1 and done == []
    finally:
        leases.release(held)
        thread.join(20)
    assert done and set(done[0].rounds) == {"h0", "h1"}
    for machine in ("machine0", "machine1"):
        assert [p.name for p in (tmp_path / machine).glob("*.ticket")] == []
        assert [p.name for p in (tmp_path / machine).glob("*.lease")] == [f"mine.h{machine[-1]}.{UID}.lease"]


def test_a_launcher_whose_clock_is_an_hour_slow_takes_its_turn_after_those_who_asked_first(tmp_path, groups, monkeypatch):
    holder = two_machines(tmp_path, "holder", gpus=[0])
    held = groups(holder)
    leases.take(held, make(holder))
    order: list[str] = []

    def wait_turn(name: str) -> threading.Thread:
        cluster = two_machines(tmp_path, name, gpus=[0], port=3000 + len(name))
        group = groups(cluster)
        thread = threading.Thread(target=lambda: (leases.take(group, make(cluster), queue=True, poll_s=0.2),
                                                  order.append(name), leases.release(group)))
        thread.start()
        return thread

    def tickets() -> int:
        return len(list((tmp_path / "machine0").glob("*.ticket")))

    def eventually(condition) -> bool:
        deadline = time.monotonic() + 20
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.05)
        return condition()

    early = wait_turn("early")
    assert eventually(lambda: tickets() == 1)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)     # this launcher's clock: an hour slow
    late = wait_turn("late-slow")
    assert eventually(lambda: tickets() == 2)
    monkeypatch.setattr(time, "time", real)
    leases.release(held)
    early.join(30), late.join(30)
    assert order == ["early", "late-slow"]


def test_a_crowded_lease_folder_refuses_the_up_naming_whose_files_fill_it(tmp_path, groups):
    mine = two_machines(tmp_path, "mine")
    Session(tmp_path / "machine1", "a" * 16).end()
    for i in range(on_host.MAX_FILES + 88):
        (tmp_path / "machine1" / f"a{i:04d}.h0.{UID}.lease").write_text("{}")
    with pytest.raises(leases.FolderCrowded) as refused:
        leases.take(groups(mine), make(mine))
    said = str(refused.value)
    assert f"h1: the lease folder {tmp_path / 'machine1'} holds 600 lease files, more than the 512 tfcompose reads" in said
    assert "600 of them belong to root" in said
    assert not list((tmp_path / "machine0").glob("*.lease")) and not list((tmp_path / "machine1").glob("mine.*"))
