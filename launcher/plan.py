"""The plan: every fact the stages act on: run id, image names, the code hash of a `run:` folder,
parallel or not, which trials each host trains, the NIC and GPUs each host uses, and each host's
trainer config.

It is made in steps, and only these: `make(cluster)` from the inventory alone (all that
`validate`, `render` and the commands attaching to a running cluster need), then, in `up`, once,
`complete(...)` with what was found: each host's NIC and GPU count (cluster_rules.decide) and the
identity of what the hosts will run (the image built here, the dataset_source digest), which the
configuration id covers; `named(...)` with the run it starts or resumes (launcher/runs.py chooses);
once the links are checked, `measured(...)` adds the slowest link's throughput for
`allreduce: auto` (not in the configuration: a link measured again is the same run). The stages
read the plan and never change it.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Optional

from launcher.errors import InventoryError
from trainer.spec.elastic_run import ElasticRun, Reform, reform_at
from launcher.files import CHUNK
from launcher.inventory.model import Cluster, Host



@dataclass(frozen=True)
class Plan:
    cluster: Cluster
    code_hash: str                 # of run.code_dir; "" without `run:`
    config_id: str                 # content hash of inventory, code, image and data: what the hosts run
    container_image: str           # what the containers run: `image`, or with `run:` the code layer on it
    parallel: bool                 # search.mode parallel: every host pulls its trials from the chief's queue
    run_id: str = ""               # the run `up` starts or resumes (runs.choose); "" until it is known
    # What preflight found on the hosts (cluster_rules.decide): the NIC that routes to the peers
    # when the inventory names none, and the GPUs each host gets under gpus_per_host: min.
    nics: dict[str, str] = field(default_factory=dict)
    gpu_overrides: dict[str, Any] = field(default_factory=dict)
    # The slowest host-to-host link preflight measured (Mbit/s): `allreduce: auto` weighs it.
    link_mbit_s: Optional[float] = None
    # Under the inventory's `elastic:`: the batch policy, the hosts at the start, the re-forms so far.
    elastic: Optional[ElasticRun] = None

    @property
    def run(self) -> str:
        """The run's id: the one `up` chose, or (rendering with no hosts to ask) the configuration's."""
        return self.run_id or self.config_id

    def run_dir(self, host: Host) -> str:
        """Where this run lives on the host (launcher/runs.py)."""
        return f"{host.bundle_dir}/runs/{self.run}"

    def nic(self, host: Host) -> Optional[str]:
        return host.nic or self.nics.get(host.name)

    def gpus(self, host: Host):
        return self.gpu_overrides.get(host.name, host.gpus)

    def train_config(self, host: Optional[Host] = None):
        """The trainer's config on a host: the inventory's, the backup in its own mount, and in
        parallel mode where the trial queue is (served by the chief, reached at its address)."""
        cfg = self.cluster.spec.train_or_defaults
        update = {} if cfg.backup_dir else {"backup_dir": "/backup"}
        if host is not None and self.parallel:
            chief = host.name == self.cluster.chief.name
            update["search"] = cfg.search.model_copy(update={
                "queue": self.queue_for(host), "hosts": [h.name for h in self.cluster.hosts] if chief else None,
                "addresses": {h.name: h.address for h in self.cluster.hosts} if chief else None,
                "key_file": QUEUE_KEY_IN_CONTAINER})
        if self.elastic is not None:
            update["elastic"] = self.elastic
        if cfg.allreduce.auto and cfg.allreduce.link_mbit_s is None and self.link_mbit_s is not None:
            update["allreduce"] = cfg.allreduce.model_copy(update={"link_mbit_s": self.link_mbit_s})
        return cfg.model_copy(update=update) if update else cfg

    def queue_for(self, host: Host) -> str:
        """`serve` on the chief; the chief's address and study port elsewhere."""
        chief = self.cluster.chief
        if host.name == chief.name:
            return "serve"
        address = f"[{chief.address}]" if ":" in chief.address else chief.address
        return f"{address}:{self.study_port}"

    @property
    def study_port(self) -> int:
        return self.cluster.spec.train_or_defaults.search.port

    def listen_port(self, host: Host) -> Optional[int]:
        """The port the host's container will listen on: TensorFlow's, or in parallel mode the
        chief's study port (the other hosts listen on none)."""
        if not self.parallel:
            return host.tf_port
        return self.study_port if host.name == self.cluster.chief.name else None


