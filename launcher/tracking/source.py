"""The run as the tracker sees it (its cluster, id, hosts, mode, image, the search run's params and
its folder), made from the plan at collect or from a run folder for `tfcompose track`; and which
tracker `track` sends it to."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher import runfiles
from launcher.errors import BadInput
from launcher.inventory.model import TrackerSettings
from launcher.inventory.tracking import EXPERIMENT_ENV, URI_ENV
from launcher.tracking import ledger as ledger_mod
from launcher.tracking import mapping
from trainer.spec import results


@dataclass(frozen=True)
class Source:
    """The run as the tracker sees it: who, what settings, where its files are."""

    cluster: str
    run_id: str
    hosts: list
    mode: str
    image: str
    params: dict            # the search run's: the `train:` settings, dotted (or what the run folder says of them)
    folder: Path


def from_plan(plan, run_id: str, run_dir: Path) -> Source:
    cluster = plan.cluster
    hosts, mode = [h.name for h in cluster.hosts], "parallel" if plan.parallel else "sync"
    return Source(cluster.name, run_id, hosts, mode, cluster.spec.image, _inventory_params(cluster, hosts, mode),
                  Path(run_dir))


def _inventory_params(cluster, hosts: list[str], mode: str) -> dict[str, str]:
    return mapping.search_params(cluster.spec.train_or_defaults.model_dump(mode="json"), hosts, mode)


def from_folder(run_dir: Path, cluster=None) -> Source:
    """A collected run by its folder (runs/<cluster>/<run>), with its inventory's settings when given."""
    folder = Path(run_dir)
    check_run_folder(folder)
    real = folder.resolve()
    doc = results_of(folder)
    name = cluster.name if cluster is not None else cluster_of(real)
    if cluster is not None and cluster_of(real) != cluster.name:
        raise BadInput(f"{run_dir}: Received a run of cluster {cluster_of(real)!r} with the inventory of cluster "
                       f"{cluster.name!r}. Expected this run's own inventory, or none.")
    hosts = _hosts(folder, doc) if cluster is None else [h.name for h in cluster.hosts]
    mode = str((doc or {}).get("mode", "sync"))
    if cluster is not None:
        return Source(name, real.name, hosts, mode, cluster.spec.image, _inventory_params(cluster, hosts, mode), folder)
    return Source(name, real.name, hosts, mode, "", _folder_params(folder, doc, hosts, mode), folder)


def _folder_params(folder: Path, doc: Optional[dict], hosts: list[str], mode: str) -> dict[str, str]:
    """Without the inventory: the params an earlier send was given by it (tracking.json keeps them, so
    a run collected while the tracker was down is sent later as it would have been), else what
    results.json says of the run's settings."""
    before = ledger_mod.read(folder)
    if before is not None and before.search_params:
        return before.search_params
    return mapping.search_params(mapping.settings_from_results(doc or {}), hosts, mode)


def check_run_folder(folder: Path) -> None:
    """A folder `track` may send: a run's (its results.json or outcome.json there, regular files);
    anything else (a cluster's folder, runs/ itself, a file) is refused before the tracker is
    contacted, and a results.json that is not one tfcompose wrote is named."""
    if not folder.is_dir():
        raise BadInput(f"{folder}: Received no such folder. Expected a collected run, like runs/<cluster>/<run>.")
    kinds = {name: runfiles.found(folder, name) for name in (runfiles.RESULTS, "outcome.json")}
    for name, found in kinds.items():
        if found not in (None, "a regular file"):
            raise BadInput(runfiles.RunFileError(folder / name, found).line)
    if not any(kinds.values()):
        raise BadInput(f"{folder}: Received a folder that is not a run (no results.json, no outcome.json). Expected a "
                       "collected run, like runs/<cluster>/<run> (`tfcompose runs` lists them).")
    if kinds[runfiles.RESULTS]:
        runfiles.load_results(folder)       # a damaged one is named here, before anything is sent


def cluster_of(folder: Path) -> str:
    """runs/<cluster>/<run>; the simulation's runs/local is cluster `local` (as `tfcompose runs` says)."""
    return "local" if folder.name == "local" else folder.parent.name


def _hosts(folder: Path, doc: Optional[dict]) -> list[str]:
    logs = [name[:-4] for name, kind in runfiles.listing(folder, "logs") if name.endswith(".log") and ".attempt-" not in name
            and kind == "a regular file"] if runfiles.found(folder, "logs") == "a folder" else []
    return [str(h) for h in (doc or {}).get("search", {}).get("hosts") or logs]


def results_of(folder: Path) -> Optional[dict]:
    if not runfiles.is_file(folder, runfiles.RESULTS):
        return None
    try:
        return runfiles.load_results(folder)
    except results.ResultsError:
        return None


def settings_for(run_dir: Path, cluster=None, environ: Optional[dict] = None) -> TrackerSettings:
    """The tracker for `tfcompose track`: the inventory's, else MLFLOW_TRACKING_URI, else the
    one the run was tracked in before (tracking.json, when its URI held no secret)."""
    environ = os.environ if environ is None else environ
    if cluster is not None:
        if cluster.tracking is None:
            raise BadInput(f"{cluster.path}: tracking: Received nothing. Expected tracking: {{mlflow: {{uri: …}}}} "
                           "to say where the run goes (or no --inventory, with MLFLOW_TRACKING_URI set).")
        return cluster.tracking
    before = ledger_mod.read(run_dir)
    uri = environ.get(URI_ENV) or (before.tracker if before else "")
    if not uri:
        raise BadInput(f"{run_dir}: Received no tracker: MLFLOW_TRACKING_URI is not set and the run was never "
                       "tracked. Expected MLFLOW_TRACKING_URI, or --inventory with a tracking: section.")
    experiment = environ.get(EXPERIMENT_ENV) or (before.experiment if before else "") or cluster_of(Path(run_dir).resolve())
    return TrackerSettings(uri=uri, experiment=experiment,
                           register_as=(before.registered_as or None) if before else None)
