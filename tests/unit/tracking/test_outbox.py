"""The live outbox: epochs from the progress files to the tracker in the background, one run per
trial, kept while the tracker does not answer and sent when it does, never holding the poll up.
The tracker is a stand-in here (MLflow's client through a real server: tests/integration/test_tracking.py)."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from launcher.inventory.model import TrackerSettings
from launcher.reporter import RecordingReporter
from launcher.tracking import outbox as outbox_mod
from launcher.tracking.client import TrackerError
from trainer.spec.progress import Tracker, parse

SETTINGS = TrackerSettings(uri="http://u:pw-secret99@127.0.0.1:5000", experiment="lab", timeout_s=2)


class StandIn:
    """What the outbox asks of client.Tracker, kept in memory; `down` makes every call fail, `slow` hang."""

    def __init__(self):
        self.runs, self.metrics, self.down, self.slow = {}, {}, False, None

    def _check(self):
        if self.slow is not None:
            self.slow.wait(30)
        if self.down:
            raise TrackerError("MLflow at http://***@127.0.0.1:5000: log figures: no answer (connection refused)")

    def search(self, cluster, run_id):
        self._check()
        found = [r for r in self.runs.values() if r.data.tags.get("tfcompose.kind") == "search"]
        return found[0] if found else None

    def create_search(self, cluster, run_id, tags, start=None):
        return self._new(tags, None)

    def trials(self, parent):
        self._check()
        return {r.data.tags["tfcompose.trial"]: r for r in self.runs.values() if r.parent == parent}

    def create_trial(self, parent, trial, tags, start=None):
        run = self._new({**tags, "tfcompose.trial": trial}, parent)
        run.info.start = start
        return run

    def steps(self, run_id):
        self._check()
        return {s for s, _ in self.metrics.get(run_id, [])}

    def log(self, run_id, epochs=(), metrics=None, params=None, tags=None, at=None):
        self._check()
        self.metrics.setdefault(run_id, []).extend((e.step, e.metrics["val_accuracy"]) for e in epochs)
        self.times = {**getattr(self, "times", {}), **{(run_id, e.step): e.at for e in epochs}}
        self.runs[run_id].data.params.update(params or {})

    def _new(self, tags, parent):
        self._check()
        run_id = f"r{len(self.runs)}"
        self.runs[run_id] = SimpleNamespace(info=SimpleNamespace(run_id=run_id), parent=parent,
                                            data=SimpleNamespace(tags=dict(tags), params={}))
        return self.runs[run_id]


def progress_of(tmp_path, task, epochs):
    """The progress document a worker writes after `epochs` epochs of trials named t1, t2…"""
    tracker = Tracker(tmp_path / task, task, trials=2, restarts=0)
    for trial, epoch in epochs:
        tracker.epoch_done(int(trial[1:]), trial, epoch, 3, 1.0, 100.0,
                           {"loss": 1.0, "accuracy": 0.5, "val_loss": 1.0, "val_accuracy": epoch / 10})
    return parse((tmp_path / task / f"progress-{task.replace(':', '-')}.json").read_text())


def outbox(stand_in, reporter, reader="h0"):
    return outbox_mod.Outbox(SETTINGS, "c", "run1", ["h0", "h1"], reader, {"epochs": "3"}, {"tfcompose.kind": "search"},
                             reporter, connect=lambda settings: stand_in)


def test_each_trial_is_one_run_whatever_the_workers_and_each_epoch_is_sent_once(tmp_path):
    stand_in, reporter = StandIn(), RecordingReporter()
    box = outbox(stand_in, reporter)
    chief = progress_of(tmp_path, "worker:0", [("t1", 1), ("t1", 2)])
    box.offer("h0", chief)
    box.offer("h1", progress_of(tmp_path, "worker:1", [("t1", 1), ("t1", 2)]))    # sync: the same epochs, not read
    box.send_kept()
    box.offer("h0", progress_of(tmp_path, "worker:0b", [("t1", 1), ("t1", 2), ("t1", 3), ("t2", 1)]))   # seen again
    box.send_kept()
    trials = {r.data.tags["tfcompose.trial"]: r.info.run_id for r in stand_in.runs.values() if r.parent}
    assert sorted(trials) == ["t1", "t2"]
    assert stand_in.metrics[trials["t1"]] == [(1, 0.1), (2, 0.2), (3, 0.3)] and stand_in.metrics[trials["t2"]] == [(1, 0.1)]
    parent = next(r for r in stand_in.runs.values() if r.parent is None)
    assert parent.data.params == {"epochs": "3"} and not box.kept


def test_a_tracker_that_does_not_answer_is_said_once_and_what_it_missed_is_sent_when_it_answers(tmp_path):
    stand_in, reporter = StandIn(), RecordingReporter()
    box = outbox(stand_in, reporter)
    stand_in.down = True
    box.offer("h0", progress_of(tmp_path, "worker:0", [("t1", 1)]))
    box.send_kept()
    box.offer("h0", progress_of(tmp_path, "worker:0b", [("t1", 1), ("t1", 2)]))
    box.send_kept()
    assert len(reporter.warnings) == 1 and "training goes on" in reporter.warnings[0][1]
    assert "pw-secret99" not in str(reporter.warnings) + str(reporter.events)
    assert ("MLflow", "not answering") in [(h, s) for h, s, _ in reporter.events] and len(box.kept) == 2
    stand_in.down = False
    box.send_kept()
    (trial,) = [r.info.run_id for r in stand_in.runs.values() if r.parent]
    assert stand_in.metrics[trial] == [(1, 0.1), (2, 0.2)] and not box.kept
    assert reporter.events[-1][:2] == ("MLflow", "tracking") and "answers again" in reporter.events[-1][2]


def test_a_tracker_that_hangs_never_holds_the_poll_up_and_stop_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(outbox_mod, "SEND_EVERY_S", 0.05)
    stand_in, reporter = StandIn(), RecordingReporter()
    stand_in.slow = threading.Event()                   # every call waits until released
    box = outbox(stand_in, reporter)
    box.start()
    try:
        progress = progress_of(tmp_path, "worker:0", [("t1", 1), ("t1", 2)])
        started = time.monotonic()
        for _ in range(50):                             # the wait loop's polls go on at their pace
            box.offer("h0", progress)
        assert time.monotonic() - started < 1.0
        time.sleep(0.3)
        started = time.monotonic()
        box.stop(0.5)
        assert time.monotonic() - started < 1.5
    finally:
        stand_in.slow.set()


def test_in_parallel_mode_every_hosts_trials_are_read_and_the_relay_still_shows_them(tmp_path):
    stand_in, reporter = StandIn(), RecordingReporter()
    box = outbox(stand_in, reporter, reader=None)
    relay = outbox_mod.Relay(reporter, box)
    relay.progress("h0", progress_of(tmp_path, "h0", [("t1", 1)]))
    relay.progress("h1", progress_of(tmp_path, "h1", [("t2", 1), ("t2", 2)]))
    relay.warn("h1", "a warning goes through")
    box.send_kept()
    names = sorted(r.data.tags["tfcompose.trial"] for r in stand_in.runs.values() if r.parent)
    assert names == ["t1", "t2"] and [h for h, s, _ in reporter.events if s == "progress"] == ["h0", "h1"]
    assert reporter.warnings == [("h1", "a warning goes through")]
    hosts = {r.data.tags["tfcompose.trial"]: r.data.tags["tfcompose.host"] for r in stand_in.runs.values() if r.parent}
    assert hosts == {"t1": "h0", "t2": "h1"}


def test_two_senders_at_once_send_each_epoch_once(tmp_path):
    # `watch` beside `up --wait`: both read the same progress and send to the same tracker.
    stand_in = StandIn()
    first, second = outbox(stand_in, RecordingReporter()), outbox(stand_in, RecordingReporter())
    second.offer("h0", progress_of(tmp_path, "a", [("t1", 1)]))
    second.send_kept()
    first.offer("h0", progress_of(tmp_path, "b", [("t1", 1), ("t1", 2)]))
    first.send_kept()
    second.offer("h0", progress_of(tmp_path, "c", [("t1", 1), ("t1", 2), ("t1", 3)]))
    second.send_kept()
    (trial,) = [r.info.run_id for r in stand_in.runs.values() if r.parent]
    assert sorted(stand_in.metrics[trial]) == [(1, 0.1), (2, 0.2), (3, 0.3)]
    assert len([r for r in stand_in.runs.values() if r.parent is None]) == 1


def test_a_trials_run_starts_when_the_trial_did_and_each_epoch_is_stamped_with_its_end(tmp_path):
    """#47: every run started and every figure was stamped when the launcher sent it."""
    stand_in, reporter = StandIn(), RecordingReporter()
    box = outbox(stand_in, reporter)
    tracker = Tracker(tmp_path, "worker:0", trials=1, restarts=0)
    for epoch in (1, 2):
        tracker.epoch_done(1, "t1", epoch, 3, 1.0, 100.0, {"loss": 1.0, "accuracy": 0.5, "val_loss": 1.0,
                                                           "val_accuracy": 0.5}, times=(1_800_000_000.0 + epoch, 1_799_999_990.0))
    box.offer("h0", parse((tmp_path / "progress-worker-0.json").read_text()))
    box.send_kept()
    (run,) = [r for r in stand_in.runs.values() if r.parent]
    assert run.info.start == 1_799_999_990.0
    assert stand_in.times == {(run.info.run_id, 1): 1_800_000_001.0, (run.info.run_id, 2): 1_800_000_002.0}
