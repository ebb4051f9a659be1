"""reform: whether an elastic run goes on without the hosts it lost, and the re-form it records."""
from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from launcher import plan as plan_mod
from launcher.errors import RemoteError
from launcher.stages import reform
from launcher.stages.mirror import Mirror
from support.builders import cluster
from trainer.spec.elastic_run import Reform

NOW = dt.datetime(2026, 11, 28, 5, 0, 0, tzinfo=dt.timezone.utc)


def elastic_plan(n: int = 3, **elastic):
    return plan_mod.make(cluster(n, elastic={"min_hosts": 2, **elastic}))


def test_a_lost_worker_leaves_the_others_to_go_on_as_the_next_generation():
    decision = reform.decide(elastic_plan(), {"h1": "silent for 46 s"}, NOW)
    record = decision.record
    assert decision.message == "" and record.generation == 1 and record.at == "2026-11-28T05:00:00Z"
    assert record.lost == ["h1"] and record.hosts_after == ["h0", "h2"] and record.workers_before == 3
    assert record.why == "h1: silent for 46 s"


def test_a_lost_chief_hands_over_to_the_host_its_state_was_mirrored_to_and_without_a_mirror_the_run_stops():
    plan = elastic_plan()
    chief = reform.decide(plan, {"h0": "silent for 46 s"}, NOW)
    assert chief.record is None and "h0 lost for good (silent for 46 s): the chief's state" in chief.message
    assert "had not been mirrored to another host yet" in chief.message
    elsewhere = reform.decide(plan, {"h0": "silent for 46 s"}, NOW, Mirror(target="h2", relays=3))
    assert elsewhere.record is None                  # mirrored, but not to the host that would be chief next
    handed = reform.decide(plan, {"h0": "silent for 46 s"}, NOW, Mirror(target="h1", relays=3)).record
    assert handed.hosts_after == ["h1", "h2"]
    after = plan_mod.reformed(plan, ["h0"], handed)
    assert after.cluster.chief.name == "h1" and after.cluster.chief.index == 0


def test_too_few_hosts_left_stops_the_run_saying_its_backups_are_kept():
    plan = elastic_plan()
    few = reform.decide(plan, {"h1": "silent for 50 s", "h2": "its trainer failed for good 46 s ago"}, NOW)
    assert few.record is None and "1 host(s) left, fewer than elastic.min_hosts (2)" in few.message
    assert f"`tfcompose up --wait` resumes run {plan.run}" in few.message


def test_the_next_generation_is_renumbered_on_new_ports_and_its_trainers_hear_of_the_re_form():
    plan = elastic_plan()
    record = reform.decide(plan, {"h1": "silent for 46 s"}, NOW).record
    after = plan_mod.reformed(plan, ["h1"], record)
    hosts = after.cluster.hosts
    assert [(h.name, h.index, h.chief, h.tf_port) for h in hosts] == [("h0", 0, True, 2223), ("h2", 1, False, 2223)]
    assert after.run == plan.run and after.config_id == plan.config_id          # the same run goes on
    cfg = after.train_config(hosts[1])
    assert cfg.elastic.workers_at_start == 3 and cfg.elastic.generation == 1 and cfg.elastic.reforms[0].lost == ["h1"]
    again = plan_mod.reformed(after, ["h2"], reform.decide(elastic_plan(min_hosts=1), {"h1": "x"}, NOW).record
                              .model_copy(update={"generation": 2}))
    assert [h.tf_port for h in again.cluster.hosts] == [2224] and len(again.elastic.reforms) == 2


def test_the_record_says_which_trial_and_epoch_the_chief_had_finished():
    from trainer.spec.progress import Progress
    record = reform.decide(elastic_plan(), {"h2": "silent for 46 s"}, NOW).record
    seen = Progress("worker:0", 1, 1, "small_cnn#001", 4, 12, 2.0, 500.0, 0.5, 0.8, 0.6, 0.7, 0, 0.0)
    assert reform.where_it_was(record, {"h0": seen}).candidate == "small_cnn#001"
    assert reform.where_it_was(record, {"h0": seen}).epochs_done == 4
    assert reform.where_it_was(record, {}).candidate == ""                      # between trials: unknown


def test_the_end_of_a_re_formed_run_says_which_hosts_it_went_on_without():
    from launcher.stages import elastic
    plan = elastic_plan()
    assert elastic.went_on_without(plan) == ""
    after = plan_mod.reformed(plan, ["h1"], reform.decide(plan, {"h1": "silent for 46 s"}, NOW).record)
    assert elastic.went_on_without(after) == "; the run went on without h1 (1 re-form(s); generation 1 on h0, h2)"


