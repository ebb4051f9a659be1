"""The best model in MLflow's format: asked for by TFC_MLFLOW_MODEL only, and never a failure of
the search (the export itself runs in the trainer image: tests/integration/test_tracking.py)."""
from __future__ import annotations

import sys

from trainer.train import mlflow_model


def test_nothing_is_written_or_imported_unless_the_launcher_asks(tmp_path, monkeypatch):
    monkeypatch.delenv(mlflow_model.ENV, raising=False)
    said = []
    monkeypatch.setitem(sys.modules, "mlflow.tensorflow", None)     # importing it would fail loudly
    mlflow_model.prepare(said.append)
    mlflow_model.export(tmp_path, said.append)
    assert said == [] and list(tmp_path.iterdir()) == []


def test_an_image_without_mlflow_is_one_line_in_the_log_and_the_search_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv(mlflow_model.ENV, "1")
    monkeypatch.setitem(sys.modules, "mlflow.tensorflow", None)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setattr(mlflow_model, "_unavailable", [])
    said = []
    mlflow_model.prepare(said.append)
    mlflow_model.export(tmp_path, said.append)          # said once, at the start, not at every best model
    assert len(said) == 1 and "mlflow cannot be imported in this image" in said[0]
    assert not (tmp_path / mlflow_model.FOLDER).exists()
    monkeypatch.setattr(mlflow_model, "_unavailable", [])
    mlflow_model.export(tmp_path, said.append)          # a failure of its own: one line, no exception
    assert said[1].startswith("the best model was not written in MLflow's format (ModuleNotFoundError")
