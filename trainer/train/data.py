"""Datasets: an OASIS-style image folder (one sub-folder per class) or generated images.

Pipeline: decode in parallel (AUTOTUNE) → cache → shuffle → batch(global, per trial) → prefetch, with the
auto-shard policy set to DATA explicitly: file-based sharding cannot apply to a list of paths
and TensorFlow would otherwise fall back to DATA with a warning on every worker.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf

from trainer.train import synth
from trainer.spec.config import DatasetConfig
from trainer.spec.errors import DataError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif"}


@dataclass
class Data:
    """Decoded, cached examples; `batches()` makes the batched pipelines for one trial."""

    train_examples: tf.data.Dataset
    val_examples: tf.data.Dataset
    input_shape: tuple[int, int, int]
    class_names: list[str]
    train_count: int
    val_count: int
    val_labels: np.ndarray  # in the order `val` yields them (not shuffled), for a confusion matrix

    seed: int = 0
    skipped: list[str] = field(default_factory=list)   # files that could not be decoded, left out

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def batches(self, global_batch: int) -> tuple[tf.data.Dataset, tf.data.Dataset]:
        """(train, val) batched by the global batch: shuffled (seeded) training, ordered validation."""
        return (_finish(self.train_examples, global_batch, self.seed, shuffle=True),
                _finish(self.val_examples, global_batch, self.seed, shuffle=False))


def load(cfg: DatasetConfig, seed: int) -> Data:
    channels = 1 if cfg.color_mode == "grayscale" else 3
    if cfg.kind == "synthetic":
        return _synthetic(cfg, channels, seed)
    return _image_folder(cfg, channels, seed)


def _synthetic(cfg: DatasetConfig, channels: int, seed: int) -> Data:
    h, w = cfg.image_size
    names = synth.class_names(cfg.classes)
    x_train, y_train = synth.make_images(cfg.classes, cfg.per_class, (h, w), 1, seed)
    x_val, y_val = synth.make_images(cfg.classes, max(2, cfg.per_class // synth.VAL_FRACTION), (h, w), 1, seed + 1)
    if channels == 3:
        x_train, x_val = (np.repeat(x, 3, axis=-1) for x in (x_train, x_val))
    to_float = lambda x, y: (tf.cast(x, tf.float32) / 255.0, y)  # noqa: E731
    train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).map(to_float, tf.data.AUTOTUNE).cache()
    val = tf.data.Dataset.from_tensor_slices((x_val, y_val)).map(to_float, tf.data.AUTOTUNE).cache()
    return Data(train, val, (h, w, channels), names, len(y_train), len(y_val), y_val, seed)


def list_class_folder(root: Path, where: str) -> tuple[list[str], list[str], list[int]]:
    """Class names (sorted sub-folders), image paths and their labels."""
    try:
        return _list_class_folder(root, where)
    except PermissionError as exc:
        raise DataError(f"{where}: cannot read {exc.filename} (permission denied for uid {os.getuid()}). "
                        "Expected a folder readable by the user the trainer runs as.") from None


def _list_class_folder(root: Path, where: str) -> tuple[list[str], list[str], list[int]]:
    if not root.is_dir():
        raise DataError(f"{where}: Received {str(root)!r}. Expected a folder with one sub-folder per class.")
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    paths, labels = [], []
    for label, name in enumerate(names):
        files = sorted(p for p in (root / name).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths += [str(p) for p in files]
        labels += [label] * len(files)
    if len(names) < 2 or not paths:
        raise DataError(f"{where}: {root} has {len(names)} class folder(s) and {len(paths)} image(s). "
                        "Expected ≥ 2 class sub-folders holding .png/.jpg images.")
    return names, paths, labels


def split_validation(paths: list[str], labels: list[int], fraction: float, seed: int):
    """Seeded, stratified hold-out of `fraction` of each class (at least one image per class)."""
    rng = np.random.default_rng(seed)
    labels_arr = np.asarray(labels)
    val_idx = []
    for label in np.unique(labels_arr):
        idx = np.flatnonzero(labels_arr == label)
        rng.shuffle(idx)
        val_idx.extend(idx[: max(1, round(len(idx) * fraction))])
    is_val = np.zeros(len(paths), bool)
    is_val[val_idx] = True
    pick = lambda mask: ([p for p, m in zip(paths, mask) if m], labels_arr[mask].tolist())  # noqa: E731
    return pick(~is_val), pick(is_val)


def _image_folder(cfg: DatasetConfig, channels: int, seed: int) -> Data:
    names, paths, labels = list_class_folder(Path(cfg.train_dir), "dataset.train_dir")
    if cfg.val_dir:
        val_names, val_paths, val_labels = list_class_folder(Path(cfg.val_dir), "dataset.val_dir")
        if val_names != names:
            raise DataError(f"dataset.val_dir: classes {val_names} differ from train_dir's {names}. "
                            "Expected the same class sub-folders.")
        train_paths, train_labels = paths, labels
    else:
        (train_paths, train_labels), (val_paths, val_labels) = split_validation(paths, labels, cfg.validation_split, seed)
    skipped = undecodable(train_paths + val_paths, channels)
    if skipped:
        train_paths, train_labels = _without(train_paths, train_labels, skipped)
        val_paths, val_labels = _without(val_paths, val_labels, skipped)
        if not train_paths or not val_paths:
            raise DataError(f"dataset: none of the images of {'train' if not train_paths else 'validation'} can be "
                            f"decoded (first: {skipped[0]}). Expected PNG, JPEG, BMP or GIF files.")
    decode = _decoder(cfg.image_size, channels)
    train = tf.data.Dataset.from_tensor_slices((train_paths, train_labels)).map(decode, tf.data.AUTOTUNE).cache()
    val = tf.data.Dataset.from_tensor_slices((val_paths, val_labels)).map(decode, tf.data.AUTOTUNE).cache()
    h, w = cfg.image_size
    return Data(train, val, (h, w, channels), names, len(train_paths), len(val_paths), np.asarray(val_labels), seed,
                skipped)


def undecodable(paths: list[str], channels: int) -> list[str]:
    """The files TensorFlow cannot decode, found in one parallel pass before training. Every worker
    finds the same ones, so the workers' datasets stay identical for DATA sharding."""
    if not paths:
        return []
    names = tf.constant(paths)

    def probe(i):
        image = tf.io.decode_image(tf.io.read_file(names[i]), channels=channels, expand_animations=False)
        return i, tf.shape(image)[0]  # using the image keeps the decode from being pruned

    ok = tf.data.Dataset.range(len(paths)).map(probe, tf.data.AUTOTUNE).ignore_errors()
    good = {int(i) for i, _ in ok.as_numpy_iterator()}
    return [p for i, p in enumerate(paths) if i not in good]


def _without(paths: list[str], labels: list[int], skipped: list[str]) -> tuple[list[str], list[int]]:
    gone = set(skipped)
    kept = [(p, label) for p, label in zip(paths, labels) if p not in gone]
    return [p for p, _ in kept], [label for _, label in kept]


def _decoder(size: tuple[int, int], channels: int):
    def decode(path, label):
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        image = tf.image.resize(tf.cast(image, tf.float32) / 255.0, size)
        return image, label
    return decode


def _finish(ds: tf.data.Dataset, global_batch: int, seed: int, shuffle: bool) -> tf.data.Dataset:
    if shuffle:
        ds = ds.shuffle(4096, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(global_batch).prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)