def test_a_host_taken_back_joins_after_the_hosts_training_now_on_the_same_new_port_and_the_chief_stays():
    first = elastic_plan()
    lost = reform.decide(first, {"h0": "silent for 46 s"}, NOW, Mirror(target="h1", relays=2)).record
    now = plan_mod.reformed(first, ["h0"], lost)                                # h1 chief, h2: port 2223
    back = Reform(generation=2, at="2026-11-28T05:10:00Z", lost=[], joined=["h0"], hosts_after=["h1", "h2", "h0"],
                  workers_before=2)
    after = plan_mod.taken_back(now, first, ["h0"], back)
    assert [(h.name, h.index, h.chief, h.tf_port) for h in after.cluster.hosts] == [
        ("h1", 0, True, 2224), ("h2", 1, False, 2224), ("h0", 2, False, 2224)]   # h0 is no longer the chief
    assert after.run == first.run and after.elastic.generation == 2
    from launcher.stages import elastic
    assert elastic.went_on_without(after) == ("; the run went on without h0 and took back h0 (2 re-form(s); "
                                           "generation 2 on h1, h2, h0)")


class Whole:
    """The group of every host the run began with: its sessions, reached by host name."""

    def __init__(self, plan, fail_tar=False):
        from support.fakes import FakeConnection
        from launcher.ssh.connection import Result
        self.cluster, self.said = plan.cluster, []
        self.reporter = SimpleNamespace(warn=lambda h, t: self.said.append(f"{h}: {t}"), stage=lambda *a: None)
        bad = Result(2, "", "tar: backup/h0/x: file changed as we read it")
        self.conns = {h.name: FakeConnection(lambda cmd: bad if fail_tar and cmd[0] == "tar" else Result(0, "", ""),
                                             host=h.name, output=lambda cmd: b"TAR") for h in plan.cluster.hosts}
        if fail_tar:
            self.conns["h0"].stream = lambda *a, **k: (_ for _ in ()).throw(RemoteError("h0", "tar", 2, "changed"))

    def narrowed(self, cluster):
        return SimpleNamespace(cluster=cluster, reporter=self.reporter, conn=lambda h: self.conns[h.name],
                               run=lambda step, fn: self.run_on(cluster, fn))

    def run_on(self, cluster, fn):
        for h in cluster.hosts:
            fn(h, self.conns[h.name])
        return SimpleNamespace(failed={}, raise_if_failed=lambda: None)


def test_taking_back_stops_everyone_hands_the_chiefs_backups_then_starts_all_and_else_the_others_go_on(
        monkeypatch, tmp_path):
    from launcher.stages.wait import RunOutcome
    first = elastic_plan()
    now = plan_mod.reformed(first, ["h2"], reform.decide(first, {"h2": "silent for 46 s"}, NOW).record)
    steps = []
    monkeypatch.setattr(reform, "keep_logs", lambda g, p, r: steps.append("logs"))
    monkeypatch.setattr(reform, "remove_containers", lambda h, c, name: steps.append(f"stop {h.name}"))
    monkeypatch.setattr(reform.push, "push", lambda g, bundles: steps.append("push"))
    monkeypatch.setattr(reform.render, "render_cluster", lambda plan: plan)
    monkeypatch.setattr(reform.start, "start", lambda g, plan: steps.append(
        f"start {','.join(h.name for h in plan.cluster.hosts)} on ports {plan.cluster.hosts[0].tf_port}"))
    whole = Whole(first)
    taken, left_out = reform.take_back(whole, first, now, RunOutcome(False, "", rejoining=["h2"]), tmp_path)
    group, after = taken
    assert left_out == {} and [h.name for h in after.cluster.hosts] == ["h0", "h1", "h2"]
    assert after.elastic.reforms[-1].joined == ["h2"] and after.elastic.reforms[-1].workers_before == 2
    assert whole.conns["h2"].stdin[-1] == b"TAR" and "h2" in whole.conns["h2"].commands[-1]   # h0's, as h2's own
    assert steps == ["logs", "stop h0", "stop h1", "stop h2", "push", "start h0,h1,h2 on ports 2224"]
    assert any(line.startswith("h2: back: generation 2 takes it back on h0, h1, h2") for line in whole.said)

    steps.clear()
    failing = Whole(first, fail_tar=True)           # the chief's backups could not be read: the others go on
    taken, left_out = reform.take_back(failing, first, now, RunOutcome(False, "", rejoining=["h2"]), tmp_path)
    assert taken is None and left_out == {}
    assert steps == ["logs", "stop h0", "stop h1", "stop h2", "start h0,h1 on ports 2223"]     # as they were
    assert "h2: not taken back yet: h0's backups could not be handed to it" in failing.said[0]
    monkeypatch.setattr(reform, "hand_backups", lambda *a: None)       # too large: out for this run
    taken, left_out = reform.take_back(Whole(first), first, now, RunOutcome(False, "", rejoining=["h2"]), tmp_path)
    assert taken is None and "larger than" in left_out["h2"]


def test_the_record_of_a_host_taken_back_says_where_the_trial_was_when_all_stopped():
    from trainer.spec.progress import Progress
    first = elastic_plan()
    now = plan_mod.reformed(first, ["h2"], reform.decide(first, {"h2": "silent for 46 s"}, NOW).record)
    seen = Progress("worker:0", 1, 1, "small_cnn#001", 7, 12, 2.0, 500.0, 0.5, 0.8, 0.6, 0.7, 0, 0.0)
    record = reform.joined_record(now, ["h2"], seen)
    assert (record.generation, record.lost, record.joined, record.candidate, record.epochs_done) == (
        2, [], ["h2"], "small_cnn#001", 7)
    assert reform.joined_record(now, ["h2"], None).candidate == ""
