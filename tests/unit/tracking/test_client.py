"""MLflow's client as tfcompose uses it: a tracker that is not there is one bounded failure, said
without the URI's secrets (a real MLflow client against a closed loopback port)."""
from __future__ import annotations

import time

import pytest

from launcher.inventory.model import TrackerSettings
from support.common import free_ports, require


def test_a_tracker_that_is_not_there_fails_at_once_and_says_so_without_its_password():
    import importlib.util
    require(importlib.util.find_spec("mlflow") is not None, "MLflow is not installed (pip install -e '.[dev]')")
    from launcher.tracking.client import Tracker, TrackerError
    port = free_ports(1)[0]
    tracker = Tracker(TrackerSettings(f"http://lab:pw-0f9e8d7c@127.0.0.1:{port}", "lab", timeout_s=2))
    started = time.monotonic()
    with pytest.raises(TrackerError) as err:
        tracker.experiment_id()
    assert time.monotonic() - started < 10                   # no retries with back-off
    said = str(err.value)
    assert said.startswith(f"MLflow at http://***@127.0.0.1:{port}: experiment 'lab': ") and "pw-0f9e8d7c" not in said
    assert "no answer (connection refused)" in said


def test_a_tracker_that_answers_one_byte_at_a_time_is_given_up_on_within_its_bound_and_not_called_again():
    """Each byte comes within MLflow's per-read timeout: only the whole call's bound ends the wait
    (#46: it once held `track`, collect and the end of `up --wait` for ever)."""
    import importlib.util
    require(importlib.util.find_spec("mlflow") is not None, "MLflow is not installed (pip install -e '.[dev]')")
    from launcher.tracking import client
    from support.trickle import trickling_tracker
    with trickling_tracker() as env:
        tracker = client.Tracker(TrackerSettings(env["MLFLOW_TRACKING_URI"], "lab", timeout_s=1))
        started = time.monotonic()
        with pytest.raises(client.TrackerError, match="no whole answer within 3 s"):
            tracker.experiment_id()
        took = time.monotonic() - started
        assert took < 1 + client.CALL_GRACE_S + 2, f"took {took:.1f} s"
        started = time.monotonic()
        with pytest.raises(client.TrackerError, match="not tried: an earlier call has had no whole answer yet"):
            tracker.steps("r1")
        assert time.monotonic() - started < 1          # one stuck call at most, never a pile of them
