"""`tfcompose track`'s inputs: which tracker, the run by its folder, the best model's folder (what
is sent, through a real MLflow server: tests/integration/test_tracking.py)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from launcher.errors import BadInput
from launcher.inventory.model import TrackerSettings
from launcher.tracking import ledger, upload
from support.builders import cluster

DOC = {"schema": 1, "mode": "parallel", "best": {"candidate": "t1", "val_accuracy": 0.9, "host": "h1"},
       "candidates": [{"candidate": "t1", "val_accuracy": 0.9, "val_loss": 0.3, "train_seconds": 1.0,
                       "images_per_second": 10.0, "params": 5, "epochs": 2, "host": "h1"}],
       "search": {"hosts": ["h0", "h1"], "sampler": "grid", "lost": {}}}


def run_folder(tmp_path, doc=DOC):
    folder = tmp_path / "runs" / "lab" / "abc123"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def test_the_tracker_comes_from_the_inventory_else_the_environment_else_where_the_run_went_before(tmp_path):
    folder = run_folder(tmp_path)
    tracked = replace(cluster(2), tracking=TrackerSettings("http://inv:1", "from-inv", "m"))
    assert upload.settings_for(folder, tracked).uri == "http://inv:1"
    with pytest.raises(BadInput, match="tracking: Received nothing"):
        upload.settings_for(folder, cluster(2))
    with pytest.raises(BadInput, match="MLFLOW_TRACKING_URI is not set and the run was never tracked"):
        upload.settings_for(folder, None, environ={})
    env = upload.settings_for(folder, None, environ={"MLFLOW_TRACKING_URI": "http://env:2"})
    assert (env.uri, env.experiment, env.register_as) == ("http://env:2", "lab", None)
    ledger.Ledger(tracker="http://before:3", experiment="mri", registered_as="best-cnn").write(folder)
    before = upload.settings_for(folder, None, environ={})
    assert (before.uri, before.experiment, before.register_as) == ("http://before:3", "mri", "best-cnn")


def test_a_run_is_known_by_its_folder_and_a_wrong_inventory_is_refused(tmp_path):
    folder = run_folder(tmp_path)
    source = upload.from_folder(folder)
    assert (source.cluster, source.run_id, source.hosts, source.mode) == ("lab", "abc123", ["h0", "h1"], "parallel")
    assert source.settings == {"mode": "parallel", "search": {"sampler": "grid"}}
    with pytest.raises(BadInput, match="a run of cluster 'lab' with the inventory of cluster 'c'"):
        upload.from_folder(folder, cluster(2))
    with pytest.raises(BadInput, match="no such folder"):
        upload.from_folder(tmp_path / "nope")


def test_the_best_models_folder_is_the_hosts_own_and_never_a_link_or_a_path_out(tmp_path):
    folder = run_folder(tmp_path)
    best = DOC["candidates"][0]
    assert upload.model_folder(folder, DOC, best) is None                       # none written
    model = folder / "hosts" / "h1" / "mlflow_model"
    (model / "data").mkdir(parents=True)
    (model.parent / "best_model.keras").write_bytes(b"the best model")
    made_from = hashlib.sha256(b"the best model").hexdigest()
    (model / "MLmodel").write_text(f"flavors: {{}}\nmetadata: {{tfcompose: {{best_model_sha256: {made_from}}}}}\n")
    assert upload.model_folder(folder, DOC, best) == model
    (model.parent / "best_model.keras").write_bytes(b"a newer best: the host stopped before writing it")
    assert upload.model_folder(folder, DOC, best) is None                       # an older best: not this one
    (model.parent / "best_model.keras").write_bytes(b"the best model")
    assert upload.model_folder(folder, DOC, {**best, "host": "../../.."}) is None
    (model / "data" / "model.keras").symlink_to("/etc/passwd")
    assert upload.model_folder(folder, DOC, best) is None
    sync = {**DOC, "mode": "sync"}
    (folder / "mlflow_model").symlink_to(model)
    assert upload.model_folder(folder, sync, best) is None


def test_track_without_a_tracker_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from launcher.cli import main
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    folder = run_folder(tmp_path)
    assert main(["track", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "Received no tracker: MLFLOW_TRACKING_URI is not set and the run was never tracked" in err
    assert "Traceback" not in err and not (folder / "tracking.json").exists()


def test_a_folder_that_is_no_run_is_refused_before_the_tracker_is_contacted(tmp_path):
    """#46: `track runs/<cluster>` was taken as a run, and made an experiment with a FAILED parent."""
    import os
    folder = run_folder(tmp_path)
    for not_a_run in (folder.parent, folder.parent.parent, tmp_path):
        with pytest.raises(BadInput, match="a folder that is not a run"):
            upload.check_run_folder(not_a_run)
    os.replace(folder / "results.json", folder / "elsewhere.json")
    os.mkfifo(folder / "results.json")
    with pytest.raises(BadInput, match="results.json: Received a FIFO"):
        upload.from_folder(folder)
    (folder / "results.json").unlink()
    (folder / "results.json").write_text(json.dumps({k: v for k, v in DOC.items() if k != "best"}))
    with pytest.raises(BadInput, match="best: Received None"):      # once a KeyError, after the trials were sent
        upload.check_run_folder(folder)


class Recorder:
    """What `_files` and `_model` ask of the tracker: each file sent, as it was read."""

    def __init__(self):
        self.sent = {}

    def artifacts(self, run_id):
        return {}

    def upload(self, run_id, path, folder=None):
        self.sent[path.name] = path.read_bytes()


def test_only_the_run_folders_own_regular_files_are_sent_and_from_a_copy(tmp_path):
    """MLflow opens what it is given by name: a FIFO would hold it, a link would send what it leads to."""
    import os
    folder = run_folder(tmp_path)
    (tmp_path / "id_rsa").write_text("a private key")
    (folder / "report.md").symlink_to(tmp_path / "id_rsa")
    os.mkfifo(folder / "leaderboard.png")
    (folder / "curves.png").write_bytes(b"\x89PNG curves")
    tracker = Recorder()
    upload._files(tracker, "parent", folder)
    assert tracker.sent == {"results.json": (folder / "results.json").read_bytes(), "curves.png": b"\x89PNG curves"}
    best = DOC["candidates"][0]
    model = folder / "hosts" / "h1" / "mlflow_model"
    model.mkdir(parents=True)
    os.mkfifo(model / "MLmodel")
    os.mkfifo(model.parent / "best_model.keras")
    assert upload.model_folder(folder, DOC, best) is None          # read without waiting on either FIFO
