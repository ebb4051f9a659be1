"""tfcompose trainer: MultiWorkerMirroredStrategy model search, run as `python -m trainer`.

Importing this package must not import TensorFlow: `__main__` sets TF_USE_LEGACY_KERAS first.
"""
