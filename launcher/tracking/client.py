"""MLflow's client, as tfcompose uses it: every call bounded in time, every failure one
`TrackerError` whose message holds no secret, nothing printed by MLflow itself.

MLflow's HTTP client waits 120 s per request and retries 7 times with back-off by default: a
tracker that is down would hold a caller for many minutes. Here a request gets `timeout_s` and
no retry (what was not sent is kept and sent later). MLflow also prints run URLs (with the URI's
password in them) and sends usage telemetry unless told not to: both are switched off.

Runs are found again by their tags, never by a local memory alone, so whatever sends (the live
outbox, collect, `tfcompose track` on another machine) finds what the others sent: the search
by `tfcompose.run_id` and `tfcompose.cluster`, a trial by `tfcompose.trial` under its parent.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings
from typing import Iterator, Optional

from launcher.errors import BadInput, TfcError
from launcher.inventory.model import TrackerSettings
from launcher.tracking import mapping, secrets

BATCH_METRICS = 1000     # MLflow's log_batch limits
BATCH_PARAMS_TAGS = 100
PAGE = 1000


class TrackerError(TfcError):
    """The tracker did not answer in time, refused a call, or is not what MLflow expects."""


def require_client(cluster) -> None:
    """`tracking:` needs MLflow's client beside tfcompose: say so before anything starts (exit 2)."""
    import importlib.util
    if cluster is not None and cluster.tracking is not None and importlib.util.find_spec("mlflow") is None:
        raise BadInput(f"{cluster.path}: tracking.mlflow: Received an MLflow tracker, but MLflow's client is not "
                       "installed beside tfcompose. Expected pip install 'tfcompose[tracking]' (this machine only: "
                       "the hosts need nothing).")


