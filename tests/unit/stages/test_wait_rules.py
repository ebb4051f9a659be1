"""When a run has ended, failed or goes on without a host (launcher/stages/wait_rules.py): pure
functions over host states and times."""
from __future__ import annotations

import pytest
from launcher import plan as plan_mod
from launcher.inventory.schema import RunSpec
from launcher.stages import wait_rules
from launcher.stages.status import HostStatus
from support.builders import cluster


def st(name: str, state: str, code=None, restarts: int = 0, finished: str = "") -> HostStatus:
    return HostStatus(name, state, code, restarts, finished_at=finished)


@pytest.mark.parametrize("status, retries, final", [
    (st("a", "exited", 1, restarts=2), 2, True),       # restarts used up
    (st("a", "exited", 137, restarts=0), 2, True),     # `docker kill`: exited, never restarted, restarts left or not
    (st("a", "restarting", 1, restarts=1), 2, False),  # Docker restarts it: `restarting` from the moment it ended
    (st("a", "exited", 0), 0, False),                  # success is not a failure
    (st("a", "running"), 0, False),
    (st("a", "restarting", 1), 0, False),
    (st("a", "dead"), 5, True),
    (st("a", "absent"), 5, True),                      # the container is gone
    (st("a", "unreachable"), 0, False),                # judged by `lost`, not here
])
def test_a_host_fails_for_good_only_when_docker_gave_up(status, retries, final):
    assert wait_rules.final_failure(status, retries) is final


def test_the_run_ends_when_the_chief_exits_0_and_only_sync_mode_fails_with_any_host():
    sync, par = plan_mod.make(cluster()), plan_mod.make(cluster(train={"search": {"mode": "parallel"},
                                                                        "candidates": ["small_cnn", "deep_cnn"]}))
    states = {"h0": st("h0", "exited", 0), "h1": st("h1", "running")}
    assert wait_rules.finished(states, wait_rules.must_finish(sync)) and wait_rules.finished(states, wait_rules.must_finish(par))
    assert not wait_rules.finished({"h0": st("h0", "exited", 1), "h1": st("h1", "exited", 0)}, wait_rules.must_finish(sync))
    # a lost host fails a sync run (MWMS cannot lose one); in parallel mode its trials go elsewhere
    assert wait_rules.essential(sync, ["h0", "h1"]) == ["h0", "h1"] and wait_rules.essential(par, ["h0", "h1"]) == ["h0"]
    gone = {"h0": st("h0", "exited", 0), "h1": st("h1", "exited", 137), "h2": st("h2", "running")}
    assert wait_rules.lost_hosts(gone, retries=0, unreachable=["h2"]) == ["h1", "h2"]


def test_the_first_host_to_fail_is_named_first():
    states = {"a": st("a", "exited", 1, finished="2026-01-01T10:00:05Z"),
              "b": st("b", "exited", 137, finished="2026-01-01T10:00:01Z"),
              "c": st("c", "absent"), "d": st("d", "running")}
    assert [s.host for s in wait_rules.first_failures(states, retries=0)] == ["b", "a", "c"]


def test_a_host_silent_past_the_limit_is_lost_and_one_that_answers_again_is_not():
    assert wait_rules.lost({"a": 0.0, "b": 250.0}, ["a", "b"], since=0.0, now=301.0, limit=300) == ["a"]
    assert wait_rules.lost({}, ["a"], since=100.0, now=120.0, limit=30) == []          # never answered: from the start
    assert wait_rules.lost({}, ["a"], since=100.0, now=131.0, limit=30) == ["a"]


def test_run_programs_are_stopped_by_their_join_and_finish_deadlines():
    run = RunSpec(command=["python", "x.py"], code_dir=".", join_timeout_s=60, deadline_s=3600)
    ports = {"a": 2222, "b": 2223}
    assert wait_rules.deadline(None, 1e9, ["a"], ports) is None           # the trainer has its own watchdog
    assert wait_rules.deadline(run, 59, ["b"], ports) is None
    why = wait_rules.deadline(run, 61, ["b"], ports)
    assert "b (port 2223)" in why and "join_timeout_s" in why and "a (port" not in why
    assert wait_rules.deadline(run, 61, None, ports) is None               # joined: only the finish limit counts
    assert "deadline_s" in wait_rules.deadline(run, 3601, None, ports)


def test_a_container_docker_will_not_restart_ends_the_wait_at_the_first_look_whatever_restarts_are_left():
    """#47: a container killed by hand was held for Docker's back-off plus 10 s before the queue or
    the run heard of it; Docker shows one it will restart as `restarting` at once."""
    killed = st("a", "exited", 137, restarts=0)
    assert wait_rules.final_failure(killed, retries=2)
    assert [f.host for f in wait_rules.first_failures({"a": killed, "b": st("b", "running")}, retries=2)] == ["a"]


def test_the_queue_hears_of_each_lost_host_once_and_never_of_the_chief():
    par = plan_mod.make(cluster(3, train={"search": {"mode": "parallel"}, "candidates": ["small_cnn", "deep_cnn"]}))
    states = {"h0": st("h0", "running"), "h1": st("h1", "exited", 137), "h2": st("h2", "running")}
    assert wait_rules.to_signal(par, states, 2, [], set()) == ["h1"]
    assert wait_rules.to_signal(par, states, 2, ["h2"], {"h1"}) == ["h2"]
    assert wait_rules.to_signal(par, {**states, "h0": st("h0", "absent"), "h1": st("h1", "running")}, 2, [], set()) == []
    assert wait_rules.to_signal(plan_mod.make(cluster(3)), states, 2, [], set()) == []    # sync: no queue


def test_a_host_is_failing_since_it_first_failed_for_good_and_forgotten_once_well():
    since = wait_rules.failing({"h1": st("h1", "exited", 1), "h2": st("h2", "running")}, 0, {"h1": 5.0}, 9.0)
    assert since == {"h1": 5.0}                                 # since it first failed; h2 is well
    assert wait_rules.failing({"h1": st("h1", "running")}, 0, {"h1": 5.0}, 9.0) == {}
