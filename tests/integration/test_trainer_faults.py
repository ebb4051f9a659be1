"""Faults in a real two-process MWMS cluster: a peer lost mid-epoch, and crash-and-resume."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from support.common import free_ports, tf_config

pytestmark = pytest.mark.integration


def wait_for(proc, text: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while text not in proc.log_path.read_text():
        assert proc.poll() is None, proc.log_path.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{text!r} never appeared"
        time.sleep(0.2)


def sigkill(proc) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_peer_lost_mid_epoch_ends_the_survivor_with_one_line(trainers, tmp_path):
    addresses = [f"127.0.0.1:{p}" for p in free_ports(2)]
    args = ["--epochs", "500", "--results-dir", str(tmp_path / "r"), "--set", "dataset.per_class=256"]
    chief, worker = (trainers.start(args, tf_config(addresses, i), name=f"w{i}") for i in range(2))
    wait_for(worker, "small_cnn epoch 2/500")
    sigkill(worker)
    killed = time.monotonic()
    code = chief.wait(timeout=60)  # MWMS alone may hang here (tensorflow#39922)
    detect = time.monotonic() - killed
    log = chief.log_path.read_text()
    assert code == 1, log[-2000:]
    print(f"[reliability] peer SIGKILLed mid-epoch: survivor exited 1 after {detect:.1f} s")
    assert detect < 30
    ours = [line for line in log.splitlines() if line.startswith("tfcompose trainer:")]
    assert len(ours) == 1 and "training failed (" in ours[0] and "restart the whole cluster" in ours[0]
    assert "Traceback" not in log


def one_save_back(backup: Path) -> int:
    """A worker's backup as a crash during its last save leaves it: the save before the newest is
    its newest (the checkpoint state file names it; the newest's files gone). The epochs it then holds."""
    state = backup / "checkpoint"
    names = re.findall(r'^all_model_checkpoint_paths: "(ckpt-\d+)"$', state.read_text(), re.M)
    assert len(names) == 2, state.read_text()          # the newest two saves kept
    state.write_text(f'model_checkpoint_path: "{names[0]}"\nall_model_checkpoint_paths: "{names[0]}"\n')
    for part in backup.glob(f"{names[1]}.*"):
        part.unlink()
    return int(names[0].split("-")[1])


@pytest.mark.parametrize("disks", ["shared", "separate"])
def test_sigkill_mid_candidate_then_restart_resumes_without_retraining(trainers, image_folder, tmp_path, disks):
    """Like a crash on one host: kill worker 1 during the second candidate, restart both workers.
    With separate disks, worker 1's backup is also left one save behind (a crash during a save):
    the chief goes back one save with it, and the trial goes on from there."""
    addresses = [f"127.0.0.1:{p}" for p in free_ports(2)]
    folders = [tmp_path / ("shared" if disks == "shared" else f"host{i}") for i in range(2)]

    def start(attempt: int):
        return [trainers.start(["--epochs", "6", "--candidates", "user_models:tiny_cnn,small_cnn",
                                "--results-dir", str(folders[i] / "results"),
                                "--set", f"backup_dir={folders[i] / 'backup'}", "--batch-per-replica", "8",
                                "--set", "dataset={kind: image_folder, train_dir: %s, val_dir: %s, image_size: [32, 32]}"
                                % (image_folder / "train", image_folder / "val")],
                               tf_config(addresses, i), name=f"a{attempt}w{i}") for i in range(2)]

    chief, worker = start(1)
    wait_for(worker, "small_cnn epoch 3/6")
    sigkill(worker)
    killed = time.monotonic()
    assert chief.wait(timeout=60) == 1
    print(f"[reliability] resume ({disks} disks): chief exited {time.monotonic() - killed:.1f} s after the kill")
    behind = 0
    if disks == "separate":
        [saves] = [p.parent for p in (folders[1] / "backup").glob("*/*small_cnn*/chief/checkpoint")]
        behind = one_save_back(saves)
    chief, worker = start(2)
    for proc in (chief, worker):
        assert proc.wait(timeout=300) == 0, proc.log_path.read_text()[-3000:]

    results = folders[0] / "results"
    doc = json.loads((results / "results.json").read_text())
    first, second = doc["candidates"]
    assert doc["restarts"] == 1
    assert (first["candidate"], first["start"], first["resumed_from_epoch"]) == ("user_models:tiny_cnn", 1, 0)
    assert (second["candidate"], second["start"]) == ("small_cnn", 2)
    assert second["resumed_from_epoch"] >= 2 - bool(behind)   # the epochs logged before the kill kept (but one)
    assert second["epochs_run"] + second["resumed_from_epoch"] == 6
    print(f"[reliability] resume ({disks} disks): resumed small_cnn at epoch {second['resumed_from_epoch'] + 1} "
          f"of 6 (killed during epoch 3 or 4); tiny_cnn not retrained")
    rows = list(csv.DictReader((results / second["history"]).open()))
    assert [r["epoch"] for r in rows] == ["1", "2", "3", "4", "5", "6"]
    log = chief.log_path.read_text()
    assert "resuming (start 2): 1 candidate(s) already finished: user_models:tiny_cnn" in log
    assert "tiny_cnn epoch" not in log  # not retrained
    assert "small_cnn done:" in log and f"(resumed at epoch {second['resumed_from_epoch'] + 1})" in log
    said = "backups were one save apart"
    if behind:      # the saves count from 1 each trial, one per epoch: save k holds epoch k
        assert second["resumed_from_epoch"] == behind and said in log, log[-3000:]
        assert f"every worker goes on after epoch {behind}" in log
    else:
        assert said not in log
    assert not any((f / "backup").exists() and any((f / "backup").iterdir()) for f in folders)
