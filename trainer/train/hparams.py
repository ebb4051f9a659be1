"""TensorBoard's HParams dashboard for the search: the experiment's dimensions once, at the top of
the TensorBoard folder, and each trial's values in its own run folder, so
`tensorboard --logdir <run>/tensorboard` tables and plots every trial by its values."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from trainer.spec import space
from trainer.spec.config import Range, TrainConfig
from trainer.spec.trials import Trial


def available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def trial_values(trial: Trial) -> dict:
    return {"candidate": trial.candidate, "learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica,
            **{f"{trial.candidate}.{k}": v for k, v in trial.hyperparameters.items()}}


def write_experiment(cfg: TrainConfig, root: Path) -> None:
    """The dimensions and the metrics, once per TensorBoard folder (the chief, at the start)."""
    if not available():
        return
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp
    params = [hp.HParam("candidate", hp.Discrete(list(cfg.candidates)))]
    shared = space.dimensions(cfg, cfg.candidates[0])[:2]
    params += [hp.HParam(d.name, _domain(d.spec)) for d in shared]
    params += [hp.HParam(f"{c}.{name}", _domain(spec)) for c, own in cfg.search.hyperparameters.items()
               for name, spec in own.items()]
    metrics = [hp.Metric("epoch_accuracy", group="validation", display_name="val_accuracy"),
               hp.Metric("epoch_loss", group="validation", display_name="val_loss")]
    root.mkdir(parents=True, exist_ok=True)
    with tf.summary.create_file_writer(str(root)).as_default():
        hp.hparams_config(hparams=params, metrics=metrics)


def callback(trial: Trial, log_dir: Path) -> list:
    """The trial's values, written beside its scalars (tf_keras's TensorBoard callback)."""
    if not available():
        return []
    from tensorboard.plugins.hparams import api as hp
    return [hp.KerasCallback(str(log_dir), trial_values(trial), trial_id=trial.name)]


def _domain(spec):
    from tensorboard.plugins.hparams import api as hp
    if isinstance(spec, Range):
        low, high = spec.bounds
        return hp.IntInterval(int(low), int(high)) if spec.kind.endswith("integer") else hp.RealInterval(float(low), float(high))
    return hp.Discrete(choices(spec))


def choices(spec: list) -> list:
    """A choice's values as one dtype, which tensorboard's Discrete needs: whole numbers or texts
    as they are, whole and fractional numbers all as floats ([0, 0.25]), a mixture as texts."""
    if all(isinstance(v, int) for v in spec) or all(isinstance(v, str) for v in spec):
        return sorted(set(spec), key=str)
    if all(isinstance(v, (int, float)) for v in spec):
        return sorted({float(v) for v in spec})
    return sorted({str(v) for v in spec})
