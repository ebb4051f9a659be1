"""A trainer configuration loaded whole: the file, the overrides (TFC_TRAIN_*, flags), the schema
(config.py), then the search space's own rules (space.py). Above both, so neither imports the other's
loader (config.py once imported space.py inside a function for this: a cycle no contract saw)."""
from __future__ import annotations

from typing import Any

from trainer.spec import space
from trainer.spec.config import TrainConfig
from trainer.spec.errors import ConfigError
from trainer.spec.overrides import apply_override, read_config_file
from trainer.spec.validation import validate


def load_config(path: str | None, overrides: list[tuple[str, Any]] = ()) -> TrainConfig:
    data = read_config_file(path) if path else {}
    for dotted, value in overrides:
        data = apply_override(data, dotted, value)
    cfg = validate(TrainConfig, data, where=path or "config", error=ConfigError)
    found = space.problems(cfg)
    if found:
        raise ConfigError([p.line(path or "config") for p in found])
    return cfg
