"""How the study asks Optuna for a trial (was in study.py): a point fixed beforehand (a grid's, a
retry's) enqueued and asked, or the sampler's draw, which may not repeat a point already tried —
it is asked again (RESAMPLES times), then an untried point is taken directly. A repeated draw is
kept in study.db as a failed trial marked `tfc:duplicate_of`, which nothing counts."""
from __future__ import annotations

from trainer.search.points import point_key, untried
from trainer.search.samplers import suggest
from trainer.search.study_records import DUPLICATE
from trainer.spec import space
from trainer.spec.config import TrainConfig

# Draws of the sampler in a row that may repeat a tried point before an untried one is taken directly.
RESAMPLES = 8


def suggest_all(cfg: TrainConfig, handle) -> dict:
    """Every value of the trial (a sampled one drawn now; an enqueued one as it was fixed)."""
    candidate = handle.suggest_categorical("candidate", list(cfg.candidates))
    for dim in space.dimensions(cfg, candidate):
        suggest(handle, candidate, dim)
    return dict(handle.params)


def enqueued(study, cfg: TrainConfig, params: dict, attrs: dict):
    """A trial of fixed values (and user attributes), asked."""
    study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)
    handle = study.ask()
    suggest_all(cfg, handle)
    return handle


def sampled(study, cfg: TrainConfig, tried: dict[str, int], seed: int, size: int):
    """The sampler's draw, unless it repeats a point of `tried`: then again, then an untried point;
    None when the space is used up."""
    import optuna
    for _ in range(RESAMPLES):
        handle = study.ask()
        key = point_key(suggest_all(cfg, handle))
        if key not in tried:
            return handle
        handle.set_user_attr(DUPLICATE, tried[key])
        study.tell(handle, state=optuna.trial.TrialState.FAIL)
    point = untried(cfg, seed, size, tried)
    return None if point is None else enqueued(study, cfg, point, {})


def tried(trials: list) -> dict[str, int]:
    """Every point of `trials` (the counted ones) and its first trial's number."""
    found = {}
    for t in trials:
        if "candidate" in t.params:
            found.setdefault(point_key(t.params), t.number)
    return found
