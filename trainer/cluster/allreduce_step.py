"""The training step behind `allreduce:` (chosen in allreduce.py), for tf_keras `fit` under any
tf.distribute strategy, and the measurement of one step's arithmetic that `auto` weighs the link
against.

`install` replaces the model *instance's* train_step after compile (as search.keep_step_metrics_local
replaces get_metrics_result):
- the float32 gradients are cast to the wire dtype, all-reduced in ONE call (one packed
  CollectiveReduceV2 of that dtype: every tensor of a call must share it) and cast back;
- float16 without a LossScaleOptimizer is multiplied by a dynamic power-of-two scale first (small
  gradients would flush to zero) and divided after; a window whose reduced gradients are not
  finite is all-reduced again in float32 and the scale halved; it doubles after 1,000 finite ones.
  The reduced values are the same on every worker, so every worker takes the same branch.
  Under mixed_float16 the optimizer's own loss scale does this job: it skips the step on overflow;
- every=N: each worker adds its gradients into local accumulators (sync-on-read, untracked: not
  in checkpoints or saved models); on the Nth step, and on the epoch's last step, the window's
  MEAN is all-reduced and applied once. The optimizer counts updates, not steps (Adam's bias
  correction and any schedule advance once per window).

Conditional all-reduces use `replica_cond`: on CPU, MWMS all-reduces through merge_call, which a
tf.cond branch refuses ("merge_call called while defining a new graph").
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import tensorflow as tf

from trainer.cluster.collectives import gather_ints

WIRE = {"float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16}
SUM = tf.distribute.ReduceOp.SUM
FP16_START, FP16_MAX, FP16_GROWTH = 2.0 ** 15, 2.0 ** 24, 1000


class _Window:
    """Per-worker state of the step (a plain object, so nothing tracks it): the accumulators and
    the float16 scale."""


def gradient_count(model: tf.keras.Model) -> int:
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def agreed_step_ms(model: tf.keras.Model, strategy, input_shape, batch_per_replica: int, repeats: int = 3) -> float:
    """One training step's arithmetic (forward and backward pass of one replica's batch, no
    collective, no update), timed on this worker; then every worker's, through an all-gather: the
    slowest, the same number on every worker. Inference-mode layers: batch normalisation's moving
    statistics stay untouched."""
    x = tf.zeros((batch_per_replica, *input_shape))
    y = tf.zeros((batch_per_replica,), tf.int64)

    def arithmetic():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x, training=False)))
        return tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32)) for g in tape.gradient(loss, model.trainable_variables)])

    step = tf.function(lambda: strategy.run(arithmetic))
    times = []
    for _ in range(repeats + 1):                       # the first call traces
        start = time.perf_counter()
        [v.numpy() for v in strategy.experimental_local_results(step())]
        times.append(time.perf_counter() - start)
    return max(gather_ints(strategy, round(statistics.median(times[1:]) * 1e6))) / 1e3


def install(model: tf.keras.Model, strategy, dtype: str, every: int, steps_per_epoch: int) -> None:
    """Replace the model's train_step (after compile; again after changing `trainable`)."""
    tvars, window = model.trainable_variables, _Window()
    local = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ)
    with strategy.scope():
        if every > 1:
            window.sums = [tf.Variable(tf.zeros(v.shape, tf.float32), aggregation=tf.VariableAggregation.SUM,
                                       name=f"grad_sum_{i}", **local) for i, v in enumerate(tvars)]
        if dtype == "float16" and not _loss_scaled(model.optimizer):
            first = tf.VariableAggregation.ONLY_FIRST_REPLICA
            window.scale = tf.Variable(FP16_START, aggregation=first, name="wire_scale", **local)
            window.finite = tf.Variable(0, dtype=tf.int64, aggregation=first, name="wire_finite", **local)
            window.fallbacks = tf.Variable(0, dtype=tf.int64, aggregation=first, name="wire_fallbacks", **local)
    model._allreduce_window = window   # noqa: SLF001 (tests read the fallbacks; not tracked)
    update = _updater(model, tvars, window, dtype)
    model.train_step = _train_step(model, tvars, window, update, every, steps_per_epoch)
    model.train_function = None        # a fit before this call cached the stock step


