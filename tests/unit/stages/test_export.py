"""When you outgrow SSH: the JobSet and Slurm renderings, and the rank shim that lets their
replicas find each other without a TF_CONFIG."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
import pytest
import yaml
from support.common import REPO
from launcher.cli import main
from trainer import rank


CRD = REPO.parent / "shared" / "schemas" / "jobset.x-k8s.io_jobsets.yaml"


GPU4 = """cluster: mri
image: registry.lab:5000/tfcompose-trainer:2.21
defaults: {gpus: 4}
kubernetes: {namespace: ml, results_claim: tfc-results, data_claim: oasis}
slurm: {results_dir: /shared/runs/mri, data_dir: /shared/oasis, partition: gpu}
train: {dataset: {kind: image_folder, train_dir: /data/train, val_dir: /data/val}, candidates: [small_cnn, deep_cnn]}
hosts:
""" + "".join(f"  - {{name: n{i}, address: 10.0.0.{i + 1}, data_dir: /srv/oasis}}\n" for i in range(4))


def jobset_schema() -> dict:
    doc = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in doc["spec"]["versions"] if v["name"] == "v1alpha2"]
    return version["schema"]["openAPIV3Schema"]


def render(tmp_path, text: str, target: str, name: str = "inv.yaml") -> tuple[int, Path]:
    (tmp_path / name).write_text(text)
    code = main(["render", "-i", str(tmp_path / name), "--target", target, "-o", str(tmp_path / "out")])
    return code, tmp_path / "out"


@pytest.fixture
def example(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("a key")
    return (REPO / "inventory.example.yaml").read_text()


@pytest.mark.parametrize("which", ["example", "gpu4"])
def test_the_jobset_validates_against_the_jobset_crd(which, example, tmp_path):
    import jsonschema
    code, out = render(tmp_path, example if which == "example" else GPU4, "jobset")
    assert code == 0
    folder = next(out.iterdir())
    doc = yaml.safe_load((folder / "jobset.yaml").read_text())
    jsonschema.validate(doc, jobset_schema())
    (job,) = doc["spec"]["replicatedJobs"]
    spec = job["template"]["spec"]
    hosts = 2 if which == "example" else 4
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (hosts, hosts, "Indexed")
    assert doc["spec"]["network"]["enableDNSHostnames"] is True
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == (2 if which == "example" else 4)
    assert container["ports"][0]["containerPort"] == 2222
    env = {e["name"]: e["value"] for e in container["env"]}
    assert "TF_CONFIG" not in env and env["TFC_NUM_WORKERS"] == str(hosts)
    # what the rank shim makes of it in pod 1: the JobSet's stable DNS names
    name = doc["metadata"]["name"]
    pod1 = {**env, "JOB_COMPLETION_INDEX": "1"}
    assert rank.apply(pod1)
    tf = json.loads(pod1["TF_CONFIG"])
    assert tf["task"] == {"type": "worker", "index": 1}
    assert tf["cluster"]["worker"][0] == f"{name}-worker-0-0.{name}:2222"
    configmap = yaml.safe_load((folder / "configmap.yaml").read_text())
    assert configmap["apiVersion"] == "v1" and configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["name"] == f"{name}-train" and configmap["metadata"]["namespace"] == "ml"
    train = yaml.safe_load(configmap["data"]["train.yaml"])
    assert train["backup_dir"].startswith(train["results_dir"])  # backups on the shared results volume


def test_the_crd_schema_is_really_checked(tmp_path):
    import jsonschema
    _, out = render(tmp_path, GPU4, "jobset")
    doc = yaml.safe_load((out / "mri" / "jobset.yaml").read_text())
    doc["spec"]["replicatedJobs"][0]["replicas"] = "four"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, jobset_schema())


FAKE_SRUN = """#!/bin/bash
# As Slurm runs a step: each task with its own SLURM_PROCID, the job's variables exported.
while [[ "$1" == --* ]]; do shift; done
for i in $(seq 0 $((SLURM_NTASKS - 1))); do SLURM_PROCID=$i "$@" > "$FAKE_OUT/task$i.txt" || exit 1; done
"""


FAKE_APPTAINER = """#!/bin/bash
# `apptainer exec [--nv] --bind B IMAGE cmd…`: record what would run, and what the rank shim makes of it.
shift; while [[ "$1" == --* ]]; do [[ "$1" == --bind ]] && echo "bind $2"; [[ "$1" == --bind ]] && shift; shift; done
echo "image $1"; shift; echo "command $*"
exec python3 -m trainer.rank
"""


def test_the_slurm_script_gives_each_task_its_rank_and_peers(tmp_path):
    code, out = render(tmp_path, GPU4.replace("/shared/runs/mri", str(tmp_path / "runs")), "slurm")
    assert code == 0
    script = out / "mri" / "tfcompose.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "#SBATCH --nodes=4" in text and "#SBATCH --gpus-per-node=4" in text and "#SBATCH --partition=gpu" in text
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("srun", FAKE_SRUN), ("apptainer", FAKE_APPTAINER)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO), "FAKE_OUT": str(tmp_path),
           "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "gpu[07-09],gpu12", "SLURM_SUBMIT_DIR": str(out / "mri")}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    nodes = ["gpu07:2222", "gpu08:2222", "gpu09:2222", "gpu12:2222"]
    for i in range(4):
        lines = (tmp_path / f"task{i}.txt").read_text()
        exports = dict(line.removeprefix("export ").split("=", 1) for line in lines.splitlines() if line.startswith("export"))
        tf = json.loads(yaml.safe_load(exports["TF_CONFIG"]))
        assert tf == {"cluster": {"worker": nodes}, "task": {"type": "worker", "index": i}}
        assert exports["TFC_IS_CHIEF"] == ("1" if i == 0 else "0")
        assert f"bind {tmp_path / 'runs'}:/results,/shared/oasis:/data:ro,{out / 'mri'}/train.yaml:/config/train.yaml:ro" in lines
        assert "image docker://registry.lab:5000/tfcompose-trainer:2.21" in lines
        assert "command tfcompose-entrypoint python3 -m trainer --config /config/train.yaml" in lines


@pytest.mark.parametrize("text, target, field", [
    (GPU4.replace("kubernetes: {namespace: ml, ", "kubernetes: {"), "jobset", "kubernetes.namespace: Missing"),
    (GPU4.replace("results_claim: tfc-results, ", ""), "jobset", "kubernetes.results_claim: Missing"),
    (GPU4.replace("slurm: {results_dir: /shared/runs/mri, ", "slurm: {"), "slurm", "slurm.results_dir: Missing"),
    (GPU4.replace("defaults: {gpus: 4}", "defaults: {gpus: all}"), "jobset", "kubernetes.gpus_per_pod: Missing"),
    (GPU4, "helm", "--target: Received 'helm'"),
])
def test_a_target_without_what_it_needs_exits_2_naming_the_field(text, target, field, tmp_path, capsys):
    code, out = render(tmp_path, text, target)
    err = capsys.readouterr().err
    assert code == 2 and field in err and "Traceback" not in err
    assert not (out / "mri").exists()


def test_the_image_entrypoint_gives_run_scripts_the_same_tf_config(tmp_path):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "JOB_COMPLETION_INDEX": "1", "TFC_NUM_WORKERS": "2",
           "TFC_PEER_PATTERN": "c-worker-0-{index}.c", "TFC_RESULTS_DIR": str(tmp_path / "r"), "TFC_OWNER": "0:0"}
    proc = subprocess.run(["sh", str(REPO / "docker" / "entrypoint.sh"), "env"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert json.loads(seen["TF_CONFIG"]) == {"cluster": {"worker": ["c-worker-0-0.c:2222", "c-worker-0-1.c:2222"]},
                                             "task": {"type": "worker", "index": 1}}
    assert seen["TFC_TASK_INDEX"] == "1" and seen["TFC_CHIEF_ADDR"] == "c-worker-0-0.c:2222"
