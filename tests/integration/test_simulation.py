"""The local two-container simulation, through a real Docker engine and compose v2."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from support.common import REPO, compose_leftovers
from launcher.stages.render import render_simulation

SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"
OWNER = (4321, 4321)  # a non-root user owns runs/: results must come back owned by them


def test_committed_compose_yaml_is_the_rendering_of_the_shared_template():
    assert (REPO / "compose.yaml").read_text() == render_simulation(), "run `make compose.yaml`"


@pytest.fixture
def sim(tmp_path, trainer_image):  # noqa: F811
    """A copy of the simulation's files in a temp folder, under its own compose project name."""
    (tmp_path / "compose").mkdir()
    shutil.copy(REPO / "compose.yaml", tmp_path / "compose.yaml")
    shutil.copy(REPO / "compose" / "simulation-train.yaml", tmp_path / "compose" / "simulation-train.yaml")
    shutil.copytree(REPO / "compose" / "no-user-code", tmp_path / "compose" / "no-user-code")
    runs = tmp_path / "runs"
    runs.mkdir()
    os.chown(runs, *OWNER)
    project = f"tfc-test-{uuid.uuid4().hex[:8]}"

    def compose(*args, env=None, **kw):
        full_env = {**os.environ, "TFC_IMAGE": trainer_image, "EPOCHS": "2", "IMAGE_SIZE": "[32, 32]",
                    "CANDIDATES": "small_cnn,deep_cnn", **(env or {})}
        return subprocess.Popen(["docker", "compose", "-p", project, *args], cwd=tmp_path, env=full_env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)

    compose.project, compose.dir = project, tmp_path
    yield compose
    subprocess.run(["docker", "compose", "-p", project, "down", "-v", "--remove-orphans", "-t", "1"], cwd=tmp_path,
                   capture_output=True)


def container_log(project: str, service: str) -> str:
    return subprocess.run(["docker", "logs", f"{project}-{service}-1"], capture_output=True, text=True).stdout


def up_and_wait(sim, env=None, timeout=420) -> tuple[int, str]:
    proc = sim("up", "--no-build", "--exit-code-from", "chief", env=env)
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def assert_two_replica_run(sim, code, out, candidates):
    chief, worker = container_log(sim.project, "chief"), container_log(sim.project, "worker")
    assert code == 0, out[-4000:]
    assert "[worker:0] cluster ready: 2 worker(s), 2 replica(s), chief" in chief
    assert "[worker:1] cluster ready: 2 worker(s), 2 replica(s), worker" in worker
    results = sim.dir / "runs" / "local"
    doc = json.loads((results / "results.json").read_text())
    assert [c["candidate"] for c in doc["candidates"]] == candidates
    assert doc["workers"] == 2 and doc["replicas"] == 2
    assert "best: " in chief and "best: " not in worker and "results in" not in worker  # only the chief wrote
    for path in [results, *results.rglob("*")]:
        assert (path.stat().st_uid, path.stat().st_gid) == OWNER, path  # the user can delete them
    return doc


def test_docker_compose_up_trains_two_containers_on_generated_data(sim):
    code, out = up_and_wait(sim)
    doc = assert_two_replica_run(sim, code, out, ["small_cnn", "deep_cnn"])
    # A first run that reads clean (trainer/quiet.py): none of TensorFlow's start-up noise on this
    # CPU-only machine, the one fact that matters in the kit's words instead.
    for noise in ("Could not find cuda drivers", "failed call to cuInit", "absl::InitializeLog", "oneDNN custom operations"):
        assert noise not in out, noise
    assert "[worker:0] no GPU on this host: training on CPU" in out
    assert doc["images"] == {"train": 256, "val": 64}  # the default synthetic set
    # The demo convinces: every default candidate learns (4 classes: chance is 0.25).
    assert all(c["val_accuracy"] >= 0.6 for c in doc["candidates"]), doc["candidates"]
    for record in doc["candidates"]:
        assert (sim.dir / "runs" / "local" / record["history"]).is_file()
    assert (sim.dir / "runs" / "local" / "best_model.keras").is_file()
    down = subprocess.run(["docker", "compose", "-p", sim.project, "down", "-t", "1"], cwd=sim.dir,
                          capture_output=True, text=True)
    assert down.returncode == 0, down.stderr
    assert compose_leftovers(sim.project) == []


def test_data_dir_mounts_a_real_image_folder_read_only(sim, image_folder):
    code, out = up_and_wait(sim, env={"DATA_DIR": str(image_folder), "CANDIDATES": "small_cnn"})
    doc = assert_two_replica_run(sim, code, out, ["small_cnn"])
    assert doc["images"] == {"train": 192, "val": 48}  # the folder's 4 × 48 and 4 × 12 images
    assert doc["best"]["val_accuracy"] >= 0.6
    mounts = subprocess.run(["docker", "inspect", "-f", "{{json .Mounts}}", f"{sim.project}-chief-1"],
                            capture_output=True, text=True).stdout
    data = next(m for m in json.loads(mounts) if m["Destination"] == "/data")
    assert data["Source"] == str(image_folder) and data["RW"] is False