def _train_step(model, tvars, window, update, every: int, steps_per_epoch: int):
    def train_step(data):
        x, y, sample_weight = tf.keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x, y, y_pred, sample_weight)
            if _loss_scaled(model.optimizer):
                loss = model.optimizer.get_scaled_loss(loss)
        # dense and present: one packed all-reduce takes neither IndexedSlices (embeddings) nor None
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(tape.gradient(loss, tvars), tvars)]
        if every == 1:
            update(grads)
        else:
            _accumulate(model, window, grads, update, every, steps_per_epoch)
        return model.compute_metrics(x, y, y_pred, sample_weight)
    return train_step


def _accumulate(model, window, grads, update, every: int, steps_per_epoch: int) -> None:
    """Add this step's gradients; on the window's last step (or the epoch's) update with their mean."""
    for total, g in zip(window.sums, grads):
        total.assign_add(g)
    # fit sets the counter to 0 as it starts, at an epoch boundary; the same on every worker
    position = model._train_counter % steps_per_epoch          # noqa: SLF001
    in_window = position % every + 1
    last = tf.logical_or(tf.equal(in_window, every), tf.equal(position, steps_per_epoch - 1))

    def flush(count):
        update([total.read_value() / tf.cast(count, tf.float32) for total in window.sums])
        for total in window.sums:
            total.assign(tf.zeros_like(total))

    replica_cond(last, flush, in_window)


def _updater(model, tvars, window, dtype: str):
    """update(grads), in replica context: the all-reduce on the wire dtype, then one optimizer step."""
    def apply(reduced):
        if _loss_scaled(model.optimizer):
            reduced = model.optimizer.get_unscaled_gradients(reduced)
        model.optimizer.apply_gradients(zip(reduced, tvars), skip_gradients_aggregation=True)

    if dtype == "float16" and not _loss_scaled(model.optimizer):
        return lambda grads: _update_scaled_float16(grads, window, apply)
    return lambda grads: apply(all_reduce(grads, dtype))


def all_reduce(grads, dtype: str, scale=None) -> list:
    """One all-reduce of every gradient, on the wire in `dtype`, back in float32 (÷ scale)."""
    wire = WIRE[dtype]
    sent = [tf.cast(g if scale is None else g * scale, wire) for g in grads]
    reduced = [tf.cast(r, tf.float32) for r in tf.distribute.get_replica_context().all_reduce(SUM, sent)]
    return reduced if scale is None else [r / scale for r in reduced]


def _update_scaled_float16(grads, window, apply) -> None:
    scale = window.scale.read_value()
    reduced = all_reduce(grads, "float16", scale)
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(r)) for r in reduced])

    def fits(scale, reduced):
        grow = window.finite + 1 >= FP16_GROWTH
        window.scale.assign(tf.where(grow, tf.minimum(scale * 2.0, FP16_MAX), scale))
        window.finite.assign(tf.where(grow, tf.constant(0, tf.int64), window.finite + 1))
        apply(reduced)

    def overflowed(scale, grads):   # every worker sees the same reduced values: all come here together
        window.scale.assign(tf.maximum(scale / 2.0, 1.0))
        window.finite.assign(0)
        window.fallbacks.assign_add(1)
        apply(all_reduce(grads, "float32"))      # the same window again, in float32: no step is lost

    replica_cond(finite, fits, scale, reduced)
    replica_cond(tf.logical_not(finite), overflowed, scale, grads)


def replica_cond(pred, fn, *args) -> None:
    """`if pred: fn(*args)` in a replica function, where fn may all-reduce or apply the optimizer:
    merge_call first, the cond in cross-replica context, fn back in replica context (the pattern
    of tf_keras's LossScaleOptimizer). pred must be the same on every worker. Each replica's own
    values go through `args`: a closure would hand every local replica the first one's."""
    def cross(distribution, pred, *args):
        pred = distribution.experimental_local_results(pred)[0]
        tf.__internal__.smart_cond.smart_cond(
            pred, lambda: distribution.extended.call_for_each_replica(fn, args=args), lambda: None)
    tf.distribute.get_replica_context().merge_call(cross, args=(pred, *args))


def _loss_scaled(optimizer) -> bool:
    return isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