QUEUE_KEY_IN_CONTAINER = "/config/queue.key"


def make(cluster: Cluster) -> Plan:
    code = code_hash(cluster.code_dir)
    parallel = cluster.spec.run is None and cluster.spec.train_or_defaults.search.mode == "parallel"
    elastic = cluster.spec.elastic
    return Plan(cluster=cluster, code_hash=code, config_id=config_id(cluster, code),
                container_image=container_image(cluster.spec.image, code if cluster.spec.run else None),
                parallel=parallel, elastic=None if elastic is None or cluster.spec.run is not None else
                ElasticRun(batch=elastic.batch, workers_at_start=len(cluster.hosts)))


def complete(plan: Plan, nics: dict[str, str], gpu_overrides: dict[str, Any], image_id: str = "",
             dataset_digest: str = "") -> Plan:
    """The plan of an `up` that knows its hosts and what they will run: a rebuilt image or a changed
    dataset_source is then another configuration (a new run, new containers), as a changed inventory is."""
    return replace(plan, nics=nics, gpu_overrides=gpu_overrides,
                   config_id=config_id(plan.cluster, plan.code_hash, image=image_id, data=dataset_digest))


def reformed(plan: Plan, lost: list[str], record: Reform) -> Plan:
    """An elastic run's next generation: the hosts left, renumbered in their order (the chief
    first), on TensorFlow ports one higher (an old member that wakes with its old TF_CONFIG
    cannot join), with the re-form told to the trainer (results.json keeps it)."""
    kept = [h for h in plan.cluster.hosts if h.name not in lost]
    hosts = tuple(replace(h, index=i, chief=i == 0, tf_port=h.tf_port + 1) for i, h in enumerate(kept))
    elastic = plan.elastic.model_copy(update={"reforms": [*plan.elastic.reforms, record]})
    return replace(plan, cluster=replace(plan.cluster, hosts=hosts), elastic=elastic)


def taken_back(plan: Plan, first: Plan, joining: list[str], record: Reform) -> Plan:
    """An elastic run's next generation with hosts it had lost taken back (elastic.rejoin): the
    hosts training now keep their order (the chief, which holds the search's state, stays chief),
    the returning ones after them, every TensorFlow port the inventory's plus the generation."""
    back = [first.cluster.host(name) for name in joining]
    moved = [*(replace(h, tf_port=h.tf_port + 1) for h in plan.cluster.hosts),
             *(replace(h, tf_port=h.tf_port + record.generation) for h in back)]
    hosts = tuple(replace(h, index=i, chief=i == 0) for i, h in enumerate(moved))
    elastic = plan.elastic.model_copy(update={"reforms": [*plan.elastic.reforms, record]})
    return replace(plan, cluster=replace(plan.cluster, hosts=hosts), elastic=elastic)


def resumed(plan: Plan, earlier: list[Reform], now) -> Plan:
    """An elastic run resumed by a later `up` (it had stopped): the re-forms made before, then this
    one if it brings back hosts the last generation lacked, every host of the inventory again on
    its own TensorFlow port (no container of before is left: backups.before_resume), so that
    results.json, the generation and max_reforms_per_hour count the whole run, not this `up`'s part."""
    last, names = earlier[-1], [h.name for h in plan.cluster.hosts]
    back = [n for n in names if n not in last.hosts_after]
    record = [Reform(generation=last.generation + 1, at=reform_at(now), lost=[], joined=back, hosts_after=names,
                     why="resumed by `up` after the run stopped", workers_before=len(last.hosts_after))] if back else []
    return replace(plan, elastic=plan.elastic.model_copy(update={"reforms": [*earlier, *record]}))


