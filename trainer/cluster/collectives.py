"""What the workers of one MultiWorkerMirroredStrategy cluster tell each other outside training:
small all-gathers, so that every worker takes the same decision at the same moment (a decision
taken on one worker alone would leave the others waiting in a collective it never joins)."""
from __future__ import annotations

import json
from typing import Optional

import numpy as np
import tensorflow as tf

from trainer.spec.errors import ClusterError

SHARED_BYTES = 16384        # a trial's description, as JSON: far less

_GATHERS: dict[tuple, tf.types.experimental.GenericFunction] = {}


def _gather(strategy: tf.distribute.Strategy, value: np.ndarray) -> np.ndarray:
    """Every replica's `value`, stacked (replica 0, the chief's first, first). One traced
    function per strategy and shape: a new trace per call would warn and waste time."""
    key = (id(strategy), value.shape, value.dtype.str)
    if key not in _GATHERS:
        @tf.function
        def all_gather(v):
            return strategy.gather(strategy.run(lambda: tf.expand_dims(v, 0)), axis=0)
        _GATHERS[key] = all_gather
    return _GATHERS[key](tf.constant(value)).numpy()


def gather_ints(strategy: tf.distribute.Strategy, value: int) -> list[int]:
    """Every worker's `value` (one entry per replica), through a collective all-gather."""
    return [int(v) for v in _gather(strategy, np.array(value, np.int64))]


def chief_says(strategy: tf.distribute.Strategy, decision: int) -> int:
    """The chief's `decision` on every worker (what the others pass is not looked at)."""
    return gather_ints(strategy, decision)[0]


def share_json(strategy: tf.distribute.Strategy, doc: Optional[dict]) -> dict:
    """The chief's `doc` on every worker (the others pass None)."""
    data = json.dumps(doc).encode() if doc is not None else b""
    if len(data) > SHARED_BYTES - 1:
        raise ClusterError(f"a trial's description is {len(data)} bytes, more than the {SHARED_BYTES - 1} shared")
    buf = np.zeros(SHARED_BYTES, np.int32)
    buf[0] = len(data)
    buf[1:1 + len(data)] = np.frombuffer(data, np.uint8)
    first = _gather(strategy, buf)[0]
    return json.loads(bytes(first[1:1 + int(first[0])].astype(np.uint8)))
