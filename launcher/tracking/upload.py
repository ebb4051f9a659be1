"""A collected run made whole on the tracker: at collect (and so at the end of `up --wait`), and
by `tfcompose track runs/<cluster>/<run>` for a run collected while the tracker was down, or
before `tracking:` was set.

Idempotent: the search and its trials are found by their tags, an epoch already on the tracker is
not sent again, a param already there is left as it is, a file of the same size is not uploaded
again, the model is logged and registered once. So `track` twice, or collect after a live wait
that sent most epochs, adds only what is missing.

What is sent: for every trial of results.json its child run (values as params, every epoch from
its history file, its figures, its state as a tag and a status); the best trial's model in
MLflow's format (trainer/train/mlflow_model.py wrote it on the host that trained it) as that run's
logged model, registered under `register_as`; results.json, report.md and the report's pictures
as files of the parent.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from launcher import runfiles
from launcher.inventory.model import TrackerSettings
from launcher.tracking import ledger as ledger_mod, mapping
from launcher.tracking.client import Tracker, TrackerError
from launcher.tracking.outbox import ROW
from launcher.tracking.secrets import shown
from launcher.tracking.source import Source, from_plan, results_of
from trainer.spec import results
from trainer.spec.model_files import FOLDER as MODEL_FOLDER, SOURCE_KEY   # the format's owner

PARENT_FILES = ("results.json", "report.md")
MAX_MLMODEL = 1 << 20


# --- the upload ---------------------------------------------------------------------------------

def after_collect(reporter, plan, run_id: str, run_dir: Path) -> Optional[ledger_mod.Ledger]:
    """collect's one call: the run to the tracker, if the inventory says so. A tracker that does
    not answer is a warning (the run is collected all the same), and tracking.json says what is left."""
    if plan.cluster.tracking is None:
        return None
    reporter.stage(ROW, "tracking", f"sending the run to MLflow at {shown(plan.cluster.tracking.uri)}")
    book = send(plan.cluster.tracking, from_plan(plan, run_id, run_dir))
    if not book.complete:
        reporter.warn(None, f"tracking: {book.pending}; `tfcompose track {run_dir}` sends the rest")
    reporter.stage(ROW, "tracked" if book.complete else "not all sent",
                   f"{len(book.trials)} trial run(s) in experiment {book.experiment!r}")
    return book



def send(settings: TrackerSettings, source: Source) -> ledger_mod.Ledger:
    """Everything of the run that the tracker lacks; the ledger says what was done and what not."""
    book = ledger_mod.Ledger(tracker=shown(settings.uri), experiment=settings.experiment,
                             registered_as=settings.register_as or "", search_params=source.params)
    try:
        _send(Tracker(settings), settings, source, book)
    except TrackerError as exc:
        book.complete, book.pending = False, str(exc)
    book.write(source.folder)
    return book


def _send(tracker: Tracker, settings: TrackerSettings, source: Source, book: ledger_mod.Ledger) -> None:
    book.experiment_id = tracker.experiment_id()
    doc = results_of(source.folder)
    parent = _parent(tracker, source, doc)
    book.search_run = parent.info.run_id
    runs = tracker.trials(book.search_run)
    if doc is None:
        for run in runs.values():
            if run.info.status == "RUNNING":
                tracker.end(run.info.run_id, "KILLED")
        tracker.log(book.search_run, tags={f"{mapping.PREFIX}state": "no results"})
        tracker.end(book.search_run, "FAILED")
        book.trials = {name: run.info.run_id for name, run in runs.items()}
        book.pending = "no results.json: the run has not finished, or it failed"
        return
    records = doc["candidates"]
    keys = mapping.trial_keys(records)
    first = min(range(len(records)), key=lambda i: results.rank_key(records[i]))   # results.best's, by position
    for record, key in zip(records, keys):
        book.trials[key] = _trial(tracker, source, record, key, runs.get(key), keys[first], book.search_run)
    _model(tracker, settings, source, doc, records[first], keys[first], book)
    _files(tracker, book.search_run, source.folder)
    figures, tags = mapping.search_summary(doc)
    ended = mapping.search_times(doc)[1]
    tracker.log(book.search_run, metrics=figures, tags={**tags, f"{mapping.PREFIX}state": "finished"}, at=ended)
    tracker.end(book.search_run, "FINISHED", ended)
    book.complete, book.pending = True, ""


def _parent(tracker: Tracker, source: Source, doc: Optional[dict]):
    params = source.params
    found = tracker.search(source.cluster, source.run_id)
    if found is None:
        found = tracker.create_search(source.cluster, source.run_id,
                                      mapping.search_tags(source.cluster, source.run_id, source.hosts, source.image),
                                      mapping.search_times(doc or {})[0])
    missing = {k: v for k, v in params.items() if k not in found.data.params}
    tracker.log(found.info.run_id, params=missing)
    return found


def _trial(tracker: Tracker, source: Source, record: dict, key: str, run, best: str, parent: str) -> str:
    """The trial's child run, made whole: it starts and ends when the trial did (its own clock)."""
    tags = mapping.trial_tags(record, best, source.hosts, key)
    started, ended = mapping.trial_times(record)
    if run is None:
        run = tracker.create_trial(parent, key, tags, started)
        have: set[int] = set()
    else:
        have = tracker.steps(run.info.run_id)
    run_id = run.info.run_id
    epochs = [e for e in mapping.trial_epochs(record, mapping.history_rows(source.folder, record)) if e.step not in have]
    params = {k: v for k, v in mapping.trial_params(record).items() if k not in run.data.params}
    summary = {k: v for k, v in mapping.trial_summary(record).items() if k not in run.data.metrics}
    tracker.log(run_id, epochs=epochs, metrics=summary, params=params, tags=tags, at=ended)
    status = mapping.trial_status(record)
    if run.info.status != status or (ended is not None and run.info.end_time != mapping.millis(ended)):
        tracker.end(run_id, status, ended)
    return run_id


