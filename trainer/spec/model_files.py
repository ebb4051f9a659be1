"""The best model in MLflow's format, as the trainer leaves it in its results (train/mlflow_model.py
writes it; the launcher's tracking/upload.py logs and registers it): the names both sides read."""
from __future__ import annotations

ENV = "TFC_MLFLOW_MODEL"            # set to 1 by `up` when the inventory has `tracking:`
FOLDER = "mlflow_model"             # beside best_model.keras
SOURCE_KEY = "best_model_sha256"    # the .keras file it was made from, in the folder's tfcompose.json
