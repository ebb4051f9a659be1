"""The search's sampler and pruner by name, as Optuna makes them (was in study.py), and one
value of a trial suggested to Optuna (a range as a number drawn, a list as a choice).

The registries: each name the config allows (trainer/spec/config.py's SAMPLERS, PRUNERS) → how
Optuna makes it. A new sampler or pruner is one name there and one line here.
"""
from __future__ import annotations

from trainer.search.points import value_key
from trainer.spec import space
from trainer.spec.config import PRUNERS, SAMPLERS, Range, TrainConfig

SAMPLER = {
    "grid": lambda optuna, cfg, seed: optuna.samplers.RandomSampler(seed=seed),   # the points are enqueued, asked in order
    "random": lambda optuna, cfg, seed: optuna.samplers.RandomSampler(seed=seed),
    "tpe": lambda optuna, cfg, seed: optuna.samplers.TPESampler(seed=seed),
}
PRUNER = {
    "none": lambda optuna, cfg: optuna.pruners.NopPruner(),
    "asha": lambda optuna, cfg: optuna.pruners.SuccessiveHalvingPruner(
        min_resource=cfg.search.min_epochs, reduction_factor=cfg.search.reduction_factor),
    "hyperband": lambda optuna, cfg: optuna.pruners.HyperbandPruner(
        min_resource=cfg.search.min_epochs, max_resource=space.max_epochs(cfg), reduction_factor=cfg.search.reduction_factor),
}
assert set(SAMPLER) == set(SAMPLERS) and set(PRUNER) == set(PRUNERS), "the config's names and the registries differ"


def sampler(cfg: TrainConfig, seed: int):
    import optuna
    return SAMPLER[cfg.search.sampler](optuna, cfg, seed)


def pruner(cfg: TrainConfig):
    import optuna
    return PRUNER[cfg.search.pruner](optuna, cfg)


def suggest(handle, candidate: str, dim: space.Dimension):
    """One of the trial's values: drawn now if sampled, as it was fixed if enqueued."""
    key = value_key(candidate, dim.name)
    spec = dim.spec
    if not isinstance(spec, Range):
        return handle.suggest_categorical(key, list(spec))
    low, high = spec.bounds
    if spec.kind in ("integer", "log_integer"):
        return handle.suggest_int(key, low, high, log=spec.kind == "log_integer")
    return handle.suggest_float(key, low, high, log=spec.kind == "log_uniform")
