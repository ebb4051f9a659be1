"""Where the trainer's settings come from besides the model's defaults (was in config.py): the
config file read as YAML under bounds, and the overrides laid over it, dotted keys from flags and
TFC_TRAIN_* variables, their values parsed as YAML."""
from __future__ import annotations

import os
from typing import Any

from trainer.spec import yamlfile
from trainer.spec.errors import ConfigError


def parse_yaml(text: str, where: str) -> Any:
    return yamlfile.parse(text, where, ConfigError).data


def read_config_file(path: str | os.PathLike) -> dict:
    doc = yamlfile.load(path, "the config file", ConfigError)
    if doc.data is None:
        return {}
    if not isinstance(doc.data, dict):
        raise ConfigError(f"{path}: (top level): Received {type(doc.data).__name__}. Expected a mapping of settings.")
    return doc.data


def apply_override(data: dict, dotted: str, value: Any) -> dict:
    """Set `a.b.c` in a nested dict copy: flags and env vars override the YAML."""
    out = dict(data)
    head, _, rest = dotted.partition(".")
    if rest:
        inner = out.get(head)
        out[head] = apply_override(inner if isinstance(inner, dict) else {}, rest, value)
    else:
        out[head] = value
    return out


def env_overrides(environ: dict[str, str]) -> list[tuple[str, Any]]:
    """TFC_TRAIN_EPOCHS=3, TFC_TRAIN_DATASET__IMAGE_SIZE=[32,32]: values parsed as YAML."""
    prefix = "TFC_TRAIN_"
    found = []
    for key in sorted(environ):
        if key.startswith(prefix) and environ[key] != "":
            dotted = key[len(prefix):].lower().replace("__", ".")
            found.append((dotted, parse_yaml(environ[key], key)))
    return found
