"""Where the trainer's settings come from (trainer/spec/overrides.py): TFC_TRAIN_* variables as
dotted keys, their values parsed as YAML."""
from __future__ import annotations

from trainer.spec.overrides import env_overrides


def test_environment_overrides_parse_yaml_values():
    found = env_overrides({"TFC_TRAIN_EPOCHS": "4", "TFC_TRAIN_DATASET__IMAGE_SIZE": "[24, 24]", "OTHER": "1"})
    assert found == [("dataset.image_size", [24, 24]), ("epochs", 4)]
