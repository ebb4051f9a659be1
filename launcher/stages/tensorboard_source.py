"""What `tfcompose tensorboard` serves, decided before anything starts (pure; was in tensorboard.py):
which host (the chief, or --host where it writes TensorBoard logs), which folder on it, the image
its cluster's container runs, or a collected run's folder (sync, every host's, or one host's)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

from launcher import runfiles
from launcher.errors import BadAnswer, BadInput
from launcher.inventory.model import Cluster, Host

IMAGE_ID_RE = re.compile(r"sha256:[0-9a-f]{64}")


def pick_host(cluster: Cluster, name: Optional[str], parallel: Callable[[], bool]) -> Host:
    """The chief, or --host. In a sync search only the chief writes TensorBoard logs."""
    if name is None:
        return cluster.chief
    host = next((h for h in cluster.hosts if h.name == name), None)
    if host is None:
        raise BadInput(f"--host: Received {name!r}. Expected a host of {cluster.path}: "
                       + ", ".join(h.name for h in cluster.hosts) + ".")
    if not host.chief and cluster.spec.run is None and not parallel():
        raise BadInput(f"--host: Received {name!r}, a worker of a sync search, which writes no TensorBoard logs "
                       f"(the chief, {cluster.chief.name}, does). Expected the chief, or a search.mode: parallel cluster.")
    return host


def logdir(cluster: Cluster) -> str:
    """Inside the TensorBoard container, where the host's results folder is /results: the trainer
    writes results/tensorboard/; a `run:` program writes where it likes in it, so all of it."""
    return "/results" if cluster.spec.run is not None else "/results/tensorboard"


def image_of(container: dict, host: str) -> str:
    """The image ID the cluster's container runs (present on the host, whatever its tag became)."""
    image = container.get("Image")
    if not isinstance(image, str) or not IMAGE_ID_RE.fullmatch(image):
        raise BadAnswer(host, reason="`docker inspect` gave no image ID for the cluster's container")
    return image


def collected_logdir(run_dir: Path, host: Optional[str]) -> Path:
    """A collected run's TensorBoard folder: tensorboard/ (sync), hosts/ (parallel: every host's,
    each a run of its own in TensorBoard) or hosts/<host>/tensorboard/ with --host. Real folders
    only (launcher/runfiles.py): a link there is not served."""

    def real(rel: str) -> bool:
        try:
            return runfiles.is_folder(run_dir, rel)
        except OSError:
            return False
    boards = sorted(name for name, kind in (runfiles.listing(run_dir, "hosts") if real("hosts") else [])
                    if kind == "a folder" and real(f"hosts/{name}/tensorboard"))
    if host is not None:
        if host in boards:
            return run_dir / "hosts" / host / "tensorboard"
        raise BadInput(f"--host: Received {host!r}. Expected " + (f"a host of {run_dir}: {', '.join(boards)}." if boards
                       else f"no --host: {run_dir} has no folder per host (hosts/<host>/tensorboard)."))
    if real("tensorboard"):
        return run_dir / "tensorboard"
    if boards:
        return run_dir / "hosts"
    raise BadInput(f"{run_dir}: Received a folder with no tensorboard/ (nor hosts/<host>/tensorboard/). "
                   "Expected a collected run: runs/<cluster>/<run> (see `tfcompose runs`).")
