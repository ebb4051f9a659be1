"""The best model again in MLflow's format (the TensorFlow flavour), beside best_model.keras, for
the launcher to log with the best trial's run and register (launcher/tracking/): the launcher
has no TensorFlow, so the model is saved here, where it was trained.

Asked for by `TFC_MLFLOW_MODEL=1` (set by `up` when the inventory has `tracking:`). Written by
whoever keeps the best model (the chief in sync mode, every host in parallel mode) each time it
changes, so a host stopped once the search is over has already written it. It is a courtesy:
anything that goes wrong is one line in the log, never a failed trial.

The model is read back from the .keras file just saved, outside any strategy: saving the
MultiWorkerMirroredStrategy model on the chief alone would read sync-on-read variables (batch
normalisation's statistics) through an all-reduce the other workers never join.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from trainer.spec.model_files import ENV, FOLDER, SOURCE_KEY
_unavailable: list[str] = []        # why MLflow could not be imported (said once, at the start)


def wanted() -> bool:
    return os.environ.get(ENV, "") == "1"


def prepare(log: Callable[[str], None] = print) -> None:
    """Import MLflow at the start (seconds), so that writing the model later does not hold the
    end of a search up; MLflow's usage telemetry off (the hosts may have no way out, and should
    send nothing anywhere)."""
    if not wanted():
        return
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    try:
        import mlflow.tensorflow  # noqa: F401
    except Exception as exc:  # noqa: BLE001 (not installed, or broken: training goes on)
        _unavailable.append(type(exc).__name__)
        log(f"the best model will not be written in MLflow's format: mlflow cannot be imported in this image "
            f"({type(exc).__name__}: {str(exc)[:200]}); the launcher logs best_model.keras as a file instead")


def export(results: Path, log: Callable[[str], None] = print) -> None:
    """results/best_model.keras → results/mlflow_model/ (written beside, then renamed)."""
    if not wanted() or _unavailable:
        return
    try:
        _export(Path(results))
    except Exception as exc:  # noqa: BLE001
        log(f"the best model was not written in MLflow's format ({type(exc).__name__}: {str(exc)[:300]})")


def _export(results: Path) -> None:
    import hashlib
    import importlib.metadata as meta

    import mlflow
    import mlflow.tensorflow
    import numpy as np
    import tensorflow as tf
    from mlflow.models import Model, ModelSignature
    from mlflow.types.schema import Schema, TensorSpec

    source = results / "best_model.keras"
    made_from = hashlib.sha256(source.read_bytes()).hexdigest()
    model = tf.keras.models.load_model(str(source), compile=False)
    shape = tuple(model.input_shape[1:])
    # Unnamed tensors: pyfunc's predict then takes and gives plain arrays.
    signature = ModelSignature(inputs=Schema([TensorSpec(np.dtype(np.float32), (-1, *shape))]),
                               outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, model.output_shape[-1]))]))
    part, final = results / f".{FOLDER}.part", results / FOLDER
    shutil.rmtree(part, ignore_errors=True)
    mlflow.tensorflow.save_model(
        model, str(part), signature=signature,
        # Named here: MLflow would otherwise load the model in a child process to infer them.
        pip_requirements=[f"tensorflow=={tf.__version__}", f"tf_keras=={meta.version('tf_keras')}",
                          f"mlflow=={mlflow.__version__}"],
        metadata={"tfcompose": {"input": f"float32 images {list(shape)}, pixel values scaled to [0, 1]",
                                "output": "one probability per class, in the order of results.json's class_names",
                                # which best_model.keras this is: a host stopped while writing a newer
                                # best leaves this one, and the launcher then sees it is not the best
                                SOURCE_KEY: made_from}})
    _load_with_tf_keras(part, Model)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(part, final)


def _load_with_tf_keras(folder: Path, Model) -> None:
    """The trainer's models are tf_keras models: say so, so that `mlflow.tensorflow.load_model`
    and pyfunc load them with tf_keras wherever they are loaded (with TensorFlow's default Keras 3
    they would not load at all). MLflow also pickles tf_keras's own registered classes beside the
    model, which a loader then refuses unless pickles are allowed: tf_keras registers them again
    itself when imported, so that file goes."""
    conf = Model.load(str(folder / "MLmodel"))
    conf.flavors["tensorflow"]["keras_module"] = "tf_keras"
    conf.save(str(folder / "MLmodel"))
    (folder / "data" / "keras_module.txt").write_text("tf_keras")
    pickled = folder / "data" / "global_custom_objects.cloudpickle"
    if pickled.exists() and _only_tf_keras_classes():
        pickled.unlink()


def _only_tf_keras_classes() -> bool:
    from tensorflow.keras.saving import get_custom_objects
    return all(getattr(obj, "__module__", "").startswith(("tf_keras.", "keras.")) for obj in get_custom_objects().values())
