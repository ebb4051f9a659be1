"""`python -m trainer`: config → TF_CONFIG → data → strategy → search → chief-only results.

Configuration and TF_CONFIG are checked before TensorFlow is imported, so bad input fails in
a fraction of a second with one line naming the field, and exit code 2.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

from trainer.cluster import rank
from trainer.cluster.tfconfig import ClusterInfo, is_chief, parse_tf_config
from trainer.spec.config import TrainConfig
from trainer.spec.errors import ConfigError, ExitCode, TfcError
from trainer.spec.load import load_config
from trainer.spec.overrides import env_overrides, parse_yaml

SHORTCUTS = {  # flag → config field; every other field through --set key=value
    "epochs": "epochs", "candidates": "candidates", "results_dir": "results_dir",
    "batch_per_replica": "batch_per_replica", "learning_rate": "learning_rate",
    "strategy": "strategy", "join_timeout_s": "join_timeout_s", "seed": "seed",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parser().parse_args(argv)


def parser() -> argparse.ArgumentParser:
    """`python -m trainer`'s flags (the docs' trainer reference is written from it)."""
    p = argparse.ArgumentParser(prog="python -m trainer", description="MultiWorkerMirroredStrategy model search.")
    p.add_argument("--config", help="train.yaml (defaults apply to what it leaves out)")
    for flag in SHORTCUTS:
        p.add_argument("--" + flag.replace("_", "-"), dest=flag, metavar="VALUE",
                       help=f"override `{flag}`" + (" (comma-separated)" if flag == "candidates" else ""))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any field, e.g. --set dataset.image_size=[32,32] (value parsed as YAML)")
    p.add_argument("--debug", action="store_true", help="show a traceback on failure")
    return p


def overrides_from(args: argparse.Namespace) -> list[tuple[str, object]]:
    found = env_overrides(dict(os.environ))
    for flag, key in SHORTCUTS.items():
        raw = getattr(args, flag)
        if raw is not None:
            value = [c.strip() for c in raw.split(",") if c.strip()] if flag == "candidates" else parse_yaml(raw, "--" + flag)
            found.append((key, value))
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set: Received {item!r}. Expected KEY=VALUE, e.g. epochs=3.")
        found.append((key.strip(), parse_yaml(raw, f"--set {key}")))
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cfg = load_config(args.config, overrides_from(args))
        rank.apply(os.environ)  # Kubernetes or Slurm: TF_CONFIG from the scheduler's variables
        info = parse_tf_config(os.environ.get("TF_CONFIG"))
        if cfg.search.mode == "parallel" and info.is_multi_worker:
            raise ConfigError(f"search.mode: Received 'parallel' with {info.num_workers} tasks in TF_CONFIG. Expected no "
                      "TF_CONFIG: in parallel mode each host trains its own trials alone.")
        return run(cfg, info)
    except TfcError as exc:
        if args.debug:
            raise
        for line in str(exc).splitlines():
            print(f"tfcompose trainer: {line}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        if args.debug or not _is_tensorflow_error(exc):
            raise
        # A peer died or the collective failed: say so in one line, then leave at once, since
        # MWMS teardown can block on the dead peer (tensorflow#39922).
        first = (getattr(exc, "message", None) or str(exc)).strip().splitlines()[0][:300]
        print(f"tfcompose trainer: training failed ({type(exc).__name__}): {first} "
              "A peer was lost or the collective failed; restart the whole cluster.", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(int(ExitCode.FAILED))


def _is_tensorflow_error(exc: BaseException) -> bool:
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(exc, tf.errors.OpError)


def log(message: str) -> None:
    print(message, flush=True)


def search_with(cfg: TrainConfig, info: ClusterInfo, strategy, data, chief: bool):
    """(this worker's state, every trial's record, the search's settings, whether this worker
    writes results.json, what results.json says of every host in parallel mode): one trial loop
    (trial_loop.run_trials) over the source the search needs."""
    from trainer.search import trial_loop
    if not cfg.search.uses_study:
        source = trial_loop.GridSource(cfg, info.task_name, strategy, log)
        return trial_loop.run_trials(source, cfg, info.task_name, strategy, data, chief, log), None, {}, chief, {}
    if cfg.search.mode == "parallel":
        return search_in_parallel(cfg, info, strategy, data)
    source = trial_loop.StudySource(cfg, info.task_name, strategy, chief, log)
    state = trial_loop.run_trials(source, cfg, info.task_name, strategy, data, chief, log)
    if not chief:
        return state, [], {}, False, {}
    source.study.export(Path(cfg.results_dir) / "study.db")
    return state, source.study.records(), search_settings(cfg, source.study), True, {}


def search_settings(cfg: TrainConfig, study) -> dict:
    """results.json's `search`: what was searched and how, and why it ended early if it did."""
    from trainer.spec.space import max_epochs, rungs
    from trainer.search.trial_loop import budget
    settings = {"sampler": cfg.search.sampler, "pruner": cfg.search.pruner, "trials": budget(cfg),
                "min_epochs": cfg.search.min_epochs, "reduction_factor": cfg.search.reduction_factor,
                "max_epochs": max_epochs(cfg), "rungs": rungs(cfg)}
    note = study.stopped_because() if study is not None else ""
    return {**settings, **({"note": note} if note else {})}


