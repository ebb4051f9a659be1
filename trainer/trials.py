"""Trials (candidate × learning rate × batch size) and their cost, with no TensorFlow import:
the launcher places trials on hosts with these."""
from __future__ import annotations

from dataclasses import dataclass, field

from trainer import space
from trainer.config import TrainConfig
from trainer.errors import ConfigError

UNKNOWN_PARAMS = 1_000_000  # a user candidate's size cannot be known without building it


@dataclass(frozen=True)
class Trial:
    name: str
    candidate: str
    learning_rate: float
    batch_per_replica: int
    hyperparameters: dict = field(default_factory=dict)   # the candidate's own (a builder's arguments)
    number: int = 0                                       # the study's trial number (0: a grid without one)
    seq: int = 0                                          # its place in the search's budget (0: a retry)

    @classmethod
    def of(cls, name: str, candidate: str, values: dict, number: int = 0, seq: int = 0) -> "Trial":
        """From the values a grid point or a sampler chose (space.dimensions' names)."""
        own = {k: v for k, v in values.items() if k not in ("learning_rate", "batch_per_replica")}
        return cls(name, candidate, float(values["learning_rate"]), int(values["batch_per_replica"]), own, number, seq)


def expand(cfg: TrainConfig, only: bool = True) -> list[Trial]:
    """Every trial of a grid, in order; `search.only` (one host's share) filters them."""
    search = cfg.search
    trials = [Trial.of(p["name"], p["candidate"], p["values"]) for p in space.grid(cfg)]
    if only and search.only:
        names = {t.name for t in trials}
        unknown = [n for n in search.only if n not in names]
        if unknown:
            raise ConfigError(f"search.only: Received {unknown[0]!r}. Expected one of the trials: {', '.join(sorted(names))}.")
        trials = [t for t in trials if t.name in search.only]
    return trials


def estimate_params(candidate: str, image_size: tuple[int, int], channels: int, classes: int) -> int:
    """Parameters of a registry architecture, by formula (checked against Keras in the tests)."""
    h, w = image_size
    head = lambda width: width * classes + classes  # noqa: E731
    if candidate == "small_cnn":
        flat = ((h - 2) // 2) * ((w - 2) // 2) * 32
        return (9 * channels * 32 + 32) + (flat * 64 + 64) + head(64)
    if candidate == "deep_cnn":
        convs, previous = 0, channels
        for filters in (128, 256, 512):
            # a bias-free convolution, then batch normalisation (gamma, beta, moving mean and variance)
            convs, previous = convs + 9 * previous * filters + 4 * filters, filters
        return convs + head(512)
    if candidate == "vgg16":
        return 14_714_688 + head(512)
    if candidate == "resnet50":
        return 23_587_712 + head(2048)
    return UNKNOWN_PARAMS


def place(trials: list[Trial], hosts: list[str], cfg: TrainConfig, channels: int, classes: int) -> dict[str, list[str]]:
    """Longest-first onto the least-loaded host: balances parameters × images (× epochs)."""
    load = {h: 0 for h in hosts}
    placed: dict[str, list[str]] = {h: [] for h in hosts}
    cost = lambda t: estimate_params(t.candidate, cfg.dataset.image_size, channels, classes)  # noqa: E731
    for trial in sorted(trials, key=cost, reverse=True):
        host = min(hosts, key=lambda h: (load[h], hosts.index(h)))
        load[host] += cost(trial)
        placed[host].append(trial.name)
    order = {t.name: i for i, t in enumerate(trials)}
    return {h: sorted(names, key=order.get) for h, names in placed.items()}
