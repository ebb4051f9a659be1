"""wait: the loop's looks, what it shows, how it ends and what it says to go on (the rules: test_wait_rules.py)."""
from __future__ import annotations

from launcher import plan as plan_mod
from launcher.stages import wait, wait_rules
from launcher.stages.status import HostStatus
from support.builders import cluster


def st(name: str, state: str, code=None, restarts: int = 0, finished: str = "") -> HostStatus:
    return HostStatus(name, state, code, restarts, finished_at=finished)


def test_a_chiefs_death_says_how_to_go_on():
    hint = wait.resume_hint(plan_mod.named(plan_mod.make(cluster()), "20261125-140233-3f2a1b2c"))
    assert "`tfcompose up --wait` resumes run 20261125-140233-3f2a1b2c" in hint and "--new-run" in hint


def test_a_trainer_that_refuses_its_input_fails_at_once_and_its_own_words_come_first():
    assert wait_rules.final_failure(st("a", "restarting", 2, restarts=1), retries=5)      # exit 2: a restart refuses it again
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
    assert wait_rules.final_failure(st("a", "restarting", runner.REPEATED, restarts=1), retries=5)    # not restarted again
    assert not wait_rules.final_failure(st("a", "restarting", 1, restarts=1), retries=5)
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
