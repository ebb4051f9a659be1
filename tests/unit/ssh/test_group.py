"""The group: narrowed to fewer hosts (an elastic run's survivors), it keeps the whole group's
sessions and reporter."""
from __future__ import annotations

from dataclasses import replace

from launcher.reporter import NullReporter
from launcher.ssh.group import Group
from support.builders import cluster


def test_a_narrowed_group_reaches_only_its_hosts_through_the_same_sessions_and_reporter():
    whole = cluster(3)
    fewer = replace(whole, hosts=(whole.hosts[0], whole.hosts[2]))
    with Group(whole) as group:
        survivors = group.narrowed(fewer)
        assert survivors.conn(whole.hosts[2]) is group.conn(whole.hosts[2])       # no new session
        assert sorted(survivors.run("x", lambda h, c: h.name).succeeded) == ["h0", "h2"]
        told = NullReporter()
        group.reporter = told                         # telemetry puts its own reporter in place, then takes it back
        assert survivors.reporter is told
        survivors.reporter = NullReporter()
        assert group.reporter is survivors.reporter
