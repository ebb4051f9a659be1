"""backups: an elastic run resumed with a host that kept older backups brings them up to the newest
host's before the trainers start, so the open trial is not started over (#49, item 1)."""
from __future__ import annotations

from types import SimpleNamespace

from launcher import plan as plan_mod
from launcher.ssh.connection import Result
from launcher.stages import backups
from support.builders import cluster
from support.fakes import FakeConnection


def said(done: int, *saves: int, snapshot: int | None = None, host: str = "h1") -> str:
    state = '{"starts": 2, "done": [%s], "best_model": ""}' % ", ".join(f'"t{i}"' for i in range(done))
    kept = "" if snapshot is None else '{"host": "%s", "trial": "small_cnn", "epoch": %d}' % (host, snapshot)
    return (state + "\n" + backups.SAVES + "\n" + "".join(f'model_checkpoint_path: "ckpt-{n}"\n' for n in saves)
            + backups.STATE + "\n" + kept)


def test_a_hosts_mark_is_its_finished_trials_and_its_newest_save_whatever_it_printed():
    assert backups.mark(said(2, 7)) == (2, 7)
    assert backups.mark(said(0)) == (0, 0) and backups.mark("") == (0, 0)
    assert backups.mark('{"done": "all"}\n#saves\nmodel_checkpoint_path: "ckpt-3"\n') == (0, 3)
    assert backups.mark('[[[[' + "\n#saves\n" + 'model_checkpoint_path: "ckpt-99999999999"\n') == (0, 0)
    assert backups.mark('{"done": []}\n#saves\nmodel_checkpoint_path: "../ckpt-5"\nx\n') == (0, 0)


def test_the_last_chief_is_the_host_with_the_newest_snapshot_of_the_chiefs_state_when_not_the_chief():
    read = {"h0": said(0, 9, snapshot=9, host="h0"), "h1": said(0, 14, snapshot=14), "h2": said(0, 14)}
    assert backups.newest_state(read, "h0") == "h1"
    assert backups.newest_state({**read, "h1": said(0, 14)}, "h0") is None           # the chief's own is the newest
    assert backups.newest_state({"h0": said(0, 3), "h1": said(0, 3)}, "h0") is None   # nobody was chief with a snapshot
    assert backups.snapshot_epoch(said(0, 2) + '{"host": "h1", "trial": "t", "epoch": "9"}') is None
    assert backups.snapshot_epoch(said(0, 2) + '{"host": "h1", "trial": "t", "epoch": -4}') is None


def test_the_newest_host_gives_to_those_more_than_a_save_behind_and_the_chief_first_among_equals():
    order = ["h0", "h1", "h2"]
    assert backups.behind({"h0": (1, 4), "h1": (1, 9), "h2": (1, 9)}, order) == ("h1", ["h0"])
    assert backups.behind({"h0": (1, 9), "h1": (1, 8), "h2": (1, 9)}, order) == ("h0", [])    # one save: the trainers agree
    assert backups.behind({"h0": (2, 1), "h1": (1, 9)}, order) == ("h0", ["h1"])             # a trial more finished
    assert backups.behind({}, order) == (None, [])


def test_even_hands_the_newest_backups_to_each_host_behind_and_says_what_it_could_not(monkeypatch):
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 2}))
    marks = {"h0": said(1, 3, snapshot=3, host="h0"), "h1": said(1, 9, snapshot=9), "h2": said(1, 2)}
    conns = {n: FakeConnection(lambda cmd, n=n: Result(0, marks[n], ""), host=n) for n in marks}
    lines = []
    group = SimpleNamespace(conn=lambda h: conns[h.name],
                            run=lambda step, fn: SimpleNamespace(succeeded={h.name: fn(h, conns[h.name])
                                                                            for h in plan.cluster.hosts}),
                            reporter=SimpleNamespace(warn=lambda h, t: lines.append(f"warn {h}: {t}"),
                                                     stage=lambda h, s, d="": lines.append(f"{h}: {s} {d}")))
    handed = []
    monkeypatch.setattr(backups, "hand_backups", lambda g, p, source, target: handed.append((source.name, target.name)) or 10)
    monkeypatch.setattr(backups, "copy_state", lambda g, p, source, target: handed.append(("state", source.name, target.name)) or 5)
    assert backups.even(group, plan) == {}
    # h1 was chief last: its state goes to h0 after h0's folder was replaced by h1's backups
    assert handed == [("h1", "h0"), ("h1", "h2"), ("state", "h1", "h0")]
    assert lines == ["h0: backups brought up to h1's: it was behind", "h2: backups brought up to h1's: it was behind",
                     "h0: backups takes the chief's state from h1, chief last"]
    lines.clear()
    monkeypatch.setattr(backups, "hand_backups", lambda *a: None)
    assert list(backups.even(group, plan)) == ["h0", "h2"]
    assert lines[0] == ("warn h0: its backups are older than h1's and could not be brought up to them (h1's backups "
                        "are larger than 512 MiB): the open trial starts over")


