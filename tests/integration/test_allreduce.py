"""`allreduce:` with real TensorFlow: the update's arithmetic (two replicas in one process), two
MWMS workers on loopback with a compressed, accumulated all-reduce (traced), `auto` on two
workers, and `auto` through `tfcompose up` (links measured, the figure in train.yaml)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from support.cluster import TRAIN, cli
from support.common import FIXTURES, REPO, free_ports, tf_config

pytestmark = pytest.mark.integration
EPOCH_FIGURES = re.compile(r"\] (\S+ epoch \d+/\d+ loss=.* val_accuracy=\S+) \d+ img/s")
DONE = re.compile(r"\] (\S+ done: .*) in [\d.]+ s(.*)$", re.M)


def two_workers(trainers, image_folder, tmp_path, *extra: str) -> tuple[list[str], list]:
    """Two MWMS workers on loopback, small_cnn on the 4-class images (12 steps an epoch at 8 per
    replica); both must finish. Their logs and results folders."""
    addresses = [f"127.0.0.1:{p}" for p in free_ports(2)]
    results = [tmp_path / f"r{i}" for i in range(2)]
    args = ["--candidates", "small_cnn", "--batch-per-replica", "8", "--join-timeout-s", "120",
            "--set", "dataset={kind: image_folder, train_dir: %s, val_dir: %s, image_size: [32, 32]}"
            % (image_folder / "train", image_folder / "val"), *extra]
    procs = [trainers.start([*args, "--results-dir", str(results[i])], tf_config(addresses, i), name=f"w{i}")
             for i in range(2)]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.log_path.read_text()[-3000:]
    return [p.log_path.read_text() for p in procs], results


def test_casting_and_accumulation_update_as_float32_every_step_where_the_arithmetic_says_they_must():
    proc = subprocess.run([sys.executable, str(FIXTURES / "allreduce_updates.py")], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["float32_every1_is_stock"], seen            # our step, float32 every step: tf_keras's, bit for bit
    assert seen["every4_on_4_identical_is_every1"] and seen["iterations"] == [10, 10], seen
    assert seen["partial_window_is_every1"] and seen["partial_iterations"] == 4, seen   # the epoch's last window
    assert seen["bfloat16_exact_is_float32"] and seen["float16_exact_is_float32"], seen
    assert seen["float16_overflow"] == {"same_as_float32": True, "fallbacks": 5}, seen
    assert 0 < seen["bfloat16_relative_to_float32"] < 2 ** -6 and 0 < seen["float16_relative_to_float32"] < 2 ** -9, seen
    # an embedding's IndexedSlices and an unused layer's None: densified, as tf_keras trains them
    assert seen["embedding_relative_to_stock"] < 1e-5 and seen["embedding_bfloat16_every2_finite"], seen


def test_two_workers_bfloat16_every_4_agree_and_trace_one_bfloat16_gradient_allreduce_per_4_steps(
        trainers, image_folder, tmp_path):
    logs, results = two_workers(trainers, image_folder, tmp_path, "--epochs", "3", "--set", "search.patience=1",
                                "--set", "allreduce={dtype: bfloat16, every: 4}", "--set", "profile_steps=[4, 12]")
    for i, log in enumerate(logs):
        assert f"[worker:{i}] small_cnn all-reduce bfloat16, every 4 steps (as configured)" in log, log[-2000:]
    figures = [EPOCH_FIGURES.findall(log) for log in logs]
    assert figures[0] and figures[0] == figures[1], figures
    # early stopping reads those figures: both stop (or not) after the same epoch
    assert DONE.findall(logs[0]) == DONE.findall(logs[1]) != [], logs[0][-2000:]
    record = json.loads((results[0] / "results.json").read_text())["candidates"][0]
    assert record["allreduce"] == {"dtype": "bfloat16", "every": 4, "auto": False, "why": "as configured",
                                   "link_mbit_s": None, "step_ms": None, "expected_ms": None}
    from trainer.train.profile import collective_dtypes, collective_ops   # imports TensorFlow
    graph = collective_dtypes(results[0] / "tensorboard" / "small_cnn" / "train")
    for i in range(2):   # steps 4–11 of the first epoch: windows end after steps 7 and 11
        (trace,) = (results[i] / "profile" / f"worker-{i}").rglob("*.xplane.pb")
        ops = collective_ops(trace)
        gradients = {op: n for op, n in ops.items() if "cond" in op}
        assert list(gradients.values()) == [2], ops
        assert ops.get("CollectiveReduceV2") == 8, ops      # each step: does every worker still have a batch
        (op,) = gradients      # the graph's node it ran: the longest name the traced one ends with
        node = max((name for name in graph if op.endswith("/" + name)), key=len)
        assert node != "CollectiveReduceV2" and graph[node] == "bfloat16", (op, graph)
    assert graph["CollectiveReduceV2"] == "int64", graph


def test_auto_on_two_workers_takes_one_decision_from_the_link_and_the_slowest_step(trainers, image_folder, tmp_path):
    logs, results = two_workers(trainers, image_folder, tmp_path, "--epochs", "1",
                                "--set", "allreduce={auto: true, link_mbit_s: 20}")
    lines = [re.search(r"\] small_cnn (all-reduce .*)$", log, re.M) for log in logs]
    assert lines[0] and lines[1] and lines[0].group(1) == lines[1].group(1), logs[0][-2000:]
    record = json.loads((results[0] / "results.json").read_text())["candidates"][0]["allreduce"]
    # 461,444 gradients at 20 Mbit/s: 738 ms in float32 against a step of milliseconds
    assert record["auto"] and record["dtype"] == "bfloat16" and record["every"] > 1 and record["link_mbit_s"] == 20
    assert record["step_ms"] > 0 and record["why"].startswith("auto: link 20 Mbit/s, 461,444 gradients") \
        and "capped" in record["why"], record
    assert EPOCH_FIGURES.findall(logs[0]) == EPOCH_FIGURES.findall(logs[1])


def test_up_measures_the_links_and_auto_picks_from_the_figure_it_renders(cluster_env, capsys, tmp_path):
    name, inv, hosts = cluster_env(n=2, train={**TRAIN, "candidates": ["small_cnn"], "epochs": 1, "allreduce": "auto"})
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code == 0, out + err
    matrix = out[out.index("links between hosts"):]
    assert len(re.findall(r"[\d,]+ Mbit/s", matrix)) == 2, matrix       # h0 → h1 and h1 → h0, measured
    figures = [float(yaml.safe_load((tmp_path / "ssh" / h.name / "work" / name / "train.yaml").read_text())
                     ["allreduce"]["link_mbit_s"]) for h in hosts]
    assert figures[0] == figures[1] > 0
    record = json.loads((runs / name / "latest" / "results.json").read_text())["candidates"][0]["allreduce"]
    assert record["auto"] and record["link_mbit_s"] == figures[0] and record["why"].startswith("auto: link")
    # The same inventory again after a finished run: a new run (its own folder), the image not sent again.
    code, out, err = cli(capsys, "up", "-i", str(inv), "--runs", str(runs))
    assert code == 0 and re.search(r"^run \S+: a new run$", out, re.M), out + err
    assert all(re.search(rf"^{h.name}: image \(present, 0 B\)$", out, re.M) for h in hosts), out + err
