"""The wait loop's reporter while telemetry runs (launcher/telemetry/observer.py): everything passed
on, and who trains learnt from what the loop says."""
from __future__ import annotations

from types import SimpleNamespace

from launcher.reporter import RecordingReporter
from launcher.telemetry.observer import STARTUP_S, Observer


def test_the_observer_passes_everything_on_and_learns_who_trains():
    inner, now = RecordingReporter(), [1000.0]
    observer = Observer(inner, lambda: now[0])
    observer.stage("h0", "running", "")
    observer.warn("h0", "careful")
    assert observer.doing("h0", run_program=False) == (False, 0, 0)     # running, but no epoch seen yet
    observer.progress("h0", SimpleNamespace(trial_index=2, epoch=3, done=False))
    assert observer.doing("h0", run_program=False) == (True, 2, 3)
    observer.progress("h0", SimpleNamespace(trial_index=2, epoch=4, done=True))
    assert observer.doing("h0", run_program=False)[0] is False
    observer.stage("h1", "running")
    assert observer.doing("h1", run_program=True)[0] is False          # a `run:` program, just started
    now[0] += STARTUP_S
    assert observer.doing("h1", run_program=True)[0] is True
    observer.stage("h1", "exited")
    assert observer.doing("h1", run_program=True)[0] is False
    assert inner.warnings == [("h0", "careful")] and ("h0", "progress", "2/3") in inner.events
