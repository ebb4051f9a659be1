"""A trial's global batch and learning rate on a cluster that lost hosts (elastic.batch)."""
from __future__ import annotations

import pytest

from trainer.cluster.elastic import batch_and_rate
from trainer.spec.elastic_run import ElasticRun
from trainer.spec.errors import ConfigError


def test_keep_global_keeps_the_global_batch_and_the_rate_and_each_replica_takes_more():
    elastic = ElasticRun(batch="keep_global", workers_at_start=3)
    assert batch_and_rate(16, 0.003, 3, 3, elastic) == (48, 0.003)          # the whole cluster: as before
    assert batch_and_rate(16, 0.003, 2, 2, elastic) == (48, 0.003)          # 24 per replica on 2 hosts
    assert batch_and_rate(16, 0.003, 4, 2, ElasticRun(workers_at_start=3)) == (96, 0.003)   # 2 GPUs per host


def test_keep_global_refuses_a_batch_that_does_not_divide_among_the_replicas_left():
    with pytest.raises(ConfigError, match="global batch 75 .* does not divide among the 2 replicas"):
        batch_and_rate(25, 0.01, 2, 2, ElasticRun(batch="keep_global", workers_at_start=3))


def test_keep_per_replica_shrinks_the_global_batch_and_scales_the_rate_with_it():
    elastic = ElasticRun(batch="keep_per_replica", workers_at_start=4)
    glob, rate = batch_and_rate(32, 0.004, 3, 3, elastic)
    assert glob == 96 and rate == pytest.approx(0.003)


def test_without_elastic_nothing_changes():
    assert batch_and_rate(32, 0.01, 2, 2, None) == (64, 0.01)
