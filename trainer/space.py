"""The search space: what a trial may be. Pure (no TensorFlow, no Optuna), so `tfcompose
validate` checks a search before any host is contacted and the trainer before the cluster forms.

- `problems`: what cannot be searched as written, each naming its field;
- `grid`: every combination of the lists, in the order and with the names of today's grid
  (`small_cnn@lr=0.01,bs=16`; with hyperparameter lists, `…,width=64`);
- `dimensions`: per candidate, each searched value and what it is drawn from (the study
  samples from these).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Union

from trainer.config import BUILTIN_CANDIDATES, Range, TrainConfig
from trainer.validation import Problem

# The keyword arguments each built-in builder takes (trainer/models.py; a test keeps them equal).
BUILTIN_HYPERPARAMETERS = {"small_cnn": ("width", "dropout"), "deep_cnn": ("width", "dropout"),
                           "vgg16": ("dropout",), "resnet50": ("dropout",)}
assert set(BUILTIN_HYPERPARAMETERS) == set(BUILTIN_CANDIDATES)

Spec = Union[Range, list]


@dataclass(frozen=True)
class Dimension:
    name: str            # learning_rate, batch_per_replica, or a hyperparameter's name
    spec: Spec           # a Range, or a list to choose from


def learning_rate_spec(cfg: TrainConfig) -> Spec:
    search = cfg.search
    return search.learning_rate if search.learning_rate is not None else (search.learning_rates or [cfg.learning_rate])


def batch_spec(cfg: TrainConfig) -> Spec:
    return cfg.search.batch_per_replica or [cfg.batch_per_replica]


def dimensions(cfg: TrainConfig, candidate: str) -> list[Dimension]:
    """What a trial of `candidate` draws: its learning rate, batch size and own hyperparameters."""
    own = cfg.search.hyperparameters.get(candidate, {})
    return [Dimension("learning_rate", learning_rate_spec(cfg)), Dimension("batch_per_replica", batch_spec(cfg)),
            *(Dimension(name, spec) for name, spec in own.items())]


def max_epochs(cfg: TrainConfig) -> int:
    return cfg.search.max_epochs or cfg.epochs


def grid_size(cfg: TrainConfig) -> int:
    total = 0
    for candidate in cfg.candidates:
        sizes = [len(d.spec) if isinstance(d.spec, list) else 0 for d in dimensions(cfg, candidate)]
        total += math.prod(sizes)
    return total


def grid(cfg: TrainConfig) -> list[dict]:
    """Every combination, in today's order: candidate, learning rate, batch size, then the
    candidate's hyperparameters in the order written. Each point: {candidate, name, values}."""
    points = []
    search = cfg.search
    named = bool(search.learning_rates or search.learning_rate or search.batch_per_replica or search.hyperparameters)
    for candidate in cfg.candidates:
        dims = dimensions(cfg, candidate)
        for values in itertools.product(*(d.spec for d in dims)):
            chosen = dict(zip((d.name for d in dims), values))
            points.append({"candidate": candidate, "name": grid_name(candidate, chosen, named), "values": chosen})
    return points


def grid_name(candidate: str, values: dict, named: bool) -> str:
    if not named:
        return candidate
    lr, bs = values["learning_rate"], values["batch_per_replica"]
    extra = "".join(f",{k}={_short(v)}" for k, v in values.items() if k not in ("learning_rate", "batch_per_replica"))
    return f"{candidate}@lr={lr:g},bs={bs}{extra}"


def _short(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def problems(cfg: TrainConfig) -> list[Problem]:
    """What cannot be searched as written; each Problem names its field under `search`."""
    search, found = cfg.search, []

    def bad(key: tuple, received: str, expected: str) -> None:
        found.append(Problem(("search", *key), received, expected))

    if search.learning_rates is not None and search.learning_rate is not None:
        bad(("learning_rate",), "Received both learning_rate and learning_rates", "one of them")
    if search.sampler == "grid":
        for candidate in cfg.candidates:
            for dim in dimensions(cfg, candidate):
                if isinstance(dim.spec, Range):
                    key = (dim.name,) if dim.name in ("learning_rate", "batch_per_replica") else \
                        ("hyperparameters", candidate, dim.name)
                    bad(key, f"Received a range ({dim.spec.kind}) with sampler grid",
                        "a list for a grid, or sampler: random or tpe to sample a range")
        points = grid_size(cfg)
        if search.trials is not None and not found and search.trials > points:
            bad(("trials",), f"Received {search.trials} for a grid of {points} combination(s)",
                f"at most {points}, or sampler: random or tpe")
    elif search.trials is None:
        bad(("trials",), f"Missing with sampler {search.sampler}", "the number of trials to draw")
    if search.max_epochs is not None and search.min_epochs > search.max_epochs:
        bad(("min_epochs",), f"Received {search.min_epochs} with max_epochs {search.max_epochs}", "min_epochs ≤ max_epochs")
    elif search.max_epochs is None and search.pruner != "none" and search.min_epochs > cfg.epochs:
        bad(("min_epochs",), f"Received {search.min_epochs} with epochs {cfg.epochs}", "min_epochs ≤ epochs")
    found += _hyperparameter_problems(cfg)
    return found


def _hyperparameter_problems(cfg: TrainConfig) -> list[Problem]:
    found = []
    for candidate, values in cfg.search.hyperparameters.items():
        where = ("search", "hyperparameters", candidate)
        if candidate not in cfg.candidates:
            found.append(Problem(where, "Received a candidate that is not in candidates",
                                 "one of " + ", ".join(cfg.candidates)))
        elif candidate in BUILTIN_HYPERPARAMETERS:
            accepted = BUILTIN_HYPERPARAMETERS[candidate]
            found += [Problem((*where, name), f"Received {name!r}", f"an argument {candidate} takes: " + ", ".join(accepted))
                      for name in values if name not in accepted]
    return found