def test_unreadable_data_dir_is_one_line_and_exit_2(sim, image_folder, tmp_path):
    private = tmp_path / "private-data"
    shutil.copytree(image_folder, private)
    (private / "train").chmod(0o700)  # root's, unreadable for the owner of runs/ the trainer runs as
    code, out = up_and_wait(sim, env={"DATA_DIR": str(private), "CANDIDATES": "small_cnn"})
    chief = container_log(sim.project, "chief") + subprocess.run(
        ["docker", "logs", f"{sim.project}-chief-1"], capture_output=True, text=True).stderr
    assert code == 2, out[-3000:]
    assert "tfcompose trainer: dataset.train_dir: cannot read /data/train (permission denied for uid 4321)" in chief
    assert "Traceback" not in chief


def test_a_worker_that_never_starts_ends_the_chief_within_the_join_timeout(sim):
    started = time.monotonic()
    proc = sim("up", "--no-build", "--exit-code-from", "chief", "chief", env={"JOIN_TIMEOUT_S": "10"})  # no worker
    out, _ = proc.communicate(timeout=120)
    log = container_log(sim.project, "chief") + subprocess.run(
        ["docker", "logs", f"{sim.project}-chief-1"], capture_output=True, text=True).stderr
    assert proc.returncode == 1, out[-3000:]
    print(f"[reliability] simulation without its worker: chief exited 1 after {time.monotonic() - started:.1f} s (join_timeout_s 10)")
    assert "cluster did not form within 10 s: never joined: worker:1 at worker:2222" in log
    assert time.monotonic() - started < 90


def test_a_killed_worker_makes_up_exit_non_zero_and_up_again_resumes_from_the_shared_backup(sim):
    env = {"EPOCHS": "4", "CANDIDATES": "small_cnn,deep_cnn", "IMAGE_SIZE": "[24, 24]"}
    proc = sim("up", "--no-build", "--exit-code-from", "chief", env=env)
    deadline = time.monotonic() + 300
    while "deep_cnn epoch 2/4" not in container_log(sim.project, "worker"):
        assert proc.poll() is None and time.monotonic() < deadline, "never reached deep_cnn epoch 2"
        time.sleep(0.5)
    subprocess.run(["docker", "kill", f"{sim.project}-worker-1"], check=True, capture_output=True)
    out, _ = proc.communicate(timeout=120)  # a hang would end here in TimeoutExpired
    assert proc.returncode != 0, out[-3000:]                    # a killed worker: `up` exits non-zero
    assert not (sim.dir / "runs" / "local" / "results.json").exists()
    code, out = up_and_wait(sim, env=env)  # the same command again resumes
    assert code == 0, out[-3000:]
    doc = json.loads((sim.dir / "runs" / "local" / "results.json").read_text())
    first, second = doc["candidates"]
    assert doc["restarts"] == 1 and (first["start"], first["resumed_from_epoch"]) == (1, 0)
    assert second["start"] == 2 and second["resumed_from_epoch"] >= 1
    assert second["resumed_from_epoch"] + second["epochs_run"] == 4
    assert not (sim.dir / "runs" / "local" / "backup").exists()


def test_run_dir_and_run_command_run_your_own_script_in_the_simulation(sim):
    from support.common import FIXTURES
    code, out = up_and_wait(sim, env={"RUN_DIR": str(FIXTURES / "byo"), "RUN_COMMAND": "python train.py"})
    assert code == 0, out[-3000:]
    output = json.loads((sim.dir / "runs" / "local" / "output.json").read_text())
    assert output == {**output, "replicas": 2, "task": "0"}
    worker = container_log(sim.project, "worker")
    printed = json.loads(next(line for line in worker.splitlines() if line.startswith("TFC "))[4:])
    assert (printed["TFC_TASK_INDEX"], printed["TFC_IS_CHIEF"], printed["TFC_CHIEF_ADDR"]) == ("1", "0", "chief:2222")
    assert "epoch 3: loss" in worker


def test_a_fresh_clone_runs_with_plain_docker_compose_up(tmp_path):
    """No make, no prior build: compose builds the image from its build section (the wheels are not
    in a clone, so the build installs them from the package index) and the two containers train."""
    from support.common import docker_ok, ensure_base_image, require
    require(docker_ok(), "no Docker engine answers `docker info`")
    base = ensure_base_image()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    project, image = f"tfc-clone-{uuid.uuid4().hex[:8]}", f"tfcompose-clone-test:{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "BASE_IMAGE": base, "TFC_IMAGE": image, "EPOCHS": "1", "IMAGE_SIZE": "[32, 32]",
           "CANDIDATES": "small_cnn"}
    if Path(SYSTEM_CA).is_file():  # this machine reaches the index through a TLS-intercepting proxy
        env["PIP_CA_FILE"] = SYSTEM_CA
    try:
        proc = subprocess.run(["docker", "compose", "-p", project, "up", "--build", "--exit-code-from", "chief"],
                              cwd=clone, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        doc = json.loads((clone / "runs" / "local" / "results.json").read_text())
        assert doc["workers"] == 2 and doc["replicas"] == 2
    finally:
        subprocess.run(["docker", "compose", "-p", project, "down", "-v", "-t", "1", "--remove-orphans"], cwd=clone,
                       capture_output=True)
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
