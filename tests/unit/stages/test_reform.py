"""reform: whether an elastic run goes on without the hosts it lost, and the re-form it records."""
from __future__ import annotations

import datetime as dt

from launcher import plan as plan_mod
from launcher.stages import reform
from launcher.stages.mirror import Mirror
from support.builders import cluster

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
    from launcher.stages import wait
    plan = elastic_plan()
    assert wait.went_on_without(plan) == ""
    after = plan_mod.reformed(plan, ["h1"], reform.decide(plan, {"h1": "silent for 46 s"}, NOW).record)
    assert wait.went_on_without(after) == "; the run went on without h1 (1 re-form(s); generation 1 on h0, h2)"
