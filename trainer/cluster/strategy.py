"""Which tf.distribute strategy to build; building MWMS runs under the join watchdog."""
from __future__ import annotations

import tensorflow as tf

from trainer.spec.config import TrainConfig
from trainer.spec.errors import ClusterError, ConfigError
from trainer.cluster.tfconfig import ClusterInfo
from trainer.cluster.watchdog import JoinWatchdog


def check_gpus(expect: str | None) -> list:
    """Fail when the container was given GPUs (TFC_EXPECT_GPUS) that TensorFlow cannot see."""
    found = tf.config.list_physical_devices("GPU")
    wanted = (expect or "0").strip().lower()
    if wanted in ("", "0", "none"):
        return found
    count = None if wanted == "all" else len(wanted.split(",")) if "," in wanted else int(wanted)
    if not found or (count is not None and len(found) < count):
        raise ClusterError(
            f"TensorFlow sees {len(found)} GPU(s) but this container was given {wanted}. Check the NVIDIA "
            "container toolkit, and that the image's cuDNN matches TensorFlow (see README: GPU base images).")
    return found


def choose(cfg: TrainConfig, info: ClusterInfo, gpu_count: int) -> str:
    if cfg.strategy == "multi_worker" or (cfg.strategy == "auto" and info.is_multi_worker):
        return "multi_worker"
    if info.is_multi_worker:
        raise ConfigError(f"strategy: Received {cfg.strategy!r} with {info.num_workers} tasks in TF_CONFIG. "
                          "Expected 'auto' or 'multi_worker' for a multi-worker cluster.")
    if cfg.strategy == "mirrored" or (cfg.strategy == "auto" and gpu_count > 1):
        return "mirrored"
    return "one_device"


def collective_implementation(cfg: TrainConfig, gpu_count: int):
    # In eager TF2, AUTO behaves as RING unless NCCL is asked for by name: ask on GPUs.
    name = cfg.communication
    if name == "auto":
        name = "nccl" if gpu_count > 0 else "ring"
    if name == "nccl" and gpu_count == 0:
        raise ConfigError("communication: Received 'nccl' on a machine without GPUs. Expected 'auto' or 'ring'.")
    impl = tf.distribute.experimental.CommunicationImplementation
    return impl.NCCL if name == "nccl" else impl.RING


def build(cfg: TrainConfig, info: ClusterInfo, gpus: list, log=print) -> tf.distribute.Strategy:
    kind = choose(cfg, info, len(gpus))
    if kind == "one_device":
        # The default strategy (one device, GPU:0 when present): tf_keras BackupAndRestore
        # refuses OneDeviceStrategy but supports this one.
        return tf.distribute.get_strategy()
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy()
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=collective_implementation(cfg, len(gpus)))
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({job: list(addrs) for job, addrs in info.cluster.items()}),
        task_type=info.task_type, task_id=info.task_index, rpc_layer="grpc")
    log(f"[{info.task_name}] joining a cluster of {info.num_workers} tasks "
        f"(waiting up to {cfg.join_timeout_s:g} s for every peer)")
    with JoinWatchdog(info.task_name, info.peers(), cfg.join_timeout_s):
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver, communication_options=options)


def barrier(strategy: tf.distribute.Strategy) -> None:
    """Block until every worker arrives: the others wait while the chief writes its results,
    so that no container exits (and makes compose stop the rest) before the results exist."""
    @tf.function
    def all_reduce_one():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)

    all_reduce_one()
