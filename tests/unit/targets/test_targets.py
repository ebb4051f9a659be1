"""When you outgrow SSH: the JobSet and Slurm renderings, and the rank shim that lets their
replicas find each other without a TF_CONFIG."""
from __future__ import annotations

import functools

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
import pytest
import yaml
from support.common import REPO
from launcher.cli import main
from trainer.cluster import rank


CRD = REPO / "tests" / "data" / "schemas" / "jobset.x-k8s.io_jobsets.yaml"   # vendored (README there)


GPU4 = """cluster: mri
image: registry.lab:5000/tfcompose-trainer:2.21
defaults: {gpus: 4}
kubernetes: {namespace: ml, results_claim: tfc-results, data_claim: oasis}
slurm: {results_dir: /shared/runs/mri, data_dir: /shared/oasis, partition: gpu}
train: {dataset: {kind: image_folder, train_dir: /data/train, val_dir: /data/val}, candidates: [small_cnn, deep_cnn]}
hosts:
""" + "".join(f"  - {{name: n{i}, address: 10.0.0.{i + 1}, data_dir: /srv/oasis}}\n" for i in range(4))


@functools.lru_cache(maxsize=1)
def jobset_schema() -> dict:
    """The CRD's schema, parsed once (824 KB of YAML: libyaml's parser where PyYAML has it)."""
    doc = yaml.load(CRD.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (version,) = [v for v in doc["spec"]["versions"] if v["name"] == "v1alpha2"]
    return version["schema"]["openAPIV3Schema"]


@functools.lru_cache(maxsize=1)
def jobset_validator():
    """A validator for the CRD's schema, the schema itself checked once (not at every validation)."""
    import jsonschema
    schema = jobset_schema()
    kind = jsonschema.validators.validator_for(schema)
    kind.check_schema(schema)
    return kind(schema)


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
    code, out = render(tmp_path, example if which == "example" else GPU4, "jobset")
    assert code == 0
    folder = next(out.iterdir())
    doc = yaml.safe_load((folder / "jobset.yaml").read_text())
    jobset_validator().validate(doc)
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
        jobset_validator().validate(doc)


# Text PyYAML (YAML 1.1) leaves plain but a YAML 1.2 reader such as kubectl's takes for a number
# (or, for the last ones, what both read as a bool or null).
NUMBER_LIKE = ["1e-3", "1e3", "0o17", "0x1F", "0b101", "1_000", ".5", "1.", "-2.5E+3", "+12", "-.inf", ".NaN",
               "true", "False", "null", "~", "yes", "0777", "1:20"]


def test_the_jobset_keeps_every_string_a_string_for_a_yaml_1_2_reader(tmp_path):
    from ruamel.yaml import YAML
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    env = {f"V{i}": text for i, text in enumerate(NUMBER_LIKE)}
    inv = GPU4.replace("train: {dataset: {kind: image_folder, train_dir: /data/train, val_dir: /data/val}, "
                       "candidates: [small_cnn, deep_cnn]}",
                       f"run: {{command: [python, train.py, --lr, '1e-3', --mask, '0o17'], code_dir: {tmp_path / 'code'}, "
                       f"env: {json.dumps(env)}}}")
    code, out = render(tmp_path, inv, "jobset")
    assert code == 0
    doc = YAML(typ="safe", pure=True).load((out / "mri" / "jobset.yaml").read_text())   # YAML 1.2 by default
    (job,) = doc["spec"]["replicatedJobs"]
    container = job["template"]["spec"]["template"]["spec"]["containers"][0]
    seen = {e["name"]: e["value"] for e in container["env"]}
    assert {name: seen[name] for name in env} == env
    assert container["args"] == ["python", "train.py", "--lr", "1e-3", "--mask", "0o17"]
    assert all(isinstance(e["value"], str) for e in container["env"])
    assert all(isinstance(v, str) for v in doc["metadata"]["labels"].values())


def test_the_configmap_keeps_every_string_a_string_for_a_yaml_1_2_reader(tmp_path):
    from ruamel.yaml import YAML
    code, out = render(tmp_path, GPU4.replace("namespace: ml", "namespace: '1e3'"), "jobset")
    assert code == 0
    for name in ("jobset.yaml", "configmap.yaml"):
        doc = YAML(typ="safe", pure=True).load((out / "mri" / name).read_text())
        assert doc["metadata"]["namespace"] == "1e3"


FAKE_SRUN = """#!/bin/bash
# As Slurm runs a step: each task with its own SLURM_PROCID, the job's variables exported; pyxis's
# container options (srun's own) recorded, the container "running" the command as it is.
opts=()
while [[ "$1" == --* ]]; do
  case $1 in --container-image) opts+=("image $2"); shift ;; --container-mounts=*) opts+=("bind ${1#*=}") ;; esac
  shift
done
for i in $(seq 0 $((SLURM_NTASKS - 1))); do
  { printf '%s\\n' "${opts[@]}"; SLURM_PROCID=$i SLURM_STEP_ID=0 "$@"; } > "$FAKE_OUT/task$i.txt" || exit 1
done
"""

FAKE_APPTAINER = """#!/bin/bash
# `apptainer exec [--nv] --bind B IMAGE cmd…`: record the mounts and the image, run the command.
shift; while [[ "$1" == --* ]]; do [[ "$1" == --bind ]] && echo "bind $2" && shift; shift; done
echo "image $1"; shift; exec "$@"
"""

FAKE_DOCKER = """#!/bin/bash
# `docker run …`: record what the container would get, then run its entrypoint with only the
# variables passed with -e, as Docker would. `docker rm -f NAME`: record it.
[[ $1 == rm ]] && { touch "$FAKE_OUT/removed-$3"; exit 0; }
shift; env=(PATH="$PATH" PYTHONPATH="$PYTHONPATH")
while [[ "$1" == -* ]]; do
  case $1 in
    -e) [[ $2 == *=* ]] && env+=("$2") || { [[ -v $2 ]] && env+=("$2=${!2}"); }; shift ;;
    -v) echo "mount $2"; shift ;;
    --entrypoint) entrypoint=$2; shift ;;
    --name|--user|--network|--gpus) echo "${1#--} $2"; name=${name:-$2}; shift ;;
    --label|--shm-size|--ulimit|--ipc) shift ;;
  esac
  shift
done
echo "image $1"; shift
[[ -n ${FAKE_HANG:-} ]] && { echo started > "$FAKE_OUT/started"; trap '' TERM; while :; do sleep 0.1; done; }
exec env -i "${env[@]}" "$entrypoint" "$@"
"""

FAKE_ENTRYPOINT = """#!/bin/bash
# The image's entrypoint: what the task's command is, and what the rank shim makes of the environment.
echo "command tfcompose-entrypoint $*"
exec python3 -m trainer.cluster.rank
"""


def fake_slurm(tmp_path: Path, out: Path, **env: str) -> dict[str, str]:
    """PATH with a stand-in srun (four tasks), apptainer, docker and image entrypoint."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("srun", FAKE_SRUN), ("apptainer", FAKE_APPTAINER), ("docker", FAKE_DOCKER),
                       ("tfcompose-entrypoint", FAKE_ENTRYPOINT)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO), "FAKE_OUT": str(tmp_path),
            "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "gpu[07-09],gpu12", "SLURM_JOB_ID": "77",
            "SLURM_SUBMIT_DIR": str(out / "mri"), **env}


def slurm_inventory(tmp_path: Path, runtime: str) -> str:
    return GPU4.replace("/shared/runs/mri", str(tmp_path / "runs" / "mri")).replace(
        "slurm: {", f"slurm: {{runtime: {runtime}, ")


def task_lines(tmp_path: Path, i: int) -> tuple[list[str], dict[str, str]]:
    """What task i recorded, and the exports the rank shim printed in it."""
    lines = (tmp_path / f"task{i}.txt").read_text().splitlines()
    return lines, dict(line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export"))


@pytest.mark.parametrize("runtime", ["apptainer", "enroot", "docker"])
def test_the_slurm_script_gives_each_task_its_rank_and_peers(runtime, tmp_path):
    code, out = render(tmp_path, slurm_inventory(tmp_path, runtime), "slurm")
    assert code == 0
    script = out / "mri" / "tfcompose.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "#SBATCH --nodes=4" in text and "#SBATCH --gpus-per-node=4" in text and "#SBATCH --partition=gpu" in text
    env = fake_slurm(tmp_path, out, SLURM_STEP_GPUS="0,1,2,3")
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    nodes = ["gpu07:2222", "gpu08:2222", "gpu09:2222", "gpu12:2222"]
    mounts = [f"{tmp_path / 'runs' / 'mri'}:/results", "/shared/oasis:/data:ro",
              f"{out / 'mri'}/train.yaml:/config/train.yaml:ro"]
    for i in range(4):
        lines, exports = task_lines(tmp_path, i)
        tf = json.loads(yaml.safe_load(exports["TF_CONFIG"]))
        assert tf == {"cluster": {"worker": nodes}, "task": {"type": "worker", "index": i}}
        assert exports["TFC_IS_CHIEF"] == ("1" if i == 0 else "0")
        assert "command tfcompose-entrypoint python3 -m trainer --config /config/train.yaml" in lines
        image = "registry.lab:5000/tfcompose-trainer:2.21"
        if runtime == "docker":
            assert [f"mount {m}" for m in mounts] == [line for line in lines if line.startswith("mount")]
            assert {"network host", f"user {os.getuid()}:{os.getgid()}", 'gpus "device=0,1,2,3"',
                    f"name tfcompose-mri-77-0-{i}", f"image {image}"} <= set(lines)
        else:
            assert f"bind {','.join(mounts)}" in lines
            assert f"image {'docker://' if runtime == 'apptainer' else ''}{image}" in lines
    # Slurm opens --output before the script makes the results folder: not in it.
    assert "#SBATCH --output=slurm-%j.out" in text and not any("--output=/" in line for line in text.splitlines())
    assert "continues in" in proc.stdout and (tmp_path / "runs" / "mri" / "slurm-77.out").is_file()


@pytest.mark.parametrize("runtime", ["apptainer", "enroot", "docker"])
@pytest.mark.parametrize("folder", ["a,b", "a:b"])
def test_a_submit_folder_a_mount_list_cannot_hold_is_refused_before_anything_runs(runtime, folder, tmp_path):
    _, out = render(tmp_path, slurm_inventory(tmp_path, runtime), "slurm")
    odd = tmp_path / folder
    shutil.copytree(out / "mri", odd)
    env = fake_slurm(tmp_path, out, SLURM_STEP_GPUS="0", SLURM_SUBMIT_DIR=str(odd))
    proc = subprocess.run(["bash", str(odd / "tfcompose.sbatch")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"the submit folder {odd} holds ',' or ':'" in proc.stderr
    assert not list(tmp_path.glob("task*.txt")) and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("gpu_env, expected", [({"SLURM_STEP_GPUS": "2,3"}, 'gpus "device=2,3"'),
                                               ({"CUDA_VISIBLE_DEVICES": "1"}, 'gpus "device=1"'),
                                               ({}, None)])
def test_docker_gets_the_gpus_of_the_step(gpu_env, expected, tmp_path):
    _, out = render(tmp_path, slurm_inventory(tmp_path, "docker").replace("{gpus: 4}", "{gpus: 2}"), "slurm")
    env = fake_slurm(tmp_path, out, **gpu_env)
    proc = subprocess.run(["bash", str(out / "mri" / "tfcompose.sbatch")], env=env, capture_output=True, text=True,
                          timeout=60)
    if expected is None:   # no GPU ids from Slurm: refused, rather than a container without its GPUs
        assert proc.returncode != 0 and "no GPUs in this step's allocation" in (tmp_path / "runs" / "mri" / "slurm-77.out").read_text()
    else:
        assert proc.returncode == 0 and expected in task_lines(tmp_path, 0)[0]


def test_a_signalled_docker_task_removes_its_container(tmp_path):
    """scancel signals the step's processes, not the container (MWMS ignores SIGTERM): the task must
    remove it. (Through a real Slurm and Docker: tests/integration/test_slurm.py.)"""
    _, out = render(tmp_path, slurm_inventory(tmp_path, "docker"), "slurm")
    env = fake_slurm(tmp_path, out, SLURM_NTASKS="1", SLURM_STEP_GPUS="0", FAKE_HANG="1")
    proc = subprocess.Popen(["bash", str(out / "mri" / "tfcompose.sbatch")], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)   # as Slurm signals every process of the step
        deadline = time.monotonic() + 10
        while not (tmp_path / "removed-tfcompose-mri-77-0-0").exists():
            assert time.monotonic() < deadline, "the task did not remove its container"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("text, target, field", [
    (GPU4.replace("kubernetes: {namespace: ml, ", "kubernetes: {"), "jobset", "kubernetes.namespace: Missing"),
    (GPU4.replace("results_claim: tfc-results, ", ""), "jobset", "kubernetes.results_claim: Missing"),
    (GPU4.replace("slurm: {results_dir: /shared/runs/mri, ", "slurm: {"), "slurm", "slurm.results_dir: Missing"),
    (GPU4.replace("defaults: {gpus: 4}", "defaults: {gpus: all}"), "jobset", "kubernetes.gpus_per_pod: Missing"),
    (GPU4, "helm", "--target: Received 'helm'"),
    (GPU4.replace("slurm: {", "slurm: {runtime: podman, "), "slurm", "slurm.runtime: Received 'podman'. Expected"),
    (GPU4.replace("/shared/runs/mri", "runs/mri"), "slurm", "slurm.results_dir: Received 'runs/mri'. Expected an absolute"),
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
