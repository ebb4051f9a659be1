"""TF_CONFIG: parsed and checked before TensorFlow sees it, and the one `is_chief()`."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from trainer.spec.errors import ConfigError

TRAINING_JOBS = ("chief", "worker")
KNOWN_JOBS = ("chief", "worker", "evaluator", "ps")
ADDRESS = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})$")


@dataclass(frozen=True)
class ClusterInfo:
    """Who this process is in the cluster. `cluster` holds only the training jobs."""

    task_type: str = "worker"
    task_index: int = 0
    cluster: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def num_workers(self) -> int:
        return sum(len(self.cluster.get(job, ())) for job in TRAINING_JOBS)

    @property
    def is_multi_worker(self) -> bool:
        return self.num_workers > 1

    @property
    def task_name(self) -> str:
        return f"{self.task_type}:{self.task_index}"

    def tasks(self) -> list[tuple[str, str]]:
        """(task name, address) of every training task, chief first."""
        return [(f"{job}:{i}", addr) for job in TRAINING_JOBS
                for i, addr in enumerate(self.cluster.get(job, ()))]

    def peers(self) -> list[tuple[str, str]]:
        return [(name, addr) for name, addr in self.tasks() if name != self.task_name]


def is_chief(info: ClusterInfo) -> bool:
    """The chief task, or worker 0 when there is no chief job (TensorFlow's own rule)."""
    if info.task_type == "chief":
        return True
    return info.task_type == "worker" and info.task_index == 0 and "chief" not in info.cluster


MAX_TF_CONFIG = 1 << 20


def parse_tf_config(raw: str | None) -> ClusterInfo:
    """Parse TF_CONFIG; absent or empty means a single worker."""
    if raw is None or not raw.strip():
        return ClusterInfo()
    if len(raw) > MAX_TF_CONFIG:
        raise ConfigError(f"TF_CONFIG: Received {len(raw):,} characters. Expected at most {MAX_TF_CONFIG:,} "
                          "(a cluster of hosts and ports).")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"TF_CONFIG: not valid JSON ({exc.msg} at character {exc.pos}).") from None
    except RecursionError:
        raise ConfigError("TF_CONFIG: nested too deeply. Expected an object with `cluster` and `task`.") from None
    if not isinstance(doc, dict):
        raise ConfigError("TF_CONFIG: Received a JSON " + type(doc).__name__ + ". Expected an object with `cluster` and `task`.")
    unknown = sorted(set(doc) - {"cluster", "task", "environment", "rpc_layer"})
    if unknown:
        raise ConfigError(f"TF_CONFIG: Unknown key {unknown[0]!r}. Expected only cluster, task, environment, rpc_layer.")
    cluster = _parse_cluster(doc.get("cluster"))
    task_type, task_index = _parse_task(doc.get("task"), cluster)
    training = {job: tuple(cluster[job]) for job in TRAINING_JOBS if job in cluster}
    return ClusterInfo(task_type, task_index, training)


def _parse_cluster(cluster) -> dict[str, list[str]]:
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError("TF_CONFIG: cluster: Received " + _show(cluster) + ". Expected a non-empty object of job → address list.")
    seen: set[str] = set()
    for job, addresses in cluster.items():
        if job not in KNOWN_JOBS:
            raise ConfigError(f"TF_CONFIG: cluster.{job}: Unknown job. Expected one of {', '.join(KNOWN_JOBS)}.")
        if not isinstance(addresses, list) or not addresses:
            raise ConfigError(f"TF_CONFIG: cluster.{job}: Received {_show(addresses)}. Expected a non-empty list of host:port.")
        for i, addr in enumerate(addresses):
            _check_address(f"cluster.{job}[{i}]", addr, seen)
    if "ps" in cluster:
        raise ConfigError("TF_CONFIG: cluster.ps: parameter servers are not supported. Expected only chief, worker (and evaluator).")
    for job, limit in (("chief", 1), ("evaluator", 1)):
        if len(cluster.get(job, [])) > limit:
            raise ConfigError(f"TF_CONFIG: cluster.{job}: Received {len(cluster[job])} addresses. Expected at most {limit}.")
    if not any(job in cluster for job in TRAINING_JOBS):
        raise ConfigError("TF_CONFIG: cluster: no chief or worker job. Expected at least one training task.")
    return cluster


def _check_address(path: str, addr, seen: set[str]) -> None:
    match = ADDRESS.match(addr) if isinstance(addr, str) else None
    if not match or not 1 <= int(match["port"]) <= 65535:
        raise ConfigError(f"TF_CONFIG: {path}: Received {_show(addr)}. Expected host:port with a port 1–65535.")
    if addr in seen:
        raise ConfigError(f"TF_CONFIG: {path}: Received {addr!r} twice. Expected each task at its own host:port.")
    seen.add(addr)


def _parse_task(task, cluster) -> tuple[str, int]:
    if not isinstance(task, dict):
        raise ConfigError("TF_CONFIG: task: Received " + _show(task) + ". Expected an object {type, index}.")
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type == "evaluator":
        raise ConfigError("TF_CONFIG: task.type: Received 'evaluator'. Expected chief or worker "
                          "(side-car evaluation is not supported: the chief evaluates every candidate).")
    if task_type not in TRAINING_JOBS or task_type not in cluster:
        raise ConfigError(f"TF_CONFIG: task.type: Received {_show(task_type)}. Expected a job of the cluster: "
                          + ", ".join(j for j in TRAINING_JOBS if j in cluster) + ".")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(cluster[task_type]):
        raise ConfigError(f"TF_CONFIG: task.index: Received {_show(index)}. Expected an integer 0–{len(cluster[task_type]) - 1} "
                          f"for job {task_type!r}.")
    return task_type, index


def _show(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