def search_in_parallel(cfg: TrainConfig, info: ClusterInfo, strategy, data):
    """This host's trials from the chief's queue; on the chief (which serves the queue to the
    others when the launcher gave it a cluster) also every trial's record and the hosts' summary."""
    from trainer.search import queue as q, queue_client, trial_loop, wire
    from trainer.search.coordinator import Coordinator
    from trainer.spec.progress import SEARCH_FILE
    from trainer.train.trial import backup_root
    from trainer.search.study import Study
    host = os.environ.get("TFC_HOST", "") or info.task_name
    if cfg.search.queue not in (None, "serve"):
        key = wire.read_key(Path(cfg.search.key_file)) if cfg.search.key_file else wire.new_key()
        channel = queue_client.Client(cfg.search.queue, host, key, patience_s=2 * cfg.search.lost_after_s,
                           first_patience_s=cfg.join_timeout_s)
        state = trial_loop.run_trials(trial_loop.QueueSource(cfg, info.task_name, strategy, channel, log),
                                      cfg, info.task_name, strategy, data, True, log)
        return state, [], {}, False, {}
    study = Study(cfg, backup_root(cfg, info.task_name), log)
    coordinator = Coordinator(study, cfg.search.lost_after_s, log, hosts=cfg.search.hosts, classes=data.num_classes,
                              folder=Path(cfg.backup_dir or Path(cfg.results_dir) / "backup"),
                              progress=Path(cfg.results_dir) / SEARCH_FILE, own=host)
    server = stopped = None
    if cfg.search.queue == "serve":          # the launcher's cluster: the other hosts call in
        run_key = wire.read_key(Path(cfg.search.key_file)) if cfg.search.key_file else wire.new_key()
        addresses = cfg.search.addresses or {}
        gate = wire.Gate(run_key, wire.resolve(addresses, log) if addresses else None)
        server, stopped = q.serve(coordinator, gate, cfg.search.port, bind=addresses.get(host, "0.0.0.0"))
        log(f"[{info.task_name}] serving the trial queue on {addresses.get(host, '*')}:{cfg.search.port}")
    else:
        import threading
        stopped = threading.Event()
        threading.Thread(target=coordinator.watch, args=(stopped,), daemon=True).start()
    try:
        source = trial_loop.QueueSource(cfg, info.task_name, strategy, queue_client.Local(coordinator, host), log)
        state = trial_loop.run_trials(source, cfg, info.task_name, strategy, data, True, log)
        q.wait_for_done(coordinator, grace_s=3 * q.WAIT_S)
        coordinator.write_progress(finished=True)
        study.export(Path(cfg.results_dir) / "study.db")
        said = coordinator.summary()
        hosts = said.pop("hosts")
        settings = {**search_settings(cfg, study), "hosts": sorted(hosts),
                    "lost": {h: retries for h, retries in hosts.items() if retries}}
        records = [{**r, "history": f"hosts/{r['host']}/{r['history']}" if r.get("history") else ""}
                   for r in study.records()]
        return state, records, settings, True, said
    finally:
        if server is not None:
            q.stop(server, stopped)
        elif stopped is not None:
            stopped.set()


def run(cfg: TrainConfig, info: ClusterInfo) -> int:
    # Imported here: TensorFlow takes seconds to import, bad input should not wait for it.
    log(f"[{info.task_name}] importing TensorFlow")
    from trainer.train import mlflow_model
    from trainer.train.trial import remove_backups
    mlflow_model.prepare(log)       # with `tracking:`: MLflow imported now, not when the best model is saved

    started = dt.datetime.now(dt.timezone.utc)
    chief = is_chief(info)
    check_candidates(cfg)
    strategy = form_cluster(cfg, info, chief)
    if chief and cfg.elastic is not None:
        adopt_chief_state(cfg, info)
    data = load_data(cfg, info)
    if chief:
        write_hparams_experiment(cfg, info)
    state, records, search, writer, every_host = search_with(cfg, info, strategy, data, chief)
    if writer and not (records if records is not None else state.done):
        log(f"[{info.task_name}] no trial was trained to the end; no results.json")
    elif writer:
        write_results(cfg, info, (state, records, search, every_host), strategy.num_replicas_in_sync, data, started)
    remove_backups(cfg, info.task_name)
    leave(strategy, info, chief)
    return int(ExitCode.OK)


def check_candidates(cfg: TrainConfig) -> None:
    """Unknown candidates, and arguments a builder does not take, fail before the cluster forms."""
    from trainer.train import models
    for name in cfg.candidates:
        models.resolve(name)
    for candidate, values in cfg.search.hyperparameters.items():
        models.check_hyperparameters(candidate, values)


