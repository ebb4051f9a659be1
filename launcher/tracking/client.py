"""MLflow's client, as tfcompose uses it: every call bounded in time, every failure one
`TrackerError` whose message holds no secret, nothing printed by MLflow itself.

MLflow's HTTP client waits 120 s per request and retries 7 times with back-off by default: a
tracker that is down would hold a caller for many minutes. Here a request gets `timeout_s` and
no retry (what was not sent is kept and sent later). That timeout bounds each read of the socket,
not the answer: a tracker that sends one byte at a time would hold a caller for ever. So each
call runs on a thread of its own and is waited for `timeout_s` (plus CALL_GRACE_S) in all: past
that it is a TrackerError (the caller records what is left: `tfcompose track` sends it later), the
call is left to end by itself, and until it does this Tracker makes no other (one such thread at
most, never a pile). A file's upload gets more time for its size (UPLOAD_BYTES_S).
MLflow also prints run URLs (with the URI's password in them) and sends usage telemetry unless
told not to: both are switched off.

Runs are found again by their tags, never by a local memory alone, so whatever sends (the live
outbox, collect, `tfcompose track` on another machine) finds what the others sent: the search
by `tfcompose.run_id` and `tfcompose.cluster`, a trial by `tfcompose.trial` under its parent.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import warnings
from typing import Callable, Iterator, Optional, TypeVar

from launcher.errors import BadInput, TfcError
from launcher.inventory.model import TrackerSettings
from launcher.tracking import mapping, secrets

BATCH_METRICS = 1000     # MLflow's log_batch limits
BATCH_PARAMS_TAGS = 100
PAGE = 1000
CALL_GRACE_S = 2.0       # beyond timeout_s, for a call's set-up (a new connection) and its own bookkeeping
UPLOAD_BYTES_S = 1 << 20     # an upload may take timeout_s more per MiB at this pace
T = TypeVar("T")


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
        self.secret = secrets.remember(settings.uri)      # and every printer of this process masks them
        self.where = secrets.shown(settings.uri)
        self.stuck: Optional[threading.Thread] = None     # a call past its bound, not ended yet
        quiet_mlflow(settings.timeout_s)
        with self.call("load MLflow's client"):
            from mlflow import MlflowClient
            self.client = MlflowClient(tracking_uri=settings.uri, registry_uri=settings.uri)
        self._experiment_id: Optional[str] = None

    @contextlib.contextmanager
    def call(self, what: str) -> Iterator[None]:
        """What happens here on this machine (no request): its failure as a TrackerError."""
        try:
            yield
        except TrackerError:
            raise
        except Exception as exc:  # noqa: BLE001 (requests, MLflow and its stores raise anything)
            raise TrackerError(f"MLflow at {self.where}: {what}: {self.said(exc)}") from None

    def bounded(self, what: str, request: Callable[[], T], size: int = 0) -> T:
        """`request()` (one or a few of MLflow's requests) waited for timeout_s + CALL_GRACE_S at
        most in all (more for `size` bytes sent), however slowly the tracker answers."""
        if self.stuck is not None and self.stuck.is_alive():
            raise TrackerError(f"MLflow at {self.where}: {what}: not tried: an earlier call has had no whole answer yet")
        limit = self.settings.timeout_s + CALL_GRACE_S + self.settings.timeout_s * size / UPLOAD_BYTES_S
        done: dict = {}

        def work() -> None:
            try:
                done["value"] = request()
            except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread)
                done["error"] = exc

        thread = threading.Thread(target=work, name="tfcompose-tracker-call", daemon=True)
        thread.start()
        thread.join(limit)
        if thread.is_alive():
            self.stuck = thread
            raise TrackerError(f"MLflow at {self.where}: {what}: no whole answer within {limit:.0f} s (a tracker that "
                               "answers this slowly is left for later)")
        if "error" in done:
            with self.call(what):
                raise done["error"]
        return done["value"]

    def said(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if "Max retries exceeded" in text or "timed out" in text.lower() or "Connection refused" in text:
            text = _short_connection_error(text)
        return secrets.scrub(text, self.secret)[:400]

    # --- the experiment and the runs -------------------------------------------------------------

    def experiment_id(self) -> str:
        if self._experiment_id is None:
            name = self.settings.experiment
            found = self.bounded(f"experiment {name!r}", lambda: self.client.get_experiment_by_name(name))
            if found is None:
                self._experiment_id = self.bounded(f"experiment {name!r}", lambda: self.client.create_experiment(name))
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
                self.bounded("delete a second search's trial", lambda c=child: self.client.delete_run(c.info.run_id))
            self.bounded("delete a second run of the search", lambda e=extra: self.client.delete_run(e.info.run_id))
        return runs[0] if runs else None

    def create_search(self, cluster: str, run_id: str, tags: dict[str, str], start: Optional[float] = None):
        """The search's parent run, started at `start` (UTC unix seconds; default now)."""
        experiment = self.experiment_id()
        return self.bounded("create the search's run", lambda: self.client.create_run(
            experiment, tags=tags, run_name=mapping.search_name(cluster, run_id), start_time=mapping.millis(start)))

    def trials(self, parent_id: str) -> dict[str, object]:
        """Each trial's child run by its key (mapping.trial_keys: its name, numbered when two
        trials share one); a second child of one key (two senders at once) is deleted, so a trial
        stays one run, and two trials of one name stay two."""
        runs = self._all_runs(f"tags.`mlflow.parentRunId` = '{parent_id}'", "the trials' runs")
        by_trial: dict[str, object] = {}
        for run in sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id)):
            key = run.data.tags.get(f"{mapping.PREFIX}trial")
            if key is None:
                continue
            if key in by_trial:
                self.bounded(f"delete a second run of trial {key}", lambda r=run: self.client.delete_run(r.info.run_id))
                continue
            by_trial[key] = run
        return by_trial

    def create_trial(self, parent_id: str, trial: str, tags: dict[str, str], start: Optional[float] = None):
        """A trial's child run, tagged with its key `trial`; named printable (mapping.run_name);
        started when the trial started (`start`, UTC unix seconds; default now)."""
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID
        experiment = self.experiment_id()
        return self.bounded(f"create trial {mapping.run_name(trial)}'s run", lambda: self.client.create_run(
            experiment, run_name=mapping.run_name(trial), start_time=mapping.millis(start),
            tags={**tags, MLFLOW_PARENT_RUN_ID: parent_id, f"{mapping.PREFIX}trial": trial}))

    def _all_runs(self, query: str, what: str) -> list:
        experiment = self.experiment_id()
        out, token = [], None
        while True:
            page = self.bounded(f"find {what}", lambda t=token: self.client.search_runs(
                [experiment], query, max_results=PAGE, page_token=t))
            out += list(page)
            token = page.token
            if not token:
                return out

    # --- what a run holds --------------------------------------------------------------------------

    def steps(self, run_id: str) -> set[int]:
        history = self.bounded("read a trial's epochs", lambda: self.client.get_metric_history(run_id, mapping.STEP_KEY))
        return {m.step for m in history}

    def log(self, run_id: str, epochs=(), metrics: Optional[dict] = None, params: Optional[dict] = None,
            tags: Optional[dict] = None, at: Optional[float] = None) -> None:
        """Epochs (each its step, stamped with its end when known), figures at step 0 (stamped `at`,
        UTC unix seconds, when given), params and tags; in batches MLflow takes, each batch one
        bounded call. What has no time of its own is stamped now."""
        with self.call("log figures"):
            from mlflow.entities import Metric, Param, RunTag
        now = int(time.time() * 1000)
        rows = [Metric(k, v, mapping.millis(e.at) or now, e.step) for e in epochs for k, v in e.metrics.items()]
        rows += [Metric(k, v, mapping.millis(at) or now, 0) for k, v in (metrics or {}).items()]
        pairs = [Param(k, v) for k, v in (params or {}).items()] + [RunTag(k, v) for k, v in (tags or {}).items()]
        for i in range(0, len(rows), BATCH_METRICS):
            self.bounded("log figures", lambda i=i: self.client.log_batch(run_id, metrics=rows[i:i + BATCH_METRICS],
                                                                        synchronous=True))
        for i in range(0, len(pairs), BATCH_PARAMS_TAGS):
            chunk = pairs[i:i + BATCH_PARAMS_TAGS]
            self.bounded("log figures", lambda c=chunk: self.client.log_batch(
                run_id, params=[p for p in c if isinstance(p, Param)], tags=[t for t in c if isinstance(t, RunTag)],
                synchronous=True))

    def end(self, run_id: str, status: str, at: Optional[float] = None) -> None:
        """The run's status, and its end at `at` (UTC unix seconds; default now)."""
        self.bounded("set a run's status", lambda: self.client.set_terminated(run_id, status, end_time=mapping.millis(at)))

    def reopen(self, run_id: str) -> None:
        self.bounded("set a run's status", lambda: self.client.update_run(run_id, status="RUNNING"))

    def artifacts(self, run_id: str) -> dict[str, int]:
        found = self.bounded("list a run's files", lambda: self.client.list_artifacts(run_id))
        return {f.path: f.file_size or 0 for f in found if not f.is_dir}

    def upload(self, run_id: str, path, folder: Optional[str] = None) -> None:
        size = os.path.getsize(path)
        self.bounded(f"upload {os.path.basename(str(path))}", lambda: self.client.log_artifact(run_id, str(path), folder),
                     size=size)

    # --- the best model ----------------------------------------------------------------------------

    def logged_model(self, run_id: str):
        experiment = self.experiment_id()
        found = self.bounded("find the logged model", lambda: self.client.search_logged_models(
            [experiment], filter_string=f"source_run_id = '{run_id}'", max_results=10))
        ready = [m for m in found if str(m.status).endswith("READY")]
        return ready[0] if ready else None

    def log_model(self, run_id: str, folder, step: int, params: dict[str, str], tags: dict[str, str]):
        """A model folder in MLflow's format (trainer/train/mlflow_model.py) as the run's logged model:
        made, its MLmodel told its id and run (as MLflow's own log_model does), its files sent, ready."""
        import shutil
        import tempfile
        from pathlib import Path
        with self.call("log the best model"):
            from mlflow.entities import LoggedModelOutput, LoggedModelStatus
            from mlflow.models import Model
        experiment = self.experiment_id()
        model = self.bounded("log the best model", lambda: self.client.create_logged_model(
            experiment, name="model", source_run_id=run_id, params=params, tags=tags))
        with tempfile.TemporaryDirectory(prefix="tfcompose-model-") as tmp:
            copy = Path(tmp) / "model"
            with self.call("log the best model"):
                shutil.copytree(folder, copy, symlinks=True)
                conf = Model.load(str(copy / "MLmodel"))
                conf.model_id, conf.run_id, conf.artifact_path = model.model_id, run_id, model.artifact_location
                conf.save(str(copy / "MLmodel"))
            size = sum(p.stat().st_size for p in copy.rglob("*") if p.is_file())
            self.bounded("log the best model", lambda: self.client.log_model_artifacts(model.model_id, str(copy)), size=size)
        self.bounded("log the best model", lambda: self.client.log_outputs(run_id, [LoggedModelOutput(model.model_id,
                                                                                                       step=step)]))
        return self.bounded("log the best model", lambda: self.client.finalize_logged_model(model.model_id,
                                                                                             LoggedModelStatus.READY))

    def register(self, name: str, model_id: str, run_id: str, tags: dict[str, str]) -> str:
        """The model as a version of `name` in the registry (once: a second call finds it)."""
        with self.call(f"register the model as {name!r}"):
            from mlflow.exceptions import MlflowException
        what = f"register the model as {name!r}"
        found = [v for v in self.bounded(what, lambda: self.client.search_model_versions(f"name = '{name}'", max_results=1000))
                 if v.run_id == run_id]
        if found:
            return str(found[0].version)

        def create() -> None:
            try:
                self.client.create_registered_model(name, tags={f"{mapping.PREFIX}made_by": "tfcompose"})
            except MlflowException as exc:
                if exc.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
                    raise
        self.bounded(what, create)
        version = self.bounded(what, lambda: self.client.create_model_version(
            name, source=f"models:/{model_id}", run_id=run_id, tags=tags, model_id=model_id, await_creation_for=0))
        return str(version.version)


def _short_connection_error(text: str) -> str:
    """requests' connection errors are long: their cause, without the pool's repr."""
    for cause in ("Connection refused", "Read timed out", "Connect timeout", "timed out", "Name or service not known",
                  "No route to host", "Connection reset"):
        if cause.lower() in text.lower():
            return f"no answer ({cause.lower()})"
    return text