def _model(tracker: Tracker, settings: TrackerSettings, source: Source, doc: dict, best: dict, best_key: str,
           book: ledger_mod.Ledger) -> None:
    """The best trial's model, as its run's logged model in MLflow's format, registered; without
    that format (an image without mlflow), best_model.keras as a file of the run, and a note."""
    run_id = book.trials[best_key]
    folder = model_folder(source.folder, doc, best)
    if folder is None:
        if runfiles.is_file(source.folder, "best_model.keras") and "best_model.keras" not in tracker.artifacts(run_id):
            _upload_copy(tracker, run_id, source.folder, "best_model.keras")
        book.note = ("the best model is not in MLflow's format (no mlflow_model/ made from best_model.keras in the "
                     "run: an image without mlflow, or a host stopped while writing it): best_model.keras is a file "
                     "of its run, not registered")
        return
    model = tracker.logged_model(run_id)
    if model is None:
        params = mapping.trial_params(best)
        tags = {f"{mapping.PREFIX}run_id": source.run_id, f"{mapping.PREFIX}trial": best["candidate"],
                f"{mapping.PREFIX}class_names": json.dumps(doc.get("class_names", []))[:mapping.MAX_TAG]}
        model = tracker.log_model(run_id, folder, int(best.get("epochs_run") or best.get("epochs") or 0), params, tags)
    book.model_id = model.model_id
    if settings.register_as:
        book.version = tracker.register(settings.register_as, model.model_id, run_id,
                                        {f"{mapping.PREFIX}run_id": source.run_id,
                                         f"{mapping.PREFIX}trial": best["candidate"]})


def model_folder(folder: Path, doc: dict, best: dict) -> Optional[Path]:
    """Where the best trial's model in MLflow's format is: the run folder (sync), or the folder
    of the host that trained it (parallel). Only a real folder with an MLmodel file, every file in
    it a regular file (no link, FIFO or device: MLflow's upload would follow or block on one)."""
    rel = Path(MODEL_FOLDER)
    if doc.get("mode") == "parallel":
        host = best.get("host")
        if not isinstance(host, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", host):
            return None
        rel = Path("hosts") / host / MODEL_FOLDER
    try:
        if runfiles.found(folder, rel) != "a folder" or not runfiles.is_file(folder, rel / "MLmodel") \
                or not _only_files(folder, rel) or not made_from(folder, rel, rel.parent / "best_model.keras"):
            return None
    except OSError:
        return None
    return folder / rel


def _only_files(folder: Path, rel: Path, depth: int = 0) -> bool:
    """Every entry beneath folder/rel a regular file or a real folder (32 levels at most)."""
    for name, kind in runfiles.listing(folder, rel):
        if kind == "a folder" and depth < 32:
            if not _only_files(folder, rel / name, depth + 1):
                return False
        elif kind != "a regular file":
            return False
    return True


def made_from(folder: Path, model: Path, keras: Path) -> bool:
    """Whether the folder is that best_model.keras in MLflow's format (its MLmodel says which file it
    was made from): a host stopped while writing a newer best leaves an older one behind."""
    import hashlib
    import yaml
    try:
        conf = yaml.safe_load(runfiles.read_text(folder, model / "MLmodel", MAX_MLMODEL))
        said = conf["metadata"]["tfcompose"][SOURCE_KEY]
        digest = hashlib.sha256()
        with runfiles.open_read(folder, keras) as fh:
            for chunk in iter(lambda: fh.read(runfiles.COPY_CHUNK), b""):
                digest.update(chunk)
        return isinstance(said, str) and said == digest.hexdigest()
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
        return False


def _upload_copy(tracker: Tracker, run_id: str, folder: Path, name: str) -> None:
    """A file of the run folder sent as the run's file, from a copy read safely (MLflow opens what
    it is given by name: it would follow a link swapped in, or wait on a FIFO)."""
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tfcompose-upload-") as tmp:
        with runfiles.open_read(folder, name) as src, runfiles.writer(Path(tmp), name) as out:
            shutil.copyfileobj(src, out, runfiles.COPY_CHUNK)
        tracker.upload(run_id, Path(tmp) / name)


def _files(tracker: Tracker, run_id: str, folder: Path) -> None:
    """results.json, report.md and the report's pictures as the parent's files (changed ones again);
    only regular files of the run folder, each sent from a copy read safely."""
    there = tracker.artifacts(run_id)
    wanted = list(PARENT_FILES) + [name for name, _ in runfiles.listing(folder) if name.endswith(".png")]
    for name in wanted:
        if runfiles.is_file(folder, name) and there.get(name) != (folder / name).lstat().st_size:
            _upload_copy(tracker, run_id, folder, name)
