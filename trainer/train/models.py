"""Candidate architectures: the four of the original script, plus user ones by import path.

A builder is called as `builder(input_shape, num_classes)` (user candidates) and returns an
uncompiled `tf.keras` model; with TF_USE_LEGACY_KERAS=1, `tf.keras` is tf_keras.
Every model is built inside `strategy.scope()` by the caller.
"""
from __future__ import annotations

import importlib
from typing import Callable

import tensorflow as tf

from trainer.spec.config import BUILTIN_CANDIDATES
from trainer.spec.errors import ConfigError

layers = tf.keras.layers
Builder = Callable[..., tf.keras.Model]


def head(num_classes: int) -> list:
    """The classifier on top of every built-in candidate. The softmax is its own layer in float32:
    under a mixed precision policy the rest computes in float16/bfloat16, but probabilities and
    the loss stay in float32 (the tf.keras mixed precision guide's advice)."""
    return [layers.Dense(num_classes), layers.Activation("softmax", dtype="float32")]


def small_cnn(input_shape, num_classes, weights="none", width=64, dropout=0.0):
    """width: units of the hidden dense layer; dropout: before the classifier."""
    return tf.keras.Sequential([
        layers.Input(input_shape),
        layers.Conv2D(32, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(int(width), activation="relu"),
        *([layers.Dropout(float(dropout))] if dropout else []),
        *head(num_classes),
    ], name="small_cnn")


def deep_cnn(input_shape, num_classes, weights="none", width=128, dropout=0.0):
    """width: filters of the first convolution (then ×2, ×4); dropout: before the classifier."""
    model = tf.keras.Sequential([layers.Input(input_shape)], name="deep_cnn")
    for filters in (int(width), 2 * int(width), 4 * int(width)):
        # Without batch normalisation this deep, globally pooled stack fell into the all-classes-
        # equal answer on small data (val_loss stuck at ln(classes), measured on the simulation's
        # default run). A low momentum lets the statistics used at evaluation catch up within the
        # few steps of a short run (at 0.99 and 0.9 they had not: validation stayed at chance).
        model.add(layers.Conv2D(filters, 3, padding="same", use_bias=False))
        model.add(layers.BatchNormalization(momentum=0.5))
        model.add(layers.Activation("relu"))
        model.add(layers.MaxPooling2D())
    model.add(layers.GlobalAveragePooling2D())
    if dropout:
        model.add(layers.Dropout(float(dropout)))
    for layer in head(num_classes):
        model.add(layer)
    return model


def _application(app: Callable, name: str):
    def build(input_shape, num_classes, weights="none", dropout=0.0):
        inputs = layers.Input(input_shape)
        x = inputs
        if weights == "imagenet":
            if input_shape[-1] == 1:  # ImageNet weights expect three channels
                x = layers.Concatenate()([x, x, x])
            # Inputs are in [0, 1]; the caffe-style applications expect 0–255 minus the ImageNet mean.
            x = layers.Rescaling(255.0)(x)
            x = layers.Normalization(mean=[123.68, 116.779, 103.939], variance=[1.0, 1.0, 1.0])(x)
        base = app(include_top=False, weights=None if weights == "none" else "imagenet",
                   input_shape=tuple(x.shape[1:]))
        base.trainable = weights == "none"  # pretrained: train the new head only
        x = layers.GlobalAveragePooling2D()(base(x))
        if dropout:
            x = layers.Dropout(float(dropout))(x)
        for layer in head(num_classes):
            x = layer(x)
        return tf.keras.Model(inputs, x, name=name)
    return build


REGISTRY: dict[str, Builder] = {
    "small_cnn": small_cnn,
    "vgg16": _application(tf.keras.applications.VGG16, "vgg16"),
    "resnet50": _application(tf.keras.applications.ResNet50, "resnet50"),
    "deep_cnn": deep_cnn,
}


assert set(REGISTRY) == set(BUILTIN_CANDIDATES), "trainer.spec.config.BUILTIN_CANDIDATES must name the registry"


def resolve(name: str) -> Builder:
    """A registry name, or `package.module:function` imported from the Python path."""
    if name in REGISTRY:
        return REGISTRY[name]
    if ":" not in name:
        raise ConfigError(f"candidates: Received {name!r}. Expected one of {', '.join(REGISTRY)} "
                          "or an import path like 'my_models:build'.")
    module_name, func_name = name.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"candidates: cannot import {module_name!r} for {name!r} ({exc}).") from None
    builder = getattr(module, func_name, None)
    if not callable(builder):
        raise ConfigError(f"candidates: {module_name!r} has no function {func_name!r}. "
                          "Expected function(input_shape, num_classes) returning a tf.keras model.")
    return builder


def check_hyperparameters(name: str, names) -> None:
    """A builder must take every hyperparameter the search gives it (said before the cluster forms)."""
    import inspect
    builder = resolve(name)
    try:
        params = inspect.signature(builder).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    unknown = [n for n in names if n not in params]
    if unknown:
        raise ConfigError(f"search.hyperparameters.{name}.{unknown[0]}: Received an argument {name} does not take. "
                          f"Expected one of: {', '.join(p for p in params if p not in ('input_shape', 'num_classes'))}.")


def build(name: str, input_shape, num_classes: int, weights: str, hyperparameters: dict | None = None) -> tf.keras.Model:
    builder, own = resolve(name), dict(hyperparameters or {})
    model = builder(input_shape, num_classes, weights, **own) if name in REGISTRY else \
        builder(input_shape, num_classes, **own)
    if not isinstance(model, tf.keras.Model):
        raise ConfigError(f"candidates: {name!r} returned {type(model).__name__}. Expected a tf.keras model "
                          "(with TF_USE_LEGACY_KERAS=1, build it with tf.keras, not `import keras`).")
    if model.output.dtype != tf.float32:  # a user's model under a mixed policy: the loss in float32
        model = tf.keras.Model(model.inputs, layers.Activation("linear", dtype="float32")(model.output), name=model.name)
    return model


def check_min_size(names: list[str], input_shape) -> None:
    """VGG16 and ResNet50 need images of at least 32×32: say so before any worker starts."""
    for name in names:
        if name in ("vgg16", "resnet50") and min(input_shape[:2]) < 32:
            raise ConfigError(f"dataset.image_size: Received {list(input_shape[:2])}. "
                              f"Expected at least [32, 32] for candidate {name!r}.")
