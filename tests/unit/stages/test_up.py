"""`up` as a composition: its stages in the order the README lists, each on the plan the one before
made; nothing pushed or started when a stage before refuses; the leases given back after a run.
The stages themselves are tested in their own files and through real hosts; here each is a recorder."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from launcher.errors import ClusterFailed, RemoteError
from launcher.stages import up as up_mod, wait
from support.builders import cluster, host_facts

ORDER = ["leases", "preflight", "image.prepare", "leases.name_run", "push.claim", "image.provide",
         "dataset", "links", "push", "push.place_keys", "start"]


class FakeGroup:
    def __init__(self, cluster, reporter=None, parallel=None):
        self.cluster, self.reporter = cluster, SimpleNamespace(stage=lambda *a: None, warn=lambda *a: None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def stages(monkeypatch):
    """Every stage `up` calls, recorded in order; `fail` names one that raises."""
    seen: list[str] = []
    fail: dict[str, Exception] = {}

    def step(name, result=None):
        def call(*args, **kwargs):
            seen.append(name)
            if name in fail:
                raise fail[name]
            return result
        return call

    @contextlib.contextmanager
    def taken(group, plan, queue, break_lease):
        seen.append("leases")
        try:
            yield SimpleNamespace(start=lambda: contextlib.nullcontext(seen.append("held.start")))
        finally:
            seen.append("leases.given_back_if_nothing_started")

    facts = {"h0": host_facts(), "h1": host_facts()}
    monkeypatch.setattr(up_mod, "Group", FakeGroup)
    monkeypatch.setattr(up_mod.dataset_source, "source_manifest", lambda *a: None)
    monkeypatch.setattr(up_mod.leases, "taken", taken)
    monkeypatch.setattr(up_mod.leases, "name_run", step("leases.name_run"))
    monkeypatch.setattr(up_mod.leases, "release", step("leases.release", SimpleNamespace(failed={})))
    monkeypatch.setattr(up_mod.preflight, "check_cluster",
                        step("preflight", (facts, SimpleNamespace(nics={}, gpu_overrides={}))))
    monkeypatch.setattr(up_mod.image, "prepare", step("image.prepare"))
    monkeypatch.setattr(up_mod.image, "provide", step("image.provide", {}))
    monkeypatch.setattr(up_mod.dataset, "needed", lambda c: True)
    monkeypatch.setattr(up_mod.dataset, "provide", step("dataset", {}))
    monkeypatch.setattr(up_mod.links, "needed", lambda plan, facts: True)
    monkeypatch.setattr(up_mod.links, "check", step("links", SimpleNamespace(slowest_mbit_s=940.0)))
    monkeypatch.setattr(up_mod.push, "claim", step("push.claim"))
    monkeypatch.setattr(up_mod.push, "push", step("push", {}))
    monkeypatch.setattr(up_mod.push, "place_keys", step("push.place_keys"))
    monkeypatch.setattr(up_mod.render, "render_cluster", lambda plan: plan)
    monkeypatch.setattr(up_mod.start, "start", step("start", {}))
    monkeypatch.setattr(up_mod.wait, "wait_for_end", step("wait", wait.RunOutcome(False, "")))
    monkeypatch.setattr(up_mod, "live", lambda *a: contextlib.nullcontext())
    monkeypatch.setattr(up_mod, "sampling", lambda *a: contextlib.nullcontext())
    monkeypatch.setattr(up_mod, "collect_into", step("collect"))
    monkeypatch.setattr(up_mod.hooks, "after_run", step("hook", ""))
    monkeypatch.setattr(up_mod.elastic.Away, "of", lambda *a: None)
    return SimpleNamespace(seen=seen, fail=fail)


def test_up_runs_its_stages_in_the_order_the_readme_lists(stages):
    summary = up_mod.up(cluster(2))
    assert [s for s in stages.seen if s not in ("held.start", "leases.given_back_if_nothing_started")] == ORDER
    # the containers start while the leases are held, and a started run keeps them
    assert stages.seen.index("held.start") < stages.seen.index("start")
    assert summary.how == "new"          # no run on the chief: a new one, named as runs.py names runs
    from launcher.runs import RUN_ID_RE
    assert RUN_ID_RE.match(summary.run_id)


def test_up_wait_then_collects_runs_the_hook_and_gives_the_leases_back(stages):
    up_mod.up(cluster(2), wait_for_end=True)
    assert stages.seen[-4:] == ["wait", "collect", "hook", "leases.release"]


def test_a_failed_run_is_still_collected_and_its_leases_given_back_before_the_error(stages, monkeypatch):
    monkeypatch.setattr(up_mod.wait, "wait_for_end", lambda *a, **k: wait.RunOutcome(True, "h1 lost"))
    with pytest.raises(ClusterFailed, match="h1 lost"):
        up_mod.up(cluster(2), wait_for_end=True)
    assert stages.seen[-3:] == ["collect", "hook", "leases.release"]


@pytest.mark.parametrize("refusing", ["preflight", "image.prepare", "dataset", "links"])
def test_nothing_is_pushed_or_started_when_a_stage_before_refuses(stages, refusing):
    stages.fail[refusing] = RemoteError("h1", reason="not ready")
    with pytest.raises(RemoteError):
        up_mod.up(cluster(2))
    assert "push" not in stages.seen and "start" not in stages.seen
    assert stages.seen[-1] == "leases.given_back_if_nothing_started"


def test_a_finished_run_never_collected_is_collected_before_the_new_one_starts(stages, monkeypatch):
    # The chief's bundle names a run that finished (its results say so): a new configuration's run,
    # or the same one again, is new; the finished one is brought back first, nothing of it left unseen.
    facts = {"h0": host_facts(run="20261125-140233-3f2a1b2c", run_config="3f2a1b2c4d5e", run_finished="1"), "h1": host_facts()}
    monkeypatch.setattr(up_mod.preflight, "check_cluster", lambda *a: (facts, SimpleNamespace(nics={}, gpu_overrides={})))
    earlier = []
    monkeypatch.setattr(up_mod, "collect_earlier", lambda group, plan, run, runs: (earlier.append((run, plan.run)),
                                                                                   stages.seen.append("collect.earlier")))
    summary = up_mod.up(cluster(2))
    assert summary.how == "new" and earlier == [("20261125-140233-3f2a1b2c", summary.run_id)]
    assert stages.seen.index("collect.earlier") < stages.seen.index("push.claim")


def test_an_elastic_loss_re_forms_and_waits_again_and_a_re_form_that_fails_ends_the_run_collected(stages, monkeypatch):
    lost = wait.RunOutcome(False, "", lost_for_good={"h1": "silent for 46 s"})
    ends = iter([lost, wait.RunOutcome(False, "chief h0 finished (exit 0)")])
    monkeypatch.setattr(up_mod.wait, "wait_for_end", lambda *a, **k: next(ends))
    reformed = []
    monkeypatch.setattr(up_mod.reform, "reform", lambda group, plan, outcome, runs: (
        reformed.append(list(outcome.lost_for_good)), (group, plan, None))[1])
    elastic = cluster(3, elastic={"min_hosts": 2})
    up_mod.up(elastic, wait_for_end=True)
    assert reformed == [["h1"]] and stages.seen[-3:] == ["collect", "hook", "leases.release"]

    monkeypatch.setattr(up_mod.wait, "wait_for_end", lambda *a, **k: lost)
    monkeypatch.setattr(up_mod.reform, "reform", lambda *a: (_ for _ in ()).throw(RemoteError("h2", reason="gone")))
    with pytest.raises(ClusterFailed, match="re-forming the cluster without h1 failed: .*h2"):
        up_mod.up(elastic, wait_for_end=True)
    assert stages.seen[-3:] == ["collect", "hook", "leases.release"]


def test_a_host_lost_by_silence_is_looked_at_while_the_run_goes_on_and_taken_back_when_it_answers(stages, monkeypatch):
    lost = wait.RunOutcome(False, "", lost_for_good={"h1": "silent for 46 s", "h2": "its trainer failed for good 50 s ago"})
    back = wait.RunOutcome(False, "", rejoining=["h1"])
    ends = iter([lost, back, back, wait.RunOutcome(False, "chief h0 finished (exit 0)")])
    monkeypatch.setattr(up_mod.wait, "wait_for_end", lambda *a, **k: next(ends))
    monkeypatch.setattr(up_mod.reform, "reform", lambda group, plan, outcome, runs: (group, plan, None))
    away = []
    monkeypatch.setattr(up_mod.elastic.Away, "of", lambda group, first, lost: away.append(dict(lost)))
    tries = iter([False, True])            # not yet (the chief's backups unreadable), then taken
    monkeypatch.setattr(up_mod.reform, "take_back", lambda whole, first, plan, outcome, runs: (
        (whole, plan) if next(tries) else None, {}))
    up_mod.up(cluster(3, elastic={"min_hosts": 1, "rejoin": True}), wait_for_end=True)
    assert away[0] == {} and away[1] == away[2] == {"h1": "silent for 46 s", "h2": "its trainer failed for good 50 s ago"}
    assert away[3] == {"h2": "its trainer failed for good 50 s ago"}        # h1 back: no longer looked at
    assert stages.seen[-3:] == ["collect", "hook", "leases.release"]

    monkeypatch.setattr(up_mod.wait, "wait_for_end", lambda *a, **k: back)
    monkeypatch.setattr(up_mod.reform, "take_back", lambda *a: (_ for _ in ()).throw(RemoteError("h2", reason="gone")))
    with pytest.raises(ClusterFailed, match="taking h1 back failed: .*h2"):
        up_mod.up(cluster(3, elastic={"min_hosts": 1, "rejoin": True}), wait_for_end=True)


def test_an_elastic_run_resumed_brings_every_hosts_backups_up_to_the_newest_before_it_starts(stages, monkeypatch):
    monkeypatch.setattr(up_mod.runs, "choose", lambda *a: ("20261128-080000-3f2a1b2c", "resumed"))
    monkeypatch.setattr(up_mod.backups, "before_resume", lambda group, plan: stages.seen.append("backups"))
    monkeypatch.setattr(up_mod.backups, "carried_on", lambda group, plan, now: stages.seen.append("re-forms") or plan)
    up_mod.up(cluster(3, elastic={"min_hosts": 2}))
    # the re-forms so far read before the push rewrites each host's train.yaml
    assert stages.seen.index("re-forms") < stages.seen.index("push") < stages.seen.index("push.place_keys")
    assert stages.seen.index("push.place_keys") < stages.seen.index("backups") < stages.seen.index("start")
    stages.seen.clear()
    up_mod.up(cluster(3))                               # not elastic: every host's backups are at one epoch
    assert "backups" not in stages.seen and "re-forms" not in stages.seen