def form_cluster(cfg: TrainConfig, info: ClusterInfo, chief: bool):
    """The strategy (MWMS under the join watchdog, or one host's own), said in one line."""
    from trainer.cluster import strategy as strategy_mod
    gpus = strategy_mod.check_gpus(os.environ.get("TFC_EXPECT_GPUS"))
    if not gpus:        # said in the kit's words; TensorFlow's own CUDA lines are filtered (trainer/quiet.py)
        log(f"[{info.task_name}] no GPU on this host: training on CPU")
    strategy = strategy_mod.build(cfg, info, gpus, log)
    replicas = strategy.num_replicas_in_sync
    if cfg.search.mode == "parallel":
        log(f"[{info.task_name}] parallel search: this host trains its own trials alone, {replicas} replica(s)"
            + ("; it serves the trial queue" if cfg.search.queue in (None, "serve") else ""))
    else:
        from trainer.cluster.elastic import batch_and_rate
        global_batch, _ = batch_and_rate(cfg.batch_per_replica, cfg.learning_rate, replicas,
                                         info.num_workers or 1, cfg.elastic)
        log(f"[{info.task_name}] cluster ready: {info.num_workers or 1} worker(s), {replicas} replica(s), "
            f"{'chief' if chief else 'worker'}; global batch {global_batch}" + elastic_line(cfg))
    return strategy


def adopt_chief_state(cfg: TrainConfig, info: ClusterInfo) -> None:
    """A host made chief by an elastic re-form takes the state the lost chief mirrored to it (its
    study, history and best model) before anything opens them."""
    from trainer.train import mirror
    from trainer.train.trial import backup_root, own_name
    said = mirror.adopt(backup_root(cfg, info.task_name), Path(cfg.results_dir), own_name(info.task_name))
    if said is not None:
        log(f"[{info.task_name}] chief now: took {str(said.get('host'))[:40]}'s state as mirrored after "
            f"{str(said.get('trial'))[:200]} epoch {str(said.get('epoch'))[:10]} (its study, history and best model)")


def elastic_line(cfg: TrainConfig) -> str:
    """An elastic run's generation, said beside the cluster's size."""
    if cfg.elastic is None or not cfg.elastic.reforms:
        return ""
    last = cfg.elastic.reforms[-1]
    change = f"re-formed without {', '.join(last.lost)}" if last.lost else f"took back {', '.join(last.joined)}"
    return f"; generation {last.generation} ({change}; elastic.batch {cfg.elastic.batch})"


def load_data(cfg: TrainConfig, info: ClusterInfo):
    from trainer.train import data as data_mod, models
    data = data_mod.load(cfg.dataset, cfg.seed)
    models.check_min_size(cfg.candidates, data.input_shape)
    log(f"[{info.task_name}] data: {data.train_count} training and {data.val_count} validation images, "
        f"{data.num_classes} classes, input {data.input_shape}")
    if data.skipped:
        log(f"[{info.task_name}] data: skipped {len(data.skipped)} file(s) that cannot be decoded: "
            + ", ".join(data.skipped[:10]) + (" …" if len(data.skipped) > 10 else ""))
    return data


def write_hparams_experiment(cfg: TrainConfig, info: ClusterInfo) -> None:
    from trainer.train import hparams
    try:
        hparams.write_experiment(cfg, Path(cfg.results_dir) / "tensorboard")
    except (TypeError, ValueError) as exc:     # a nicety: the search goes on without its dashboard
        log(f"[{info.task_name}] TensorBoard's HParams dashboard not written: {exc}")


def write_results(cfg: TrainConfig, info: ClusterInfo, found: tuple, replicas: int, data, started) -> None:
    """results.json (the chief's, or each parallel host's own), and the leaderboard in the log."""
    from trainer.spec.results import leaderboard, results_doc, write_json_atomic
    state, records, search, every_host = found
    workers = len(search.get("hosts", [])) if cfg.search.mode == "parallel" else info.num_workers or 1
    elastic = cfg.elastic.model_dump(mode="json") if cfg.elastic is not None and cfg.elastic.reforms else None
    doc = results_doc(state, workers, replicas, data, started, cfg.search.mode, cfg.precision, records, search or None,
                      elastic)
    doc.update(every_host)      # parallel: replicas summed, restarts the most, where each trial ran
    write_json_atomic(Path(cfg.results_dir) / "results.json", doc)
    log("\n" + leaderboard(doc["candidates"]))
    log(f"best: {doc['best']['candidate']} (val_accuracy {doc['best']['val_accuracy']:.4f}); "
        f"results in {cfg.results_dir}")


def leave(strategy, info: ClusterInfo, chief: bool) -> None:
    """The others wait here while the chief writes (no container exits before the results exist),
    and a worker leaves after its chief (see watchdog.wait_until_gone)."""
    from trainer.cluster import strategy as strategy_mod
    strategy_mod.barrier(strategy)
    if info.is_multi_worker and not chief:      # (parallel mode has no TF_CONFIG cluster: refused in main)
        from trainer.cluster.watchdog import wait_until_gone
        wait_until_gone(info.tasks()[0][1])