def quiet_mlflow(timeout_s: float) -> None:
    """Before MLflow is imported or used in this process: bounded requests, no retries, no URL
    printed, no telemetry, no log lines of its own."""
    os.environ.update({"MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, int(round(timeout_s)))),
                       "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
                       "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"})
    for name in ("mlflow", "urllib3", "alembic"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", module=r"mlflow(\.|$)")


class Tracker:
    """One tracker (its URI) for one search; every method one or a few bounded requests."""

    def __init__(self, settings: TrackerSettings):
        self.settings = settings
        self.secret = secrets.secrets(settings.uri)
        self.where = secrets.shown(settings.uri)
        quiet_mlflow(settings.timeout_s)
        with self.call("load MLflow's client"):
            from mlflow import MlflowClient
            self.client = MlflowClient(tracking_uri=settings.uri, registry_uri=settings.uri)
        self._experiment_id: Optional[str] = None

    @contextlib.contextmanager
    def call(self, what: str) -> Iterator[None]:
        try:
            yield
        except TrackerError:
            raise
        except Exception as exc:  # noqa: BLE001 (requests, MLflow and its stores raise anything)
            raise TrackerError(f"MLflow at {self.where}: {what}: {self.said(exc)}") from None

    def said(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if "Max retries exceeded" in text or "timed out" in text.lower() or "Connection refused" in text:
            text = _short_connection_error(text)
        return secrets.scrub(text, self.secret)[:400]

    # --- the experiment and the runs -------------------------------------------------------------

    def experiment_id(self) -> str:
        if self._experiment_id is None:
            name = self.settings.experiment
            with self.call(f"experiment {name!r}"):
                found = self.client.get_experiment_by_name(name)
                if found is None:
                    self._experiment_id = self.client.create_experiment(name)
                elif found.lifecycle_stage != "active":
                    raise TrackerError(f"MLflow at {self.where}: experiment {name!r} is deleted; restore it "
                                       "(mlflow experiments restore) or name another in tracking.mlflow.experiment")
                else:
                    self._experiment_id = found.experiment_id
        return self._experiment_id

    def search(self, cluster: str, run_id: str):
        """The search's parent run (the oldest, if two launchers made one each), or None."""
        query = (f"tags.`{mapping.PREFIX}run_id` = '{run_id}' and tags.`{mapping.PREFIX}cluster` = '{cluster}' "
                 f"and tags.`{mapping.PREFIX}kind` = 'search'")
        runs = sorted(self._all_runs(query, "the search's run"), key=lambda r: (r.info.start_time or 0, r.info.run_id))
        for extra in runs[1:]:         # two launchers made one each at once: one search stays, with its trials
            for child in self._all_runs(f"tags.`mlflow.parentRunId` = '{extra.info.run_id}'", "a second search's trials"):
                with self.call("delete a second search's trial"):
                    self.client.delete_run(child.info.run_id)
            with self.call("delete a second run of the search"):
                self.client.delete_run(extra.info.run_id)
        return runs[0] if runs else None

    def create_search(self, cluster: str, run_id: str, tags: dict[str, str]):
        with self.call("create the search's run"):
            return self.client.create_run(self.experiment_id(), tags=tags, run_name=mapping.search_name(cluster, run_id))

    def trials(self, parent_id: str) -> dict[str, object]:
        """Each trial's child run by its name; a second child of one trial (two senders at once) is
        deleted, so a trial stays one run."""
        runs = self._all_runs(f"tags.`mlflow.parentRunId` = '{parent_id}'", "the trials' runs")
        by_trial: dict[str, object] = {}
        for run in sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id)):
            name = run.data.tags.get(f"{mapping.PREFIX}trial")
            if name is None:
                continue
            if name in by_trial:
                with self.call(f"delete a second run of trial {name}"):
                    self.client.delete_run(run.info.run_id)
                continue
            by_trial[name] = run
        return by_trial

    def create_trial(self, parent_id: str, trial: str, tags: dict[str, str]):
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID
        with self.call(f"create trial {trial}'s run"):
            return self.client.create_run(self.experiment_id(), run_name=trial[:250],
                                          tags={**tags, MLFLOW_PARENT_RUN_ID: parent_id, f"{mapping.PREFIX}trial": trial})

    def _all_runs(self, query: str, what: str) -> list:
        out, token = [], None
        with self.call(f"find {what}"):
            while True:
                page = self.client.search_runs([self.experiment_id()], query, max_results=PAGE, page_token=token)
                out += list(page)
                token = page.token
                if not token:
                    return out

    # --- what a run holds --------------------------------------------------------------------------

    def steps(self, run_id: str) -> set[int]:
        with self.call("read a trial's epochs"):
            return {m.step for m in self.client.get_metric_history(run_id, mapping.STEP_KEY)}

    def log(self, run_id: str, epochs=(), metrics: Optional[dict] = None, params: Optional[dict] = None,
            tags: Optional[dict] = None) -> None:
        """Epochs (each its step), figures at step 0, params and tags; in batches MLflow takes."""
        from mlflow.entities import Metric, Param, RunTag
        now = int(time.time() * 1000)
        rows = [Metric(k, v, now, e.step) for e in epochs for k, v in e.metrics.items()]
        rows += [Metric(k, v, now, 0) for k, v in (metrics or {}).items()]
        pairs = [Param(k, v) for k, v in (params or {}).items()] + [RunTag(k, v) for k, v in (tags or {}).items()]
        with self.call("log figures"):
            for i in range(0, len(rows), BATCH_METRICS):
                self.client.log_batch(run_id, metrics=rows[i:i + BATCH_METRICS], synchronous=True)
            for i in range(0, len(pairs), BATCH_PARAMS_TAGS):
                chunk = pairs[i:i + BATCH_PARAMS_TAGS]
                self.client.log_batch(run_id, params=[p for p in chunk if isinstance(p, Param)],
                                      tags=[t for t in chunk if isinstance(t, RunTag)], synchronous=True)

    def end(self, run_id: str, status: str) -> None:
        with self.call("set a run's status"):
            self.client.set_terminated(run_id, status)

    def reopen(self, run_id: str) -> None:
        with self.call("set a run's status"):
            self.client.update_run(run_id, status="RUNNING")

    def artifacts(self, run_id: str) -> dict[str, int]:
        with self.call("list a run's files"):
            return {f.path: f.file_size or 0 for f in self.client.list_artifacts(run_id) if not f.is_dir}

    def upload(self, run_id: str, path, folder: Optional[str] = None) -> None:
        with self.call(f"upload {os.path.basename(str(path))}"):
            self.client.log_artifact(run_id, str(path), folder)

    # --- the best model ----------------------------------------------------------------------------

    def logged_model(self, run_id: str):
        with self.call("find the logged model"):
            found = self.client.search_logged_models([self.experiment_id()],
                                                     filter_string=f"source_run_id = '{run_id}'", max_results=10)
            ready = [m for m in found if str(m.status).endswith("READY")]
            return ready[0] if ready else None

    def log_model(self, run_id: str, folder, step: int, params: dict[str, str], tags: dict[str, str]):
        """A model folder in MLflow's format (trainer/mlflow_model.py) as the run's logged model:
        made, its MLmodel told its id and run (as MLflow's own log_model does), its files sent, ready."""
        import shutil
        import tempfile
        from pathlib import Path
        from mlflow.entities import LoggedModelOutput, LoggedModelStatus
        from mlflow.models import Model
        with self.call("log the best model"):
            model = self.client.create_logged_model(self.experiment_id(), name="model", source_run_id=run_id,
                                                    params=params, tags=tags)
            with tempfile.TemporaryDirectory(prefix="tfcompose-model-") as tmp:
                copy = Path(tmp) / "model"
                shutil.copytree(folder, copy, symlinks=True)
                conf = Model.load(str(copy / "MLmodel"))
                conf.model_id, conf.run_id, conf.artifact_path = model.model_id, run_id, model.artifact_location
                conf.save(str(copy / "MLmodel"))
                self.client.log_model_artifacts(model.model_id, str(copy))
            self.client.log_outputs(run_id, [LoggedModelOutput(model.model_id, step=step)])
            return self.client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)

    def register(self, name: str, model_id: str, run_id: str, tags: dict[str, str]) -> str:
        """The model as a version of `name` in the registry (once: a second call finds it)."""
        from mlflow.exceptions import MlflowException
        with self.call(f"register the model as {name!r}"):
            found = [v for v in self.client.search_model_versions(f"name = '{name}'", max_results=1000)
                     if v.run_id == run_id]
            if found:
                return str(found[0].version)
            try:
                self.client.create_registered_model(name, tags={f"{mapping.PREFIX}made_by": "tfcompose"})
            except MlflowException as exc:
                if exc.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
                    raise
            version = self.client.create_model_version(name, source=f"models:/{model_id}", run_id=run_id,
                                                       tags=tags, model_id=model_id, await_creation_for=0)
            return str(version.version)


def _short_connection_error(text: str) -> str:
    """requests' connection errors are long: their cause, without the pool's repr."""
    for cause in ("Connection refused", "Read timed out", "Connect timeout", "timed out", "Name or service not known",
                  "No route to host", "Connection reset"):
        if cause.lower() in text.lower():
            return f"no answer ({cause.lower()})"
    return text
