"""wait: fail-fast, finishing and deadlines as pure functions."""
from __future__ import annotations

import pytest
from launcher import plan as plan_mod
from launcher.stages import wait
from launcher.inventory.schema import RunSpec
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
    assert wait.final_failure(status, retries) is final


def test_the_run_ends_when_the_chief_exits_0_and_only_sync_mode_fails_with_any_host():
    sync, par = plan_mod.make(cluster()), plan_mod.make(cluster(train={"search": {"mode": "parallel"},
                                                                        "candidates": ["small_cnn", "deep_cnn"]}))
    states = {"h0": st("h0", "exited", 0), "h1": st("h1", "running")}
    assert wait.finished(states, wait.must_finish(sync)) and wait.finished(states, wait.must_finish(par))
    assert not wait.finished({"h0": st("h0", "exited", 1), "h1": st("h1", "exited", 0)}, wait.must_finish(sync))
    # a lost host fails a sync run (MWMS cannot lose one); in parallel mode its trials go elsewhere
    assert wait.essential(sync, ["h0", "h1"]) == ["h0", "h1"] and wait.essential(par, ["h0", "h1"]) == ["h0"]
    gone = {"h0": st("h0", "exited", 0), "h1": st("h1", "exited", 137), "h2": st("h2", "running")}
    assert wait.lost_hosts(gone, retries=0, unreachable=["h2"]) == ["h1", "h2"]


def test_the_first_host_to_fail_is_named_first():
    states = {"a": st("a", "exited", 1, finished="2026-01-01T10:00:05Z"),
              "b": st("b", "exited", 137, finished="2026-01-01T10:00:01Z"),
              "c": st("c", "absent"), "d": st("d", "running")}
    assert [s.host for s in wait.first_failures(states, retries=0)] == ["b", "a", "c"]


def test_a_host_silent_past_the_limit_is_lost_and_one_that_answers_again_is_not():
    assert wait.lost({"a": 0.0, "b": 250.0}, ["a", "b"], since=0.0, now=301.0, limit=300) == ["a"]
    assert wait.lost({}, ["a"], since=100.0, now=120.0, limit=30) == []          # never answered: from the start
    assert wait.lost({}, ["a"], since=100.0, now=131.0, limit=30) == ["a"]


def test_run_programs_are_stopped_by_their_join_and_finish_deadlines():
    run = RunSpec(command=["python", "x.py"], code_dir=".", join_timeout_s=60, deadline_s=3600)
    ports = {"a": 2222, "b": 2223}
    assert wait.deadline(None, 1e9, ["a"], ports) is None           # the trainer has its own watchdog
    assert wait.deadline(run, 59, ["b"], ports) is None
    why = wait.deadline(run, 61, ["b"], ports)
    assert "b (port 2223)" in why and "join_timeout_s" in why and "a (port" not in why
    assert wait.deadline(run, 61, None, ports) is None               # joined: only the finish limit counts
    assert "deadline_s" in wait.deadline(run, 3601, None, ports)


def test_a_container_docker_will_not_restart_ends_the_wait_at_the_first_look_whatever_restarts_are_left():
    """#47: a container killed by hand was held for Docker's back-off plus 10 s before the queue or
    the run heard of it; Docker shows one it will restart as `restarting` at once."""
    killed = st("a", "exited", 137, restarts=0)
    assert wait.final_failure(killed, retries=2)
    assert [f.host for f in wait.first_failures({"a": killed, "b": st("b", "running")}, retries=2)] == ["a"]


def test_the_queue_hears_of_each_lost_host_once_and_never_of_the_chief():
    par = plan_mod.make(cluster(3, train={"search": {"mode": "parallel"}, "candidates": ["small_cnn", "deep_cnn"]}))
    states = {"h0": st("h0", "running"), "h1": st("h1", "exited", 137), "h2": st("h2", "running")}
    assert wait.to_signal(par, states, 2, [], set()) == ["h1"]
    assert wait.to_signal(par, states, 2, ["h2"], {"h1"}) == ["h2"]
    assert wait.to_signal(par, {**states, "h0": st("h0", "absent"), "h1": st("h1", "running")}, 2, [], set()) == []
    assert wait.to_signal(plan_mod.make(cluster(3)), states, 2, [], set()) == []    # sync: no queue


def test_a_chiefs_death_says_how_to_go_on():
    hint = wait.resume_hint(plan_mod.named(plan_mod.make(cluster()), "20261125-140233-3f2a1b2c"))
    assert "`tfcompose up --wait` resumes run 20261125-140233-3f2a1b2c" in hint and "--new-run" in hint


def test_a_trainer_that_refuses_its_input_fails_at_once_and_its_own_words_come_first():
    assert wait.final_failure(st("a", "restarting", 2, restarts=1), retries=5)      # exit 2: a restart refuses it again
    log = "\n".join(["tfcompose trainer: train.yaml: epochs: Received 0. Expected an integer ≥ 1."]
                    + [f"W some CUDA warning {i}" for i in range(20)])
    assert wait.last_lines(log)[0].startswith("tfcompose trainer: train.yaml: epochs")


def test_a_restarting_host_reads_as_one_parenthesis():
    from types import SimpleNamespace
    from launcher.reporter import RecordingReporter
    from launcher.stages.looks import Look
    reporter = RecordingReporter()
    wait.show(SimpleNamespace(reporter=reporter), plan_mod.make(cluster(1)),
              {"h0": Look(HostStatus("h0", "restarting", None, 1))}, 0.0)
    assert reporter.events == [("h0", "restarting", "restarts 1")]


