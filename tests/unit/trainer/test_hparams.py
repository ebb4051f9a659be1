"""TensorBoard's HParams dashboard (trainer/hparams.py): the experiment's dimensions as written."""
from __future__ import annotations

from trainer import hparams
from trainer.config import TrainConfig


def test_a_choice_of_whole_and_fractional_numbers_makes_one_numeric_dimension(tmp_path):
    cfg = TrainConfig.model_validate({"candidates": ["small_cnn"], "search": {
        "sampler": "random", "trials": 2, "learning_rate": [1, 0.01],
        "hyperparameters": {"small_cnn": {"dropout": [0, 0.25], "width": [16, 32]}}}})
    hparams.write_experiment(cfg, tmp_path)          # tensorboard's Discrete wants one dtype
    assert list(tmp_path.glob("events.out.tfevents.*"))
    assert hparams._domain([0, 0.25]).values == [0.0, 0.25] and hparams._domain([16, 32]).values == [16, 32]
    assert hparams._domain(["a", 1]).values == ["1", "a"]
