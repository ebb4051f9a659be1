"""Trials (candidate × learning rate × batch size × a candidate's own values) and the grid's
list of them, with no TensorFlow import (the trainer checks its config before TensorFlow starts)."""
from __future__ import annotations

from dataclasses import dataclass, field

from trainer.spec import space
from trainer.spec.config import TrainConfig


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


def expand(cfg: TrainConfig) -> list[Trial]:
    """Every trial of a grid, in order."""
    return [Trial.of(p["name"], p["candidate"], p["values"]) for p in space.grid(cfg)]
