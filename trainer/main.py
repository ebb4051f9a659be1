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

from trainer import rank
from trainer.config import TrainConfig, env_overrides, load_config, parse_yaml
from trainer.errors import ConfigError, ExitCode, TfcError
from trainer.tfconfig import ClusterInfo, is_chief, parse_tf_config
from trainer.trials import expand

SHORTCUTS = {  # flag → config field; every other field through --set key=value
    "epochs": "epochs", "candidates": "candidates", "results_dir": "results_dir",
    "batch_per_replica": "batch_per_replica", "learning_rate": "learning_rate",
    "strategy": "strategy", "join_timeout_s": "join_timeout_s", "seed": "seed",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainer", description="MultiWorkerMirroredStrategy model search.")
    p.add_argument("--config", help="train.yaml (defaults apply to what it leaves out)")
    for flag in SHORTCUTS:
        p.add_argument("--" + flag.replace("_", "-"), dest=flag, metavar="VALUE",
                       help=f"override `{flag}`" + (" (comma-separated)" if flag == "candidates" else ""))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any field, e.g. --set dataset.image_size=[32,32] (value parsed as YAML)")
    p.add_argument("--debug", action="store_true", help="show a traceback on failure")
    return p.parse_args(argv)


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
    writes results.json, what results.json says of every host in parallel mode): the plain grid
    (search.run_search), or a search a study drives."""
    from trainer.search import run_search
    if not cfg.search.uses_study:
        state = run_search(cfg, info.task_name, strategy, data, chief, log)
        return state, None, {}, chief, {}
    from trainer import study_loop
    from trainer.space import rungs
    settings = {"sampler": cfg.search.sampler, "pruner": cfg.search.pruner, "trials": study_loop.budget(cfg),
                "min_epochs": cfg.search.min_epochs, "reduction_factor": cfg.search.reduction_factor,
                "max_epochs": study_loop.space.max_epochs(cfg), "rungs": rungs(cfg)}
    if cfg.search.mode == "parallel":
        state, records, seen = study_loop.run_parallel(cfg, info.task_name, strategy, data, log)
        hosts = seen.pop("hosts", {})
        lost = {h: retries for h, retries in hosts.items() if retries}
        return (state, records, {**settings, "hosts": sorted(hosts), "lost": lost}, cfg.search.queue in (None, "serve"),
                seen)
    state, records = study_loop.run_sync(cfg, info.task_name, strategy, data, chief, log)
    return state, records, settings, chief, {}


def run(cfg: TrainConfig, info: ClusterInfo) -> int:
    # Imported here: TensorFlow takes seconds to import, bad input should not wait for it.
    log(f"[{info.task_name}] importing TensorFlow")
    from trainer import data as data_mod, models, strategy as strategy_mod
    from trainer.results import leaderboard, results_doc, write_json_atomic
    from trainer.search import remove_backups
    from trainer import mlflow_model
    mlflow_model.prepare(log)       # with `tracking:`: MLflow imported now, not when the best model is saved

    started = dt.datetime.now(dt.timezone.utc)
    chief = is_chief(info)
    for name in cfg.candidates:
        models.resolve(name)  # unknown candidates fail before the cluster forms
    if not cfg.search.uses_study:
        expand(cfg)  # and so does a search.only naming no trial
    for candidate, values in cfg.search.hyperparameters.items():
        models.check_hyperparameters(candidate, values)   # so does an argument a builder does not take
    gpus = strategy_mod.check_gpus(os.environ.get("TFC_EXPECT_GPUS"))
    strategy = strategy_mod.build(cfg, info, gpus, log)
    replicas = strategy.num_replicas_in_sync
    log(f"[{info.task_name}] cluster ready: {info.num_workers or 1} worker(s), {replicas} replica(s), "
        f"{'chief' if chief else 'worker'}; global batch {cfg.batch_per_replica * replicas}")
    data = data_mod.load(cfg.dataset, cfg.seed)
    models.check_min_size(cfg.candidates, data.input_shape)
    log(f"[{info.task_name}] data: {data.train_count} training and {data.val_count} validation images, "
        f"{data.num_classes} classes, input {data.input_shape}")
    if data.skipped:
        log(f"[{info.task_name}] data: skipped {len(data.skipped)} file(s) that cannot be decoded: "
            + ", ".join(data.skipped[:10]) + (" …" if len(data.skipped) > 10 else ""))
    if chief:
        from trainer import hparams
        try:
            hparams.write_experiment(cfg, Path(cfg.results_dir) / "tensorboard")
        except (TypeError, ValueError) as exc:     # a nicety: the search goes on without its dashboard
            log(f"[{info.task_name}] TensorBoard's HParams dashboard not written: {exc}")
    state, records, search, writer, every_host = search_with(cfg, info, strategy, data, chief)
    if writer:
        workers = len(search.get("hosts", [])) if cfg.search.mode == "parallel" else info.num_workers or 1
        doc = results_doc(state, workers, replicas, data, started, cfg.search.mode, cfg.precision, records,
                          search or None)
        doc.update(every_host)      # parallel: replicas summed, restarts the most, where each trial ran
        write_json_atomic(Path(cfg.results_dir) / "results.json", doc)
        log("\n" + leaderboard(doc["candidates"]))
        log(f"best: {doc['best']['candidate']} (val_accuracy {doc['best']['val_accuracy']:.4f}); "
            f"results in {cfg.results_dir}")
    remove_backups(cfg, info.task_name)
    # The others wait here while the chief writes: no container exits before the results exist.
    strategy_mod.barrier(strategy)
    return int(ExitCode.OK)
