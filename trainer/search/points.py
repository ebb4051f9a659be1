"""A search's points, without Optuna: how a trial's values are named in the study, when two trials
are the same point, and an untried point taken directly once the sampler keeps repeating itself
(listed from a countable space, else drawn at random). Pure: the study (study.py) asks."""
from __future__ import annotations

import itertools
import json
import math
import random
from typing import Iterator, Optional

from trainer.spec import space
from trainer.spec.config import Range, TrainConfig

ENUMERABLE = 100_000     # a countable space up to this size is listed to find an untried point
SHARED = ("learning_rate", "batch_per_replica")


def value_key(candidate: str, name: str) -> str:
    """A value's name in the study: the learning rate and batch size are shared; a candidate's own
    hyperparameters are its own (TPE then models them per candidate)."""
    return name if name in SHARED else f"{candidate}.{name}"


def point_key(params: dict) -> str:
    """What makes two trials the same: the candidate and every value drawn for it."""
    return json.dumps(params, sort_keys=True, default=str)


def params_of(candidate: str, values: dict) -> dict:
    return {"candidate": candidate, **{value_key(candidate, k): v for k, v in values.items()}}


def all_points(cfg: TrainConfig) -> Iterator[dict]:
    """Every point of a countable space, candidate by candidate."""
    for candidate in cfg.candidates:
        dims = space.dimensions(cfg, candidate)
        for values in itertools.product(*(space.choices(d.spec) for d in dims)):
            yield params_of(candidate, dict(zip((d.name for d in dims), values)))


def untried(cfg: TrainConfig, seed: int, size: Optional[int], tried: dict) -> Optional[dict]:
    """A point never tried (`tried`: point keys): listed from a countable space (None when there is
    none left), else drawn at random from the space until one is new. The same study state gives
    the same point (the seed and the number tried choose it)."""
    rng = random.Random(seed * 1_000_003 + len(tried))
    if size is not None and size <= ENUMERABLE:
        left = [p for p in all_points(cfg) if point_key(p) not in tried]
        return rng.choice(left) if left else None
    for _ in range(1000):
        candidate = rng.choice(list(cfg.candidates))
        point = params_of(candidate, {d.name: draw(rng, d.spec) for d in space.dimensions(cfg, candidate)})
        if point_key(point) not in tried:
            return point
    return None


def draw(rng: random.Random, spec):
    """One value from a list or a range, uniformly (log-uniformly for log ranges)."""
    if not isinstance(spec, Range):
        return rng.choice(list(spec))
    low, high = spec.bounds
    if spec.kind == "integer":
        return rng.randint(int(low), int(high))
    if spec.kind == "log_integer":
        return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
    if spec.kind == "log_uniform":
        return math.exp(rng.uniform(math.log(low), math.log(high)))
    return rng.uniform(low, high)