def test_a_program_that_failed_twice_alike_at_its_start_ends_the_wait_and_shows_its_own_error_line():
    """#47: Docker restarted a `run:` program into the same exception until its restarts were used
    up, and the live view showed the tail of a printed tensor, not the error."""
    from types import SimpleNamespace
    from launcher.reporter import RecordingReporter
    from launcher.stages.looks import Look
    from launcher.stages.status import program_error
    from trainer import runner
    assert wait.final_failure(st("a", "restarting", runner.REPEATED, restarts=1), retries=5)    # not restarted again
    assert not wait.final_failure(st("a", "restarting", 1, restarts=1), retries=5)
    log = ["  0: <tf.Tensor: shape=(16,), dtype=float32, numpy=array([0.1, 0.2], dtype=float32)>}",
           runner.failed_line(1, 14.0, "ValueError: Attempt to convert a value (PerReplica:{"),
           "  1: <tf.Tensor: shape=(16,)>}) with an unsupported type"]
    assert program_error(log) == "ValueError: Attempt to convert a value (PerReplica:{"
    reporter = RecordingReporter()
    plan = plan_mod.make(cluster(1, run={"command": ["python", "train.py"], "code_dir": "."}))
    failed = HostStatus("h0", "restarting", 1, 1, tail_line=log[-1], error_line=program_error(log))
    wait.show(SimpleNamespace(reporter=reporter), plan, {"h0": Look(failed)}, 20.0)
    assert reporter.events == [("h0", "restarting", "exit 1: ValueError: Attempt to convert a value (PerReplica:{ "
                                                    "(restarts 1)")]


def test_a_host_is_failing_since_it_first_failed_for_good_and_forgotten_once_well():
    since = wait.failing({"h1": st("h1", "exited", 1), "h2": st("h2", "running")}, 0, {"h1": 5.0}, 9.0)
    assert since == {"h1": 5.0}                                 # since it first failed; h2 is well
    assert wait.failing({"h1": st("h1", "running")}, 0, {"h1": 5.0}, 9.0) == {}


def test_elastic_a_worker_that_fails_for_good_waits_for_the_re_form_but_every_host_failing_ends_the_run():
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 2, "lost_after_s": 45}))
    watch = wait.Watch(plan, 0.0)
    states = {"h0": st("h0", "restarting", 1), "h1": st("h1", "running"), "h2": st("h2", "exited", 137)}
    found = {n: type("Look", (), {"status": s, "progress": None})() for n, s in states.items()}
    watch.see({"h0": 10.0, "h1": 10.0, "h2": 10.0}, 10.0, found)
    assert watch.ending(None, states, act=True) is None              # not yet: h2 may be back within 45 s
    watch.see({"h0": 60.0, "h1": 60.0, "h2": 60.0}, 60.0, found)
    outcome = watch.ending(None, states, act=True)
    assert not outcome.failed and list(outcome.lost_for_good) == ["h2"]
    everyone = {n: st(n, "exited", 2) for n in states}               # the trainer refuses its input everywhere
    assert wait.Watch(plan, 0.0).carries_on(everyone) is False
    two_failed = {"h0": st("h0", "running"), "h1": st("h1", "exited", 137), "h2": st("h2", "exited", 137)}
    watch = wait.Watch(plan, 0.0)
    assert not watch.carries_on(two_failed) and watch.healthy(two_failed) == ["h0"]


class Returning:
    """A stand-in for returning.Away: h2 answers again and may come back at an epoch's end."""

    def __init__(self):
        self.asked = []

    def see(self, now):
        pass

    def coming_back(self, reporter, reforms, now, boundary):
        self.asked.append(boundary)
        return ["h2"] if boundary else []


def test_elastic_a_returning_host_ends_the_wait_only_when_the_chief_has_just_finished_an_epoch():
    from trainer.spec.progress import Progress
    plan = plan_mod.make(cluster(2, elastic={"min_hosts": 1, "rejoin": True}))
    away = Returning()
    watch = wait.Watch(plan, 0.0, away)
    states = {"h0": st("h0", "running"), "h1": st("h1", "running")}
    group = type("G", (), {"reporter": None})()

    def look(epoch):
        seen = Progress("worker:0", 1, 1, "small_cnn#001", epoch, 12, 2.0, 500.0, 0.5, 0.8, 0.6, 0.7, 0, 0.0)
        watch.see({"h0": 1.0, "h1": 1.0}, 1.0, {n: type("Look", (), {"status": s, "progress": seen})()
                                                for n, s in states.items()})
        return watch.ending(group, states, act=True)
    assert look(3) is None and look(3) is None            # the first look, then the same epoch
    outcome = look(4)
    assert outcome.rejoining == ["h2"] and not outcome.failed and outcome.lost_for_good == {}
    assert away.asked == [False, False, True]
    assert wait.Watch(plan, 0.0).coming_back(group) == []            # nobody away: nothing looked at


def test_a_host_that_answered_in_this_round_is_not_silent_however_long_the_round_waited_for_another():
    # A round waits up to looks.WAIT_S (10 s) for a silent host: the others answered at its start.
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 1, "lost_after_s": 8}))
    watch = wait.Watch(plan, 0.0)
    states = {n: st(n, "running") for n in ("h0", "h1", "h2")}
    found = {n: type("Look", (), {"status": s, "progress": None, "answered": n != "h2"})() for n, s in states.items()}
    watch.see({"h0": 100.5, "h1": 100.5, "h2": 91.0}, 110.5, found)
    outcome = watch.ending(None, states, act=True)
    assert outcome is not None and list(outcome.lost_for_good) == ["h2"]
