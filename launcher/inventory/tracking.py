"""`tracking.mlflow` resolved, once, at load: the URI from the inventory or, as MLflow users
expect, from MLFLOW_TRACKING_URI; the experiment from the inventory, MLFLOW_EXPERIMENT_NAME or the
cluster's name. Nothing is contacted here, and nothing imports MLflow."""
from __future__ import annotations

import re
from typing import Optional

from launcher.inventory.model import TrackerSettings
from launcher.inventory.schema import TRACKER_URI, Inventory
from trainer.spec.validation import Problem

URI_ENV, EXPERIMENT_ENV = "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"
URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f]*$")


def resolve(spec: Inventory, environ: dict[str, str]) -> tuple[Optional[TrackerSettings], list[Problem]]:
    """The tracker settings (None without `tracking:`), or what is wrong with them."""
    if spec.tracking is None:
        return None, []
    if spec.run is not None:
        return None, [Problem(("tracking",), "Received tracking with run: (your own program)",
                              "tracking with the built-in trainer (train:) only: your program logs to MLflow itself")]
    given = spec.tracking.mlflow
    uri = given.uri or environ.get(URI_ENV, "")
    where = ("tracking", "mlflow", "uri") if given.uri or "uri" in given.model_fields_set else ("tracking", "mlflow")
    if not uri:
        return None, [Problem(where, f"Received no uri, and {URI_ENV} is not set",
                              f"{TRACKER_URI}, here or in {URI_ENV}")]
    if not given.uri and (len(uri) > 2048 or not URI_RE.match(uri)):
        return None, [Problem(where, f"Received {URI_ENV} that is not a URI (shown without its value: it may hold a "
                              "token)", TRACKER_URI)]
    experiment = given.experiment or environ.get(EXPERIMENT_ENV, "").strip() or spec.cluster
    return TrackerSettings(uri=uri, experiment=experiment[:500], register_as=given.register_as,
                           timeout_s=given.timeout_s), []
