"""links: the closed-link message and when links are checked."""
from __future__ import annotations

import json

from launcher import plan as plan_mod
from launcher.stages import links
from support.builders import cluster, host_facts


def test_a_closed_link_names_both_hosts_the_port_and_the_rule_that_opens_it():
    plan = plan_mod.make(cluster(3))
    matrix = links.Matrix(["h0", "h1", "h2"], {"h0": {"h1": "open", "h2": "timed out"},
                                               "h1": {"h0": "open", "h2": "open"}, "h2": {"h0": "open", "h1": "open"}})
    (line,) = links.judge(plan, matrix)
    assert line.startswith("h0 cannot reach h2 at 10.0.0.3:2222 (timed out)")
    assert "iptables -I INPUT -p tcp -s 10.0.0.1 --dport 2222 -j ACCEPT" in line
    assert "CLOSED" in matrix.text() and matrix.text().count("open") == 5


def test_links_are_checked_only_for_hosts_that_train_together_and_are_not_running():
    assert links.needed(plan_mod.make(cluster(2)), {"h0": host_facts(own_running="0"), "h1": host_facts(own_running="0")})
    assert not links.needed(plan_mod.make(cluster(2)), {"h0": host_facts(own_running="1"), "h1": host_facts(own_running="0")})
    assert not links.needed(plan_mod.make(cluster(1)), {"h0": host_facts()})


def test_the_matrix_shows_each_measured_link_and_the_ring_goes_at_the_slowest():
    matrix = links.Matrix(["h0", "h1", "h2"], {"h0": {"h1": "open", "h2": "open"}, "h1": {"h0": "open", "h2": "open"},
                                               "h2": {"h0": "open", "h1": "open"}},
                          {"h0": {"h1": 941.2, "h2": 1210.0}, "h1": {"h0": 95.4}, "h2": {}})
    rows = matrix.text().splitlines()
    assert rows[1].split() == ["h0", "-", "941", "Mbit/s", "1,210", "Mbit/s"]
    assert rows[3].split() == ["h2", "open", "open", "-"]        # not measured (budget spent): still open
    assert matrix.slowest_mbit_s == 95.4
    assert links.Matrix(["h0"], {"h0": {}}).slowest_mbit_s is None


def test_each_host_measures_the_next_host_in_the_ring_first():
    plan = plan_mod.make(cluster(4))
    order = [t.split("|")[0] for t in links.targets(plan, plan.cluster.hosts[2])]
    assert order == ["c.h3", "c.h0", "c.h1"]


def test_what_a_host_answers_is_checked_before_it_is_believed():
    plan = plan_mod.make(cluster(3))
    h0 = plan.cluster.hosts[0]
    answer = json.dumps({"reach": {"c.h1": "open", "c.h2": "refused\x1b[31m" + "x" * 500, "c.zz": "open"},
                         "mbit_s": {"c.h1": 941.5, "c.h2": 5.0, "c.zz": 1.0}})
    reach, rates = links.parse_answer(answer, plan, h0)
    assert reach == {"h1": "open", "h2": "refused" + "x" * 72 + "…"} and rates == {"h1": 941.5, "h2": 5.0}
    for junk in ("", "not json", "[1, 2]", '{"reach": "open", "mbit_s": []}', "{" * 100_001):
        assert links.parse_answer(junk, plan, h0) == ({"h1": "no answer", "h2": "no answer"}, {})
    odd = {"reach": {"c.h1": 1, "c.h2": "open"}, "mbit_s": {"c.h1": True, "c.h2": float("nan")}}
    assert links.parse_answer(json.dumps(odd), plan, h0) == ({"h1": "no answer", "h2": "open"}, {})
    for bad in (-1, 0, 1e12, "941", 5e-324, 1e-320, 0.001, 2e6):      # what no link carries: not measured
        assert links.parse_answer(json.dumps({"reach": {}, "mbit_s": {"c.h1": bad}}), plan, h0)[1] == {}


def test_a_host_that_names_no_peer_is_a_closed_link_not_a_silent_one():
    plan = plan_mod.make(cluster(2))
    reach, _ = links.parse_answer('{"reach": {}, "mbit_s": {}}', plan, plan.cluster.hosts[0])
    matrix = links.Matrix(["h0", "h1"], {"h0": reach, "h1": {"h0": "open"}})
    (line,) = links.judge(plan, matrix)
    assert line.startswith("h0 cannot reach h1 at 10.0.0.2:2222 (no answer)")


def test_in_parallel_mode_each_host_reaches_only_the_chiefs_queue_and_is_judged_on_that_alone():
    plan = plan_mod.make(cluster(3, train={"search": {"mode": "parallel"}}))
    h0, h1, h2 = plan.cluster.hosts
    assert [h.name for h in links.listeners(plan)] == ["h0"] and links.targets(plan, h0) == []
    assert links.targets(plan, h2) == [f"c.h0|{h0.address}|{plan.study_port}"]
    reach, _ = links.parse_answer('{"reach": {"c.h0": "open"}, "mbit_s": {}}', plan, h2)
    assert reach == {"h0": "open"}                 # h1 was not asked: not a closed link
    matrix = links.Matrix(["h0", "h1", "h2"], {"h1": {"h0": "open"}, "h2": reach})
    assert links.judge(plan, matrix) == [] and "CLOSED" not in matrix.text()


def test_the_matrix_says_which_port_it_checked_the_trial_queue_in_parallel_mode():
    from launcher.ssh.connection import Result
    from launcher.ssh.fanout import fan_out
    from support.fakes import FakeConnection

    class Hosts:       # what check() uses of a Group: each host's step on its (fake) connection
        def __init__(self, plan):
            self.plan = plan
            self.conns = {h.name: FakeConnection(lambda cmd: self.answer(cmd), host=h.name) for h in plan.cluster.hosts}

        def answer(self, command):
            if "import json, socket" in " ".join(command):     # the connect probe: the chief's queue is open
                return Result(0, json.dumps({"reach": {"c.h0": "open"}, "mbit_s": {}}), "")
            return Result(0, "bound\n", "")

        def run(self, step, fn, hosts=None):
            return fan_out(self.plan.cluster.hosts if hosts is None else hosts, step, lambda h: fn(h, self.conns[h.name]))

        def staged(self, step, fn, hosts=None):
            return self.run(step, fn, hosts).raise_if_failed()

    parallel = plan_mod.make(cluster(3, train={"search": {"mode": "parallel", "port": 2999}}))
    matrix = links.check(Hosts(parallel), parallel)
    assert matrix.port == "the chief's trial queue, port 2999" and "TF port" not in matrix.port
    assert links.checked_port(plan_mod.make(cluster(2))) == "TF port"
