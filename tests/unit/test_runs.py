"""Runs (launcher/runs.py): which run an `up` starts or resumes, from what the chief's bundle says."""
from __future__ import annotations

import datetime as dt
import os
import stat

from hypothesis import given, strategies as st

from support.builders import host_facts
from launcher import runs
from launcher.runs import HostRun

NOW = dt.datetime(2026, 11, 25, 14, 2, 33, tzinfo=dt.timezone.utc)
C = "3f2a1b2c3d4e"


def test_a_running_run_goes_on_an_unfinished_one_resumes_and_a_finished_one_makes_way():
    old = "20261124-090000-3f2a1b2c"
    assert runs.choose(C, HostRun(old, C, finished=False, running=True), now=NOW) == (old, "running")
    assert runs.choose(C, HostRun(old, C, finished=False, running=False), now=NOW) == (old, "resumed")
    assert runs.choose(C, HostRun(old, C, finished=True), now=NOW) == ("20261125-140233-3f2a1b2c", "new")
    assert runs.choose(C, HostRun(old, "0" * 12, running=True), now=NOW)[1] == "new"        # another configuration
    assert runs.choose(C, HostRun(old, C), new_run=True, now=NOW)[1] == "new"               # up --new-run
    assert runs.choose(C, HostRun(), now=NOW) == ("20261125-140233-3f2a1b2c", "new")         # a first up


def test_two_runs_in_the_same_second_still_get_two_ids():
    first = runs.new_run_id(C, NOW)
    again, how = runs.choose(C, HostRun(first, C, finished=True), now=NOW)
    assert how == "new" and again != first and runs.RUN_ID_RE.match(again)


@given(st.dictionaries(st.sampled_from(["run", "run_config", "run_finished", "run_state"]), st.text(max_size=80)))
def test_what_a_host_says_of_its_run_is_a_run_tfcompose_writes_or_none(said):
    found = runs.host_run(host_facts(**said))
    assert found == HostRun() or (runs.RUN_ID_RE.match(found.run) and runs.CONFIG_RE.match(found.config))


def test_the_probes_answers_read_as_a_run():
    facts = {"run": "20261124-090000-3f2a1b2c", "run_config": C, "run_finished": "0", "run_state": "Exited (137) 3 s ago"}
    assert runs.host_run(host_facts(**facts)) == HostRun("20261124-090000-3f2a1b2c", C, finished=False, running=False)
    assert runs.host_run(host_facts(**{**facts, "run_state": "Exited (0) 1 minute ago"})).finished
    assert runs.host_run(host_facts(**{**facts, "run_state": "Restarting (1) 2 s ago"})).running
    assert runs.host_run(host_facts(**{**facts, "run": "../../etc"})) == HostRun()


def test_each_hosts_queue_key_proves_that_host_only_and_the_secret_is_private(tmp_path, monkeypatch):
    from support.builders import cluster
    from trainer.search import wire
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    made = cluster(3)
    keys = runs.queue_keys(made, "20261125-140233-3f2a1b2c")
    run_key = bytes.fromhex(keys["h0"].strip())
    assert [bytes.fromhex(keys[h].strip()) for h in ("h1", "h2")] == [wire.host_key(run_key, h) for h in ("h1", "h2")]
    assert runs.queue_keys(made, "20261125-140233-3f2a1b2c") == keys                 # the same run, the same keys
    assert runs.queue_keys(made, "20261125-140234-3f2a1b2c") != keys                 # another run, others
    secret = tmp_path / "tfcompose" / "queue-secret"
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