def test_a_resumed_run_first_removes_every_container_of_the_cluster_then_brings_the_backups_up(monkeypatch):
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 2}))
    steps = []
    monkeypatch.setattr(backups, "remove_containers", lambda h, c, name: steps.append(f"stop {h.name}"))
    monkeypatch.setattr(backups, "even", lambda group, plan: steps.append("even") or {})
    group = SimpleNamespace(run=lambda step, fn: SimpleNamespace(
        raise_if_failed=lambda: [fn(h, None) for h in plan.cluster.hosts]))
    assert backups.before_resume(group, plan) == {}
    assert steps == ["stop h0", "stop h1", "stop h2", "even"]


def train_yaml(*reforms: dict) -> str:
    import yaml
    return "# The trainer's configuration\n" + yaml.safe_dump(
        {"epochs": 20, "elastic": {"batch": "keep_global", "workers_at_start": 3, "reforms": list(reforms)}})


def reform(generation: int, lost: list, after: list) -> dict:
    return {"generation": generation, "at": f"2026-11-28T05:0{generation}:00Z", "lost": lost, "why": "silent",
            "hosts_after": after, "workers_before": len(after) + len(lost)}


NOW = __import__("datetime").datetime(2026, 11, 28, 6, 0, tzinfo=__import__("datetime").timezone.utc)


def test_the_reforms_so_far_are_the_longest_list_a_host_holds_and_a_hostile_text_counts_for_nothing():
    first, second, third = reform(1, ["h2"], ["h0", "h1"]), reform(2, ["h0"], ["h1"]), reform(3, [], ["h1"])
    texts = {"h0": train_yaml(first), "h1": train_yaml(first, second), "h2": "epochs: [\n",
             "h3": train_yaml(first, {**second, "hosts_after": ["H0; rm -rf /"]}, third), "h4": "- a list\n",
             "h5": train_yaml(first, second, {**third, "generation": -1}),
             "h6": train_yaml(first, second, {**third, "generation": 999_999}),              # not the next one
             "h7": train_yaml(first, second, {**third, "at": "9999-01-01T00:00:00Z"})}      # never "within the hour"
    assert [r.generation for r in backups.reforms_so_far(texts, NOW)] == [1, 2]
    assert backups.reforms_so_far({"h0": "epochs: 3\n"}, NOW) == [] and backups.reforms_so_far({}, NOW) == []


def test_a_resumed_elastic_run_carries_its_reforms_on_and_counts_the_resume_as_the_next(monkeypatch):
    import datetime as dt
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 2}))
    texts = {"h0": train_yaml(reform(1, ["h2"], ["h0", "h1"])),
             "h1": train_yaml(reform(1, ["h2"], ["h0", "h1"]), reform(2, ["h0"], ["h1", "h2"]))}
    group = SimpleNamespace(run=lambda step, fn: SimpleNamespace(succeeded=texts))
    resumed = backups.carried_on(group, plan, dt.datetime(2026, 11, 28, 6, 0, tzinfo=dt.timezone.utc))
    *before, last = resumed.elastic.reforms
    assert [r.generation for r in before] == [1, 2] and last.generation == 3 and last.at == "2026-11-28T06:00:00Z"
    assert last.joined == ["h0"] and last.lost == [] and last.hosts_after == ["h0", "h1", "h2"]
    assert last.workers_before == 2 and last.why == "resumed by `up` after the run stopped"
    assert [h.tf_port for h in resumed.cluster.hosts] == [h.tf_port for h in plan.cluster.hosts]
    nothing = SimpleNamespace(run=lambda step, fn: SimpleNamespace(succeeded={"h0": "epochs: 3\n"}))
    assert backups.carried_on(nothing, plan, dt.datetime.now(dt.timezone.utc)) is plan   # stopped before any re-form
    # resumed again (the resume before failed after its push): it brings no host back, so no new generation
    again = {"h0": train_yaml(*(r.model_dump(mode="json") for r in resumed.elastic.reforms))}
    twice = backups.carried_on(SimpleNamespace(run=lambda step, fn: SimpleNamespace(succeeded=again)), plan,
                               dt.datetime(2026, 11, 28, 6, 5, tzinfo=dt.timezone.utc))
    assert [r.generation for r in twice.elastic.reforms] == [1, 2, 3]
