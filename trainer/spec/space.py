"""The search space: what a trial may be. Pure (no TensorFlow, no Optuna), so `tfcompose
validate` checks a search before any host is contacted and the trainer before the cluster forms.

- `problems`: what cannot be searched as written, each naming its field;
- `grid`: every combination of the lists, in the order and with the names of today's grid
  (`small_cnn@lr=0.01,bs=16`; with hyperparameter lists, `…,width=64`);
- `dimensions`: per candidate, each searched value and what it is drawn from (the study
  samples from these).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

from trainer.spec.config import BUILTIN_CANDIDATES, Range, TrainConfig
from trainer.spec.results import safe_name
from trainer.spec.validation import Problem

# The keyword arguments each built-in builder takes (trainer/train/models.py; a test keeps them equal).
BUILTIN_HYPERPARAMETERS = {"small_cnn": ("width", "dropout"), "deep_cnn": ("width", "dropout"),
                           "vgg16": ("dropout",), "resnet50": ("dropout",)}
assert set(BUILTIN_HYPERPARAMETERS) == set(BUILTIN_CANDIDATES)

Spec = Union[Range, list]
# What a searched value may be, by name: (the check of one value, what is expected, whole numbers
# only). Width and dropout are the built-ins' (a user builder's arguments are its own business).
LIMITS = {"learning_rate": (lambda v: 0 < v <= 10, "learning rates > 0 and ≤ 10", False),
          "batch_per_replica": (lambda v: 1 <= v <= 65536, "batch sizes, whole numbers 1–65536", True),
          "width": (lambda v: 1 <= v <= 65536, "widths, whole numbers 1–65536", True),
          "dropout": (lambda v: 0 <= v < 1, "dropout rates ≥ 0 and < 1", False)}
# A trial's own names: a hyperparameter called so would be taken for them.
RESERVED = ("learning_rate", "batch_per_replica", "candidate")
# Enough for any builder; bounds what the chief sends every worker about a trial (one collective).
MAX_HYPERPARAMETERS = 16
# The most trials a whole grid may hold without `trials:` (the most `trials:` allows, too).
MAX_GRID = 10_000


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


def rungs(cfg: TrainConfig) -> list[int]:
    """The epochs at which the pruner judges trials: min_epochs × reduction_factor^k before max_epochs
    (a trial at its last epoch is not judged: nothing is left to save)."""
    if cfg.search.pruner == "none":
        return []
    out, epoch = [], cfg.search.min_epochs
    while epoch < max_epochs(cfg):
        out.append(epoch)
        epoch *= cfg.search.reduction_factor
    return out


def choices(spec: Spec):
    """The values a dimension can take when they can be counted: a list's, or an integer range's;
    None for a range of real numbers."""
    if not isinstance(spec, Range):
        return list(spec)
    if spec.kind in ("integer", "log_integer"):
        low, high = (int(b) for b in spec.bounds)
        return range(low, high + 1)
    return None


def candidate_size(cfg: TrainConfig, candidate: str):
    """How many distinct trials `candidate` has (None: it has a range of real numbers)."""
    counts = [choices(d.spec) for d in dimensions(cfg, candidate)]
    return None if any(c is None for c in counts) else math.prod(len(c) for c in counts)


def space_size(cfg: TrainConfig):
    """How many distinct trials the search can draw (None: infinitely many). Computed, never built:
    ten lists of ten values are 10^10 points, which no chief could hold."""
    sizes = [candidate_size(cfg, c) for c in cfg.candidates]
    return None if any(s is None for s in sizes) else sum(sizes)


def grid_size(cfg: TrainConfig) -> int:
    """The grid's combinations (lists only; a range counts as none)."""
    total = 0
    for candidate in cfg.candidates:
        total += math.prod(len(d.spec) if isinstance(d.spec, list) else 0 for d in dimensions(cfg, candidate))
    return total


def _named(cfg: TrainConfig) -> bool:
    search = cfg.search
    return bool(search.learning_rates or search.learning_rate or search.batch_per_replica or search.hyperparameters)


def grid_point(cfg: TrainConfig, index: int) -> dict:
    """The grid's point `index` (0-based) in today's order — candidate, learning rate, batch size,
    then the candidate's hyperparameters as written, the last varying fastest — without building
    the others: {candidate, name, values}."""
    for candidate in cfg.candidates:
        dims = dimensions(cfg, candidate)
        lists = [choices(d.spec) for d in dims]
        size = math.prod(len(values) for values in lists)
        if index < size:
            chosen = {}
            for dim, values in zip(reversed(dims), reversed(lists)):
                index, at = divmod(index, len(values))
                chosen[dim.name] = values[at]
            chosen = {d.name: chosen[d.name] for d in dims}
            return {"candidate": candidate, "name": grid_name(candidate, chosen, _named(cfg)), "values": chosen}
        index -= size
    raise IndexError("past the grid's last point")


def grid(cfg: TrainConfig, limit: int | None = None) -> list[dict]:
    """The grid's points in order (at most `limit`: the first ones, none built past it)."""
    total = grid_size(cfg)
    return [grid_point(cfg, i) for i in range(total if limit is None else min(limit, total))]


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
        elif search.trials is None and not found and points > MAX_GRID:
            bad(("trials",), f"Missing for a grid of {points:,} combinations",
                f"a grid of at most {MAX_GRID:,}, or `trials:` to train the first ones (or sampler: random or tpe)")
    elif search.trials is None:
        bad(("trials",), f"Missing with sampler {search.sampler}", "the number of trials to draw")
    if search.max_epochs is not None and search.min_epochs > search.max_epochs:
        bad(("min_epochs",), f"Received {search.min_epochs} with max_epochs {search.max_epochs}", "min_epochs ≤ max_epochs")
    elif search.max_epochs is None and search.pruner != "none" and search.min_epochs > cfg.epochs:
        bad(("min_epochs",), f"Received {search.min_epochs} with epochs {cfg.epochs}", "min_epochs ≤ epochs")
    elif search.pruner != "none" and not rungs(cfg):
        bad(("min_epochs",), f"Received {search.min_epochs} with {max_epochs(cfg)} epochs: no rung before the last "
            f"epoch, so {search.pruner} would never stop a trial", "min_epochs < the epochs a trial trains")
    found += _hyperparameter_problems(cfg) + _value_problems(cfg) + _name_problems(cfg)
    return found


