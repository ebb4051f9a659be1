"""What `tfcompose track` and collect send: the best model's folder, the parent's files, the CLI's
line without a tracker (the run's inputs: test_source.py; through a real MLflow server:
tests/integration/test_tracking.py)."""
from __future__ import annotations

import hashlib

from launcher.tracking import upload
from support.builders import SEARCH_DOC as DOC, collected_run


def test_the_best_models_folder_is_the_hosts_own_and_never_a_link_or_a_path_out(tmp_path):
    folder = collected_run(tmp_path)
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
    folder = collected_run(tmp_path)
    assert main(["track", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "Received no tracker: MLFLOW_TRACKING_URI is not set and the run was never tracked" in err
    assert "Traceback" not in err and not (folder / "tracking.json").exists()


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
    folder = collected_run(tmp_path)
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