def named(plan: Plan, run: str) -> Plan:
    """The plan of the run `up` starts or resumes (or that a command attaches to)."""
    return replace(plan, run_id=run)


def measured(plan: Plan, link_mbit_s: Optional[float]) -> Plan:
    """The plan with the slowest link's throughput (None: not measured), to 3 significant digits."""
    return replace(plan, link_mbit_s=None if link_mbit_s is None else float(f"{link_mbit_s:.3g}"))


# How the image reaches the hosts does not change what they run: no new containers for it.
# How the launcher reaches the hosts (and ships to them), and where they keep their leases, is not
# what they run: the same run, however reached. How the hosts were made ready (`bootstrap:`) neither.
# Where a run is tracked is not what the hosts run either (and its URI may hold a token): only
# whether the trainer writes its best model in MLflow format counts, and only when it does. What the
# launcher samples while it watches (telemetry) is not what runs either.
NOT_IN_CONFIG = {"image_relay": True, "telemetry": True, "bootstrap": True, "ssh": {"proxy_jump", "lost_after_s"}, "defaults": {"lease_dir"},
                 "elastic": {"min_hosts", "lost_after_s", "rejoin", "rejoin_after_s", "max_reforms_per_hour"},  # when
                 # the launcher re-forms, not what the hosts run
                 "hosts": {"__all__": {"proxy_jump", "lease_dir"}}, "tracking": True}
HOST_NOT_IN_CONFIG = ("jumps", "proxy_command", "lease_dir")   # left out, so an id made before they existed holds


def config_id(cluster: Cluster, code: str, **contents: str) -> str:
    spec = cluster.spec.model_dump(mode="json", exclude=NOT_IN_CONFIG)
    for section in (spec, spec.get("train") or {}):     # unset, a key added later keeps the ids made before it
        if section.get("elastic", 0) is None:
            del section["elastic"]
    doc = {"spec": spec, "code": code,
           "hosts": [{k: v for k, v in vars(h).items() if k not in HOST_NOT_IN_CONFIG} | {"identity_file": None}
                     for h in cluster.hosts]}
    doc.update({k: v for k, v in contents.items() if v})
    if cluster.tracking is not None:
        doc["mlflow_model"] = True
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:12]


SKIPPED = {"__pycache__", ".git"}     # never part of your code's layer, so never part of its hash


def code_files(folder: Path) -> Iterator[Path]:
    """What of `folder` becomes your code's layer, in order: folders, regular files and links,
    skipping SKIPPED folders; sockets, FIFOs and devices are nothing a program reads from an image."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED)
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                yield path


def code_hash(folder: Optional[Path]) -> str:
    """Hash of what the code layer holds: each entry's relative name (as bytes: any name a file
    system allows), and a file's bytes or a link's target."""
    if folder is None or not folder.is_dir():
        return ""
    digest = hashlib.sha256()
    for path in code_files(folder):
        digest.update(os.fsencode(path.relative_to(folder)) + b"\0")
        if path.is_symlink():
            digest.update(b"-> " + os.fsencode(os.readlink(path)))
        elif path.is_file():
            _hash_file(digest, path)
        digest.update(b"\0")
    return digest.hexdigest()


def _hash_file(digest, path: Path) -> None:
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read this file of run.code_dir ({exc.strerror or exc}). "
                             "Expected every file in code_dir to be readable.") from None


def container_image(image: str, code: Optional[str]) -> str:
    return image if code is None else sibling_tag(image, f"run-{code[:12]}")


def sibling_tag(image: str, tag: str) -> str:
    """The same repository as `image` (a registry's :port is not a tag) under another tag."""
    last = image.rsplit("/", 1)[-1]
    repo = image.rsplit(":", 1)[0] if ":" in last else image
    return f"{repo}:{tag}"


def expect_gpus(gpus) -> str:
    """TFC_EXPECT_GPUS: what the trainer checks TensorFlow sees."""
    return ",".join(map(str, gpus)) if isinstance(gpus, list) else str(gpus)
