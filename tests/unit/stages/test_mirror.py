"""mirror: the chief's snapshot relayed to the next host once per new epoch, bounded, never half."""
from __future__ import annotations

import json
from types import SimpleNamespace

from launcher import plan as plan_mod
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
