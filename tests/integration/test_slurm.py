"""The Slurm target submitted to a real Slurm (tests/support/slurm.py): two nodes, each a network
namespace with its own slurmd and Docker engine holding the trainer image, slurmctld and munged on
the bridge, one folder every node sees. The script is exactly what `tfcompose render --target
slurm` writes with `runtime: docker`, submitted with `sbatch` by an unprivileged user from the
folder it was rendered into, as the README tells users to."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import time
import uuid
from pathlib import Path

import pytest
import yaml

from launcher.cli import main
from support.cluster import TRAIN
from support.common import require
from support.slurm import JOB_USER, SlurmLab, available

pytestmark = pytest.mark.integration
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}


@pytest.fixture(scope="module")
def slurm(engine_template):
    ok, why = available()
    require(ok, why)
    # Its own /24 (10.213.30; `bench/lanlab.py up N --slurm` takes 10.213.31), names starting `tfs`;
    # its engines start with the trainer image (the run's engine template).
    lab = SlurmLab(tag=f"s{os.getpid() % 1000}", subnet="10.213.30", template=engine_template)
    try:
        lab.up(2)
        yield lab
    finally:
        lab.down()


def submit(lab: SlurmLab, image: str, epochs: int) -> tuple[str, Path, Path]:
    """Render a small search for the lab's two nodes, sbatch it as JOB_USER from the rendered folder;
    (job id, that folder, the results folder, which does not exist yet)."""
    home = lab.shared / f"u{uuid.uuid4().hex[:6]}"
    home.mkdir()
    results = home / "runs" / "search"
    inv = {"cluster": "slab", "image": image, "defaults": {"gpus": 0, "shm_size": "256m"},
           "slurm": {"runtime": "docker", "results_dir": str(results), "time_limit": "0:10:00"},
           "train": {**TRAIN, "epochs": epochs}, "hosts": [{"name": h.name, "address": h.address} for h in lab.hosts]}
    (home / "inv.yaml").write_text(yaml.safe_dump(inv))
    assert main(["render", "-i", str(home / "inv.yaml"), "--target", "slurm", "-o", str(home / "build")]) == 0
    for path in [home, *home.rglob("*")]:   # the user's own folder, as rendered by them
        shutil.chown(path, JOB_USER)
    folder = home / "build" / "slab"
    assert not results.parent.exists()
    job = lab.run("sbatch", "--parsable", "tfcompose.sbatch", user=JOB_USER, cwd=folder).stdout.strip()
    return job, folder, results


def wait_for_end(lab: SlurmLab, job: str, seconds: float = 180) -> dict[str, str]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        state = lab.job(job)
        if state.get("JobState") in ENDED:
            return state
        time.sleep(1)
    lab.run("scancel", job, check=False)
    pytest.fail(f"job {job} did not end within {seconds:.0f} s: {lab.job(job)}")


def tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.exists() else f"({path}: none)"


def containers(lab: SlurmLab, job: str) -> dict[str, list[str]]:
    """Each node's containers of the job, in any state, on its own engine."""
    return {h.name: h.docker("ps", "-aq", "--filter", f"label=tfcompose.slurm-job={job}").stdout.split()
            for h in lab.hosts}


def test_sbatch_trains_the_search_on_both_nodes_and_report_reads_the_shared_folder(slurm, trainer_image, capsys):
    job, folder, results = submit(slurm, trainer_image, epochs=1)
    state = wait_for_end(slurm, job)
    log = results / f"slurm-{job}.out"
    # The results folder did not exist when Slurm started the job (its --output is not in it).
    assert (state["JobState"], state["ExitCode"]) == ("COMPLETED", "0:0"), \
        f"{state}\n{tail(folder / f'slurm-{job}.out')}\n{tail(log)}"
    assert state["NodeList"] == "h[0-1]" and state["NumNodes"] == "2"
    assert f"continues in {log}" in (folder / f"slurm-{job}.out").read_text()
    output = log.read_text()
    assert "[worker:0] cluster ready: 2 worker(s), 2 replica(s), chief" in output
    assert "[worker:1] cluster ready: 2 worker(s), 2 replica(s), worker" in output
    doc = json.loads((results / "results.json").read_text())
    assert doc["workers"] == 2 and [c["candidate"] for c in doc["candidates"]] == TRAIN["candidates"]
    # The containers ran as the user who submitted: what they wrote is theirs to delete.
    assert (results / "results.json").stat().st_uid == pwd.getpwnam(JOB_USER).pw_uid
    assert containers(slurm, job) == {"h0": [], "h1": []}   # --rm
    capsys.readouterr()
    assert main(["report", str(results)]) == 0
    assert (results / "report.md").is_file() and "small_cnn" in (results / "report.md").read_text()


def test_scancel_leaves_no_container_on_either_node(slurm, trainer_image):
    job, _, results = submit(slurm, trainer_image, epochs=200)
    end = time.monotonic() + 120
    while not all(containers(slurm, job).values()):
        state = slurm.job(job).get("JobState")
        assert time.monotonic() < end and state not in ENDED, f"the job's containers never ran on both nodes: {state}"
        time.sleep(0.5)
    log = results / f"slurm-{job}.out"
    while "cluster ready" not in (log.read_text() if log.exists() else ""):   # training: deaf to SIGTERM
        assert time.monotonic() < end, tail(log)
        time.sleep(0.5)
    slurm.run("scancel", job, user=JOB_USER)
    assert wait_for_end(slurm, job, 60)["JobState"] == "CANCELLED"
    slurm.wait_until_idle(60)   # the job's steps have ended on both nodes
    assert containers(slurm, job) == {"h0": [], "h1": []}
