"""Real TensorFlow: two MultiWorkerMirroredStrategy processes on loopback, and one alone."""
from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
import time

import pytest

from support.common import FIXTURES, free_ports, tf_config
from support.golden import assert_golden

pytestmark = pytest.mark.integration
CANDIDATES = "small_cnn,user_models:tiny_cnn"
EPOCH_FIGURES = re.compile(r"\] (\S+ epoch \d+/\d+ loss=.* val_accuracy=\S+) \d+ img/s")


def trainer_args(image_folder, results, *extra):
    return ["--epochs", "2", "--candidates", CANDIDATES, "--results-dir", str(results),
            "--batch-per-replica", "16", "--join-timeout-s", "120",
            "--set", "dataset={kind: image_folder, train_dir: %s, val_dir: %s, image_size: [32, 32]}"
            % (image_folder / "train", image_folder / "val"), *extra]


def assert_search_artefacts(results, workers: int):
    doc = json.loads((results / "results.json").read_text())
    assert doc["schema"] == 1 and doc["workers"] == workers and doc["replicas"] == workers
    assert_golden(doc, f"grid-{workers}-workers")
    assert [c["candidate"] for c in doc["candidates"]] == CANDIDATES.split(",")
    assert doc["best"]["val_accuracy"] >= 0.6, doc  # 4 classes: chance is 0.25
    assert doc["best"]["candidate"] == max(doc["candidates"], key=lambda c: c["val_accuracy"])["candidate"]
    for record in doc["candidates"]:
        assert record["epochs"] == 2 and record["params"] > 0 and record["images_per_second"] > 0
        rows = list(csv.DictReader((results / record["history"]).open()))
        assert [r["epoch"] for r in rows] == ["1", "2"] and "val_accuracy" in rows[0]
    assert list((results / "tensorboard").iterdir())
    assert (results / "saved_model" / "saved_model.pb").is_file()
    assert not (results / "backup").exists()  # finished: no stale backups left behind
    check = subprocess.run([sys.executable, str(FIXTURES / "check_model.py"), str(results / "best_model.keras")],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr[-2000:]
    assert json.loads(check.stdout.strip().splitlines()[-1]) == {"shape": [3, 4]}


def test_two_workers_search_together_and_only_the_chief_writes(trainers, image_folder, tmp_path):
    ports = free_ports(2)
    addresses = [f"127.0.0.1:{p}" for p in ports]
    # Separate results folders, as on two hosts: the worker's must stay empty.
    results = [tmp_path / "chief-results", tmp_path / "worker-results"]
    procs = [trainers.start(trainer_args(image_folder, results[i]), tf_config(addresses, i), name=f"w{i}")
             for i in range(2)]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.log_path.read_text()[-3000:]
    assert_search_artefacts(results[0], workers=2)
    # The worker writes no results: only its own progress file, which the launcher reads at each poll.
    assert [p.name for p in results[1].rglob("*") if p.is_file()] == ["progress-worker-1.json"]
    progress = json.loads((results[1] / "progress-worker-1.json").read_text())
    assert (progress["trial_index"], progress["trials"], progress["done"]) == (2, 2, True)
    chief_log, worker_log = (p.log_path.read_text() for p in procs)
    assert "2 replica(s), chief" in chief_log and "2 replica(s), worker" in worker_log
    for name in CANDIDATES.split(","):
        assert f"[worker:0] {name} epoch 2/2 loss=" in chief_log
        assert f"[worker:1] {name} epoch 2/2 loss=" in worker_log
    assert "best: " in chief_log and "best: " not in worker_log
    # step_metrics: local (the default) reads the means locally inside each step; the epoch's
    # figures are still read across the workers, so both print the same ones (each worker's own
    # half of the data would give different means).
    figures = [EPOCH_FIGURES.findall(log) for log in (chief_log, worker_log)]
    assert len(figures[0]) == 2 * len(CANDIDATES.split(",")) and figures[0] == figures[1], figures
    assert "auto-shard" not in (chief_log + worker_log).lower()
    # Start-up is visible stage by stage (and bench/startup.py times these lines).
    first = CANDIDATES.split(",")[0]
    stages = ["[worker:0] importing TensorFlow", "[worker:0] joining a cluster", "[worker:0] cluster ready",
              f"[worker:0] {first} first training step done", f"[worker:0] {first} epoch 1/2"]
    positions = [chief_log.find(s) for s in stages]
    assert -1 not in positions and positions == sorted(positions), list(zip(stages, positions))


def test_mixed_bfloat16_trains_on_two_cpu_workers_with_a_float32_softmax_and_each_traces_steps(
        trainers, image_folder, tmp_path):
    ports = free_ports(2)
    addresses = [f"127.0.0.1:{p}" for p in ports]
    results = [tmp_path / "chief", tmp_path / "worker"]
    args = ["--epochs", "1", "--candidates", "small_cnn", "--results-dir", "{results}", "--batch-per-replica", "16",
            "--join-timeout-s", "120", "--set", "precision=mixed_bfloat16", "--set", "profile_steps=[2, 4]", "--set",
            "dataset={kind: image_folder, train_dir: %s, val_dir: %s, image_size: [32, 32]}"
            % (image_folder / "train", image_folder / "val")]
    procs = [trainers.start([a.replace("{results}", str(results[i])) for a in args], tf_config(addresses, i), name=f"b{i}")
             for i in range(2)]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.log_path.read_text()[-3000:]
    doc = json.loads((results[0] / "results.json").read_text())
    assert doc["precision"] == "mixed_bfloat16" and doc["workers"] == 2
    rows = list(csv.DictReader((results[0] / doc["candidates"][0]["history"]).open()))
    assert all(math.isfinite(float(r["loss"])) and math.isfinite(float(r["val_loss"])) for r in rows), rows
    check = subprocess.run([sys.executable, str(FIXTURES / "model_policies.py"), str(results[0] / "best_model.keras")],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr[-2000:]
    seen = json.loads(check.stdout.strip().splitlines()[-1])
    assert seen["policies"][0] == "mixed_bfloat16" and seen["policies"][-1] == "float32", seen  # the softmax
    assert seen["output"] == "float32" and seen["finite"], seen
    for i in range(2):   # profile_steps: each worker's own trace of steps 2 and 3
        traces = list((results[i] / "profile" / f"worker-{i}").rglob("*.xplane.pb"))
        assert len(traces) == 1 and traces[0].stat().st_size > 10_000, traces
        # step_metrics: local: per step, the gradients' all-reduce and the iterator's "does every
        # worker still have a batch"; no all-reduce reading a metric's mean (`div_no_nan/...`) nor
        # summing the step's outputs (8 in all with all_workers)
        from trainer.train.profile import collective_ops   # imports TensorFlow
        ops = collective_ops(traces[0])
        assert sorted(ops.values()) == [2, 2] and not any("div_no_nan" in op for op in ops), ops


def test_single_process_without_tf_config_gives_the_same_artefacts(trainers, image_folder, tmp_path):
    proc = trainers.start(trainer_args(image_folder, tmp_path / "results"), name="solo")
    assert proc.wait(timeout=300) == 0, proc.log_path.read_text()[-3000:]
    assert_search_artefacts(tmp_path / "results", workers=1)


def test_validation_split_of_one_folder(trainers, image_folder, tmp_path):
    args = ["--epochs", "1", "--results-dir", str(tmp_path / "r"), "--set",
            f"dataset={{kind: image_folder, train_dir: {image_folder / 'train'}, validation_split: 0.25, image_size: [32, 32]}}"]
    proc = trainers.start(args, name="split")
    assert proc.wait(timeout=300) == 0, proc.log_path.read_text()[-3000:]
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc["images"] == {"train": 144, "val": 48}  # 25 % of each class's 48 held out


def test_join_watchdog_names_the_missing_worker(trainers, tmp_path):
    addresses = [f"127.0.0.1:{p}" for p in free_ports(2)]
    started = time.monotonic()
    proc = trainers.start(["--join-timeout-s", "10", "--results-dir", str(tmp_path / "r")],
                          tf_config(addresses, 0), name="lonely")
    code = proc.wait(timeout=90)  # without the watchdog MWMS waits an hour
    elapsed = time.monotonic() - started
    log = proc.log_path.read_text()
    assert code == 1, log[-2000:]
    assert f"cluster did not form within 10 s: never joined: worker:1 at {addresses[1]} (connection refused)" in log
    assert elapsed >= 10
    assert not (tmp_path / "r" / "results.json").exists()


def test_unknown_candidate_fails_before_the_cluster_forms(trainers, tmp_path):
    addresses = [f"127.0.0.1:{p}" for p in free_ports(2)]
    proc = trainers.start(["--candidates", "user_models:not_there", "--results-dir", str(tmp_path)],
                          tf_config(addresses, 0), name="bad")
    assert proc.wait(timeout=90) == 2
    assert "user_models' has no function 'not_there'" in proc.log_path.read_text()



def test_promised_gpus_that_tensorflow_cannot_see_fail_clearly(trainers, tmp_path):
    # This machine has no GPU: a container given one (gpus ≠ 0) must say so, not train on the CPU.
    proc = trainers.start(["--results-dir", str(tmp_path)], name="gpu", extra_env={"TFC_EXPECT_GPUS": "1"})
    assert proc.wait(timeout=90) == 1
    log = proc.log_path.read_text()
    assert "tfcompose trainer: TensorFlow sees 0 GPU(s) but this container was given 1." in log
    assert "cuDNN" in log and "Traceback" not in log


def test_an_undecodable_image_is_named_skipped_and_counted(trainers, image_folder, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(image_folder / "train", data)
    broken = sorted((data / sorted(p.name for p in data.iterdir())[0]).iterdir())[0]
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 50)  # a PNG header, then nothing decodable
    args = ["--epochs", "1", "--results-dir", str(tmp_path / "r"), "--set",
            f"dataset={{kind: image_folder, train_dir: {data}, validation_split: 0.25, image_size: [32, 32]}}"]
    proc = trainers.start(args, name="broken")
    code = proc.wait(timeout=300)
    log = proc.log_path.read_text()
    assert code == 0, log[-3000:]
    assert f"skipped 1 file(s) that cannot be decoded: {broken}" in log
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc["skipped_images"] == {"count": 1, "files": [str(broken)]}
    total = sum(1 for p in data.rglob("*.png"))
    assert doc["images"]["train"] + doc["images"]["val"] == total - 1
