"""mirror: the chief's snapshot relayed to the next host once per new epoch, bounded, never half."""
from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher import plan as plan_mod
from launcher.errors import RemoteError
from launcher.ssh.connection import Result
from launcher.stages import mirror
from support.builders import cluster
from support.fakes import FakeConnection


class Told:
    def __init__(self):
        self.warnings: list = []

    def warn(self, host, message):
        self.warnings.append((host, message))


def hosts(said: dict, tar: bytes = b"TAR" * 10):
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 1}))
    manifest = Result(0, json.dumps(said), "")
    chief = FakeConnection(lambda cmd: manifest if cmd[0] == "cat" else Result(0, "", ""), host="h0",
                           output=lambda cmd: tar if cmd[0] == "tar" else b"")
    conns = {"h0": chief, "h1": FakeConnection(host="h1"), "h2": FakeConnection(host="h2")}
    group = SimpleNamespace(conn=lambda h: conns[h.name], reporter=Told())
    return plan, group, conns


def test_a_new_snapshot_goes_whole_to_the_next_host_once():
    plan, group, conns = hosts({"host": "h0", "trial": "small_cnn", "epoch": 3, "at": 1.0})
    kept = mirror.Mirror()
    mirror.relay(group, plan, kept)
    assert kept.holds("h1") and kept.relays == 1 and kept.bytes == 30 and not kept.holds("h2")
    assert conns["h1"].stdin[-1] == b"TAR" * 10 and "chief-mirror" in conns["h1"].commands[-1]
    mirror.relay(group, plan, kept)                     # the same snapshot: nothing sent again
    assert kept.relays == 1 and len(conns["h1"].commands) == 1


def test_a_manifest_that_is_not_the_trainers_relays_nothing():
    for said in ({"host": "h0", "trial": "t", "epoch": "3"}, {"epoch": 3}, ["h0"]):
        plan, group, conns = hosts(said)
        kept = mirror.Mirror()
        mirror.relay(group, plan, kept)
        assert kept.relays == 0 and conns["h1"].commands == []


def test_a_snapshot_larger_than_the_bound_is_never_sent_and_stops_the_mirror_saying_so(monkeypatch):
    monkeypatch.setattr(mirror, "MIRROR_MAX", 100)
    plan, group, conns = hosts({"host": "h0", "trial": "t", "epoch": 1}, tar=b"x" * (1 << 17))
    kept = mirror.Mirror()
    mirror.relay(group, plan, kept)
    assert kept.relays == 0 and kept.broken and conns["h1"].commands == []
    assert "larger than" in group.reporter.warnings[0][1]


def test_a_failed_relay_is_a_warning_and_the_next_look_tries_again():
    plan, group, conns = hosts({"host": "h0", "trial": "t", "epoch": 1})
    conns["h1"].answer = lambda cmd: Result(2, "", "tar: Unexpected EOF in archive")
    kept = mirror.Mirror()
    mirror.relay(group, plan, kept)
    assert kept.relays == 0 and not kept.broken and "trying again" in group.reporter.warnings[0][1]
    conns["h1"].answer = lambda cmd: Result(0, "", "")
    mirror.relay(group, plan, kept)
    assert kept.holds("h1")


def here(name: str) -> FakeConnection:
    """A host whose commands run on this machine, for real (tar and the extract script)."""
    def answer(cmd):
        done = subprocess.run(cmd, input=conn.stdin[-1], capture_output=True)
        return Result(done.returncode, done.stdout.decode(), done.stderr.decode())
    conn = FakeConnection(answer, host=name, output=lambda cmd: subprocess.run(cmd, capture_output=True).stdout)
    return conn


def test_a_returning_host_takes_the_chiefs_backups_in_place_of_its_own_but_not_its_state_or_mirror(tmp_path):
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 1}))
    plan = replace(plan, cluster=replace(plan.cluster, hosts=tuple(replace(h, bundle_dir=str(tmp_path / h.name))
                                                                   for h in plan.cluster.hosts)))
    h0, _, h2 = plan.cluster.hosts
    mine = Path(mirror.backup_folder(plan, h0))
    for rel, text in {"small_cnn#002/chief/checkpoint": "ckpt-4", "search_state.json": "{}",
                      "history/small_cnn#002.csv": "epoch\n1\n", "chief-state/study.db": "S", "chief-mirror/x": "M"}.items():
        (mine / rel).parent.mkdir(parents=True, exist_ok=True)
        (mine / rel).write_text(text)
    old = Path(mirror.backup_folder(plan, h2))
    (old / "small_cnn#002/chief").mkdir(parents=True)
    (old / "small_cnn#002/chief/checkpoint").write_text("ckpt-1")          # from before it was lost
    conns = {"h0": here("h0"), "h2": here("h2")}
    group = SimpleNamespace(conn=lambda h: conns[h.name])

    assert mirror.hand_backups(group, plan, h0, h2) > 0
    held = sorted(str(p.relative_to(old)) for p in old.rglob("*") if p.is_file())
    assert held == ["history/small_cnn#002.csv", "search_state.json", "small_cnn#002/chief/checkpoint"]
    assert (old / "small_cnn#002/chief/checkpoint").read_text() == "ckpt-4"
    assert sorted(p.name for p in old.parent.iterdir()) == ["h2"]      # no temporary folder left beside it

    conns["h0"].output = lambda cmd: b"not a tar"                       # a relay cut short: its own kept whole
    (mine / "small_cnn#002/chief/checkpoint").write_text("ckpt-5")
    with pytest.raises(RemoteError, match="h2"):
        mirror.hand_backups(group, plan, h0, h2)
    assert (old / "small_cnn#002/chief/checkpoint").read_text() == "ckpt-4"
