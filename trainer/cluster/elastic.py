"""A trial's global batch and learning rate on a cluster that may have shrunk (the inventory's
`elastic:`; the launcher re-forms the survivors, launcher/elastic/).

keep_global: the global batch, steps per epoch and every schedule stay as they were on the whole
cluster; each replica takes a larger share (it must divide evenly). keep_per_replica: each replica
keeps its batch, the global batch shrinks with the cluster, and the learning rate follows it (the
linear scaling rule, Goyal et al. 2017)."""
from __future__ import annotations

from typing import Optional

from trainer.spec.elastic_run import ElasticRun
from trainer.spec.errors import ConfigError


def batch_and_rate(batch_per_replica: int, learning_rate: float, replicas: int, workers: int,
                   elastic: Optional[ElasticRun]) -> tuple[int, float]:
    """(global batch, learning rate) for `replicas` replicas on `workers` hosts training now."""
    if elastic is None or workers >= elastic.workers_at_start:
        return batch_per_replica * replicas, learning_rate
    at_start = replicas * elastic.workers_at_start // workers      # every host trains as many replicas
    if elastic.batch == "keep_per_replica":
        return batch_per_replica * replicas, learning_rate * replicas / at_start
    global_batch = batch_per_replica * at_start
    if global_batch % replicas:
        raise ConfigError(f"elastic.batch keep_global: the global batch {global_batch} ({batch_per_replica} × "
                          f"{at_start} replicas) does not divide among the {replicas} replicas left. Expected a "
                          "batch_per_replica whose global batch every allowed cluster size divides, or "
                          "elastic.batch: keep_per_replica.")
    return global_batch, learning_rate


def workers_of(strategy) -> int:
    """The hosts training together under `strategy` (1 outside a multi-worker cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return 1
    jobs = resolver.cluster_spec().as_dict()
    return max(1, sum(len(jobs.get(job, ())) for job in ("chief", "worker")))
