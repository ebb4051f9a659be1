"""links: the closed-link message and when links are checked."""
from __future__ import annotations

from launcher import plan as plan_mod
from launcher.stages import links
from support.builders import cluster


def test_a_closed_link_names_both_hosts_the_port_and_the_rule_that_opens_it():
    plan = plan_mod.make(cluster(3))
    matrix = links.Matrix(["h0", "h1", "h2"], {"h0": {"h1": "open", "h2": "timed out"},
                                               "h1": {"h0": "open", "h2": "open"}, "h2": {"h0": "open", "h1": "open"}})
    (line,) = links.judge(plan, matrix)
    assert line.startswith("h0 cannot reach h2 at 10.0.0.3:2222 (timed out)")
    assert "iptables -I INPUT -p tcp -s 10.0.0.1 --dport 2222 -j ACCEPT" in line
    assert "CLOSED" in matrix.text() and matrix.text().count("open") == 5


def test_links_are_checked_only_for_hosts_that_train_together_and_are_not_running():
    assert links.needed(plan_mod.make(cluster(2)), {"h0": {"own_running": "0"}, "h1": {"own_running": "0"}})
    assert not links.needed(plan_mod.make(cluster(2)), {"h0": {"own_running": "1"}, "h1": {"own_running": "0"}})
    assert not links.needed(plan_mod.make(cluster(1)), {"h0": {}})
