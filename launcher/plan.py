"""The plan: every fact the stages act on: run id, image names, the code hash of a `run:` folder,
parallel or not, which trials each host trains, the NIC and GPUs each host uses, and each host's
trainer config.

It is made in two steps, and only these: `make(cluster)` from the inventory alone (all that
`validate`, `render` and the commands attaching to a running cluster need), then, in `up`, once,
`complete(...)` with what was found: each host's NIC and GPU count (cluster_rules.decide) and the
identity of what the hosts will run (the image built here, the dataset_source digest), which the
run id covers. Once the links are checked, `measured(...)` adds the slowest link's throughput for
`allreduce: auto` (not in the run id: a link measured again is the same run). The stages read the
plan and never change it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from launcher.errors import InventoryError
from launcher.files import CHUNK
from launcher.inventory.model import Cluster, Host



@dataclass(frozen=True)
class Plan:
    cluster: Cluster
    code_hash: str                 # of run.code_dir; "" without `run:`
    run_id: str                    # content hash of inventory + code: the same inventory is the same run
    container_image: str           # what the containers run: `image`, or with `run:` the code layer on it
    parallel: bool                 # search.mode parallel: every host trains its own trials alone
    placement: dict[str, list[str]] = field(default_factory=dict)   # host → trial names (parallel only)
    # What preflight found on the hosts (cluster_rules.decide): the NIC that routes to the peers
    # when the inventory names none, and the GPUs each host gets under gpus_per_host: min.
    nics: dict[str, str] = field(default_factory=dict)
    gpu_overrides: dict[str, Any] = field(default_factory=dict)
    # The slowest host-to-host link preflight measured (Mbit/s): `allreduce: auto` weighs it.
    link_mbit_s: Optional[float] = None

    def nic(self, host: Host) -> Optional[str]:
        return host.nic or self.nics.get(host.name)

    def gpus(self, host: Host):
        return self.gpu_overrides.get(host.name, host.gpus)

    @property
    def trial_order(self) -> list[str]:
        return [name for names in self.placement.values() for name in names]

    def train_config(self, host: Optional[Host] = None):
        """The trainer's config on a host: the inventory's, the backup in its own mount, and in
        parallel mode only that host's share of the trials."""
        cfg = self.cluster.spec.train_or_defaults
        update = {} if cfg.backup_dir else {"backup_dir": "/backup"}
        if host is not None and self.parallel:
            update["search"] = cfg.search.model_copy(update={"only": self.placement[host.name]})
        if cfg.allreduce.auto and cfg.allreduce.link_mbit_s is None and self.link_mbit_s is not None:
            update["allreduce"] = cfg.allreduce.model_copy(update={"link_mbit_s": self.link_mbit_s})
        return cfg.model_copy(update=update) if update else cfg


def make(cluster: Cluster) -> Plan:
    code = code_hash(cluster.code_dir)
    parallel = cluster.spec.run is None and cluster.spec.train_or_defaults.search.mode == "parallel"
    return Plan(cluster=cluster, code_hash=code, run_id=run_id(cluster, code),
                container_image=container_image(cluster.spec.image, code if cluster.spec.run else None),
                parallel=parallel, placement=placement(cluster) if parallel else {})


def complete(plan: Plan, nics: dict[str, str], gpu_overrides: dict[str, Any], image_id: str = "",
             dataset_digest: str = "") -> Plan:
    """The plan of an `up` that knows its hosts and what they will run: a rebuilt image or a changed
    dataset_source is then a new run (new containers), as a changed inventory is."""
    return replace(plan, nics=nics, gpu_overrides=gpu_overrides,
                   run_id=run_id(plan.cluster, plan.code_hash, image=image_id, data=dataset_digest))


def measured(plan: Plan, link_mbit_s: Optional[float]) -> Plan:
    """The plan with the slowest link's throughput (None: not measured), to 3 significant digits."""
    return replace(plan, link_mbit_s=None if link_mbit_s is None else float(f"{link_mbit_s:.3g}"))


# How the image reaches the hosts does not change what they run: no new containers for it.
NOT_IN_RUN_ID = {"image_relay"}


def run_id(cluster: Cluster, code: str, **contents: str) -> str:
    doc = {"spec": cluster.spec.model_dump(mode="json", exclude=NOT_IN_RUN_ID), "code": code,
           "hosts": [vars(h) | {"identity_file": None} for h in cluster.hosts]}
    doc.update({k: v for k, v in contents.items() if v})
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:12]


def code_hash(folder: Optional[Path]) -> str:
    """Hash of every file under the folder (relative names and bytes, read in chunks)."""
    if folder is None or not folder.is_dir():
        return ""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        try:
            with path.open("rb") as fh:
                while chunk := fh.read(CHUNK):
                    digest.update(chunk)
        except OSError as exc:
            raise InventoryError(f"{path}: cannot read this file of run.code_dir ({exc.strerror or exc}). "
                                 "Expected every file in code_dir to be readable.") from None
        digest.update(b"\0")
    return digest.hexdigest()


def container_image(image: str, code: Optional[str]) -> str:
    return image if code is None else sibling_tag(image, f"run-{code[:12]}")


def sibling_tag(image: str, tag: str) -> str:
    """The same repository as `image` (a registry's :port is not a tag) under another tag."""
    last = image.rsplit("/", 1)[-1]
    repo = image.rsplit(":", 1)[0] if ":" in last else image
    return f"{repo}:{tag}"


def placement(cluster: Cluster) -> dict[str, list[str]]:
    """search.mode parallel: which trials each host trains (balanced by parameters × images)."""
    from trainer import trials
    cfg = cluster.spec.train_or_defaults
    channels = 1 if cfg.dataset.color_mode == "grayscale" else 3
    classes = cfg.dataset.classes if cfg.dataset.kind == "synthetic" else 2  # the head barely matters
    return trials.place(trials.expand(cfg, only=False), [h.name for h in cluster.hosts], cfg, channels, classes)


def expect_gpus(gpus) -> str:
    """TFC_EXPECT_GPUS: what the trainer checks TensorFlow sees."""
    return ",".join(map(str, gpus)) if isinstance(gpus, list) else str(gpus)