def _value_problems(cfg: TrainConfig) -> list[Problem]:
    """Searched values outside what they may be (LIMITS): a learning rate of 0, a batch of 2.5."""
    found, checked = [], set()
    for candidate in cfg.candidates:
        builtin = candidate in BUILTIN_HYPERPARAMETERS
        for dim in dimensions(cfg, candidate):
            shared = dim.name in ("learning_rate", "batch_per_replica")
            key = (dim.name,) if shared else ("hyperparameters", candidate, dim.name)
            if key in checked or dim.name not in LIMITS or not (shared or builtin):
                continue
            checked.add(key)
            received = _outside(dim.spec, *LIMITS[dim.name])
            if received:
                found.append(Problem(("search", *key), f"Received {received}", LIMITS[dim.name][1]
                                     + (" (a list, or an integer or log_integer range)" if LIMITS[dim.name][2] else "")))
    return found


def _outside(spec: Spec, fits, _expected: str, whole: bool):
    """The first value (or range) of `spec` that does not fit; None when all do."""
    if isinstance(spec, Range):
        if whole and spec.kind not in ("integer", "log_integer"):
            return f"a {spec.kind} range"
        return None if all(fits(b) for b in spec.bounds) else f"{spec.kind}: {list(spec.bounds)}"
    for value in spec:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (whole and not isinstance(value, int)) or not fits(value):
            return repr(value)
    return None


def _hyperparameter_problems(cfg: TrainConfig) -> list[Problem]:
    found = []
    for candidate, values in cfg.search.hyperparameters.items():
        where = ("search", "hyperparameters", candidate)
        if candidate not in cfg.candidates:
            found.append(Problem(where, "Received a candidate that is not in candidates",
                                 "one of " + ", ".join(cfg.candidates)))
            continue
        reserved = [name for name in values if name in RESERVED]
        if reserved:
            found.append(Problem((*where, reserved[0]), f"Received {reserved[0]!r}, a name every trial has",
                                 "another name (learning_rate and batch_per_replica are searched under search:)"))
        if len(values) > MAX_HYPERPARAMETERS:
            found.append(Problem(where, f"Received {len(values)} hyperparameters", f"at most {MAX_HYPERPARAMETERS}"))
        if candidate in BUILTIN_HYPERPARAMETERS:
            accepted = BUILTIN_HYPERPARAMETERS[candidate]
            found += [Problem((*where, name), f"Received {name!r}", f"an argument {candidate} takes: " + ", ".join(accepted))
                      for name in values if name not in accepted]
    return found


# --- names: one trial, one name, one file ------------------------------------------------------
# A trial is named by its candidate and values (grid_name), and its history file, backups and
# TensorBoard run by that name made safe for a file system (results.safe_name), compared without
# case: a run collected onto macOS or Windows lands on a file system that ignores it. Two trials
# with one name would write one history file and one TensorBoard run, and the leaderboard could not
# tell them apart; so a duplicate is refused where it is written, rather than renamed: a grid trains
# each combination once, and a value written twice (or two that print alike) is a slip to fix.
SAME_FILE = "names that stay apart as file names (letters, digits and ._@=,- are kept, the rest become _; case is ignored)"


def file_key(name: str) -> str:
    """What a name becomes as a file name, on a file system that ignores case too."""
    return safe_name(name).lower()


def _name_problems(cfg: TrainConfig) -> list[Problem]:
    """Candidates whose files would be one, and values of one list that would name one trial."""
    found, seen = [], {}
    for name in cfg.candidates:
        other = seen.setdefault(file_key(name), name)
        if other != name:
            files = sorted({f"history/{safe_name(n)}.csv" for n in (other, name)})
            found.append(Problem(("candidates",), f"Received {other!r} and {name!r}, which name one file "
                                 f"({' and '.join(files)}{' where case is ignored' if len(files) > 1 else ''})",
                                 SAME_FILE))
    checked = set()
    for candidate in cfg.candidates:
        for dim in dimensions(cfg, candidate):
            shared = dim.name in ("learning_rate", "batch_per_replica")
            key = ("learning_rates" if dim.name == "learning_rate" and cfg.search.learning_rates else dim.name,) \
                if shared else ("hyperparameters", candidate, dim.name)
            if isinstance(dim.spec, list) and key not in checked:
                checked.add(key)
                found += _twice(key, dim)
    return found


def _twice(key: tuple, dim: Dimension) -> list[Problem]:
    """The first two values of a list that name one trial (the same value twice, or two that print alike)."""
    form = (lambda v: f"{v:g}") if dim.name == "learning_rate" else _short
    seen: dict[str, int] = {}
    for i, value in enumerate(dim.spec):
        shown = form(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
        first = dim.spec[seen.setdefault(file_key(shown), i)]
        if seen[file_key(shown)] != i:
            what = f"{value!r} twice" if first == value and type(first) is type(value) else \
                f"{first!r} and {value!r}, which name one trial's files ({dim.name}={shown})"
            return [Problem(("search", *key), f"Received {what}", "each value once: a trial is named by its values")]
    return []
