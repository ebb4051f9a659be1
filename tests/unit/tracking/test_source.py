"""`tfcompose track`'s inputs: which tracker, the run by its folder (what is sent: test_upload.py;
through a real MLflow server: tests/integration/test_tracking.py)."""
from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from launcher.errors import BadInput
from launcher.inventory.model import TrackerSettings
from launcher.tracking import ledger, source
from support.builders import SEARCH_DOC, cluster, collected_run


def test_the_tracker_comes_from_the_inventory_else_the_environment_else_where_the_run_went_before(tmp_path):
    folder = collected_run(tmp_path)
    tracked = replace(cluster(2), tracking=TrackerSettings("http://inv:1", "from-inv", "m"))
    assert source.settings_for(folder, tracked).uri == "http://inv:1"
    with pytest.raises(BadInput, match="tracking: Received nothing"):
        source.settings_for(folder, cluster(2))
    with pytest.raises(BadInput, match="MLFLOW_TRACKING_URI is not set and the run was never tracked"):
        source.settings_for(folder, None, environ={})
    env = source.settings_for(folder, None, environ={"MLFLOW_TRACKING_URI": "http://env:2"})
    assert (env.uri, env.experiment, env.register_as) == ("http://env:2", "lab", None)
    ledger.Ledger(tracker="http://before:3", experiment="mri", registered_as="best-cnn").write(folder)
    before = source.settings_for(folder, None, environ={})
    assert (before.uri, before.experiment, before.register_as) == ("http://before:3", "mri", "best-cnn")


def test_a_run_is_known_by_its_folder_and_a_wrong_inventory_is_refused(tmp_path):
    folder = collected_run(tmp_path)
    run = source.from_folder(folder)
    assert (run.cluster, run.run_id, run.hosts, run.mode) == ("lab", "abc123", ["h0", "h1"], "parallel")
    assert run.params == {"mode": "parallel", "search.sampler": "grid", "hosts": "2"}
    with pytest.raises(BadInput, match="a run of cluster 'lab' with the inventory of cluster 'c'"):
        source.from_folder(folder, cluster(2))
    with pytest.raises(BadInput, match="no such folder"):
        source.from_folder(tmp_path / "nope")


def test_a_run_tracked_before_is_sent_later_with_the_params_its_inventory_gave(tmp_path):
    """CI once saw a tracker killed between making the search's run and giving it its params: `track`
    without the inventory then made it whole with results.json's few (no `epochs`)."""
    folder = collected_run(tmp_path)
    inventory = source.from_plan(SimpleNamespace(cluster=cluster(2), parallel=True), "abc123", folder)
    assert inventory.params["epochs"] and inventory.params["hosts"] == "2"
    ledger.Ledger(tracker="http://before:3", experiment="mri", pending="no answer",
                  search_params=inventory.params).write(folder)
    assert source.from_folder(folder).params == inventory.params
    damaged = json.loads((folder / ledger.FILE).read_text())
    damaged["search_params"]["x" * 251] = "a key MLflow refuses"
    (folder / ledger.FILE).write_text(json.dumps(damaged))
    assert source.from_folder(folder).params == {"mode": "parallel", "search.sampler": "grid", "hosts": "2"}
    assert ledger.read(folder).tracker == "http://before:3"          # the rest of the ledger still counts


def test_a_folder_that_is_no_run_is_refused_before_the_tracker_is_contacted(tmp_path):
    """#46: `track runs/<cluster>` was taken as a run, and made an experiment with a FAILED parent."""
    import os
    folder = collected_run(tmp_path)
    for not_a_run in (folder.parent, folder.parent.parent, tmp_path):
        with pytest.raises(BadInput, match="a folder that is not a run"):
            source.check_run_folder(not_a_run)
    os.replace(folder / "results.json", folder / "elsewhere.json")
    os.mkfifo(folder / "results.json")
    with pytest.raises(BadInput, match="results.json: Received a FIFO"):
        source.from_folder(folder)
    (folder / "results.json").unlink()
    (folder / "results.json").write_text(json.dumps({k: v for k, v in SEARCH_DOC.items() if k != "best"}))
    with pytest.raises(BadInput, match="best: Received None"):      # once a KeyError, after the trials were sent
        source.check_run_folder(folder)
