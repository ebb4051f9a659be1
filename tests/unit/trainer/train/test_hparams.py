"""TensorBoard's HParams dashboard (trainer/train/hparams.py): the experiment's dimensions as written."""
from __future__ import annotations

from trainer.train import hparams


def test_a_choice_of_whole_and_fractional_numbers_makes_one_numeric_dimension():
    # tensorboard's Discrete wants one dtype (the experiment written with such a choice, through
    # TensorFlow: tests/integration/test_search.py, the README's sampled space run again)
    assert hparams.choices([0, 0.25]) == [0.0, 0.25] and hparams.choices([16, 32]) == [16, 32]
    assert hparams.choices(["a", 1]) == ["1", "a"]
