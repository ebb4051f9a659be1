"""One trial: its data, its model, its training and what it leaves behind. Imports the cluster and
the spec.

    trial.py         one trial trained and evaluated (train_trial), the best model saved, backups found
    callbacks.py     the callbacks of our own it trains with: each epoch's line and CSV row, the mirror
    data.py          an image folder or generated images, as a tf.data pipeline
    synth.py         generated images (also a command: `python -m trainer.train.synth`)
    models.py        the built-in candidates and a user's `module:function` builders
    backup.py        each worker's own backup copy, so hosts need no shared disk
    hparams.py       TensorBoard's HParams dashboard for the search
    profile.py       the TensorFlow profiler over chosen steps, and a reader of its traces
    mlflow_model.py  the best model again in MLflow's format, for the launcher to register
"""
