"""The TensorFlow profiler over chosen training steps (`profile_steps`), and a reader of the traces
it writes (`<results_dir>/profile/<task>/**/*.xplane.pb`): bench/lockstep.py and the tests read
them through here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import tensorflow as tf


class StepProfiler(tf.keras.callbacks.Callback):
    """The TensorFlow profiler over training steps [first, last), counted across epochs; once per
    process (the profiler cannot run twice at a time), so only the first trial is traced."""

    _supports_tf_logs = True
    used = False

    def __init__(self, first: int, last: int, log_dir: Path):
        super().__init__()
        self.first, self.last, self.log_dir, self.step, self.on = first, last, log_dir, 0, False

    def on_train_batch_begin(self, batch, logs=None):
        if self.step == self.first and not StepProfiler.used:
            StepProfiler.used = self.on = True
            tf.profiler.experimental.start(str(self.log_dir))

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.on and self.step == self.last:
            self.on = False
            tf.profiler.experimental.stop()

    def on_train_end(self, logs=None):
        if self.on:                      # fewer steps than `last`: keep what was traced
            self.on = False
            tf.profiler.experimental.stop()


@dataclass(frozen=True)
class Event:
    thread: str          # the trace line: "python", "tf_Compute…", "tf_data…", collective threads…
    name: str
    start_ps: int
    duration_ps: int
    top_level: bool      # not nested in an earlier event of the same thread


def host_events(trace: Path) -> Iterator[Event]:
    """Every event on the host CPU plane of one `.xplane.pb`, in time order per thread."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    space.ParseFromString(trace.read_bytes())
    host = next(p for p in space.planes if p.name == "/host:CPU")
    for line in host.lines:
        end_of_parent = -1
        for ev in sorted(line.events, key=lambda e: e.offset_ps):
            top = ev.offset_ps >= end_of_parent
            if top:
                end_of_parent = ev.offset_ps + ev.duration_ps
            yield Event(line.name, host.event_metadata[ev.metadata_id].name, ev.offset_ps, ev.duration_ps, top)


def collective_ops(trace: Path) -> dict[str, int]:
    """How many times each all-reduce op ran in the traced steps (the op's name in the graph)."""
    counts: dict[str, int] = {}
    for ev in host_events(trace):
        if ev.top_level and "CollectiveReduce" in ev.name:
            op = ev.name.split(":")[0]
            counts[op] = counts.get(op, 0) + 1
    return counts


def collective_dtypes(log_dir: Path) -> dict[str, str]:
    """Each all-reduce of the training step's graph → its dtype, by op name. A trace names the ops
    that ran but carries no dtype (only keys and step ids): the graph does. It is the one the
    trainer's TensorBoard callback writes (`tensorboard/<trial>/train/events…`); a traced
    `cond_1/then/_10/cond_1/CollectiveReduceV2` is the graph's `cond_1/CollectiveReduceV2`."""
    from tensorflow.core.util import event_pb2
    found: dict[str, str] = {}
    for events in sorted(Path(log_dir).rglob("events.out.tfevents*")):
        for record in tf.data.TFRecordDataset(str(events)):
            event = event_pb2.Event.FromString(record.numpy())
            if not event.HasField("graph_def"):
                continue
            graph = tf.compat.v1.GraphDef.FromString(event.graph_def)
            for node in [*graph.node, *(n for f in graph.library.function for n in f.node_def)]:
                if "CollectiveReduce" in node.op:
                    found[node.name] = tf.dtypes.as_dtype(node.attr["T"].type).name
    return found
