"""Export: the same inventory and image as a Kubernetes JobSet or a Slurm batch script, for when a
lab outgrows SSH (`tfcompose render --target jobset|slurm`).

Neither target gets a TF_CONFIG: each replica learns who it is from the scheduler
(trainer/rank.py): JobSet pods from JOB_COMPLETION_INDEX and their stable DNS names, Slurm tasks
from SLURM_PROCID and SLURM_JOB_NODELIST. The hosts become a replica count, `gpus` a GPU count
per pod or node, `data_dir` a volume or a path, the train config a ConfigMap or a file.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

from launcher.errors import InventoryError
from launcher.plan import Plan

TARGETS = ("jobset", "slurm")
CONFIG = "/config/train.yaml"


def write(plan: Plan, target: str, out_dir: Path) -> list[Path]:
    from launcher.stages.render import write_folder
    files = jobset_files(plan) if target == "jobset" else slurm_files(plan)
    return write_folder(Path(out_dir) / plan.cluster.name, files, out_dir)


# --- shared facts --------------------------------------------------------------------------------

def _required(plan: Plan, section: str, key: str, expected: str):
    value = getattr(getattr(plan.cluster.spec, section) or _Empty(), key, None)
    if value is None:
        raise InventoryError(f"{plan.cluster.path}: {section}.{key}: Missing. Expected {expected} "
                             f"(needed by --target {'jobset' if section == 'kubernetes' else 'slurm'}).")
    return value


class _Empty:
    pass


def gpus_each(plan: Plan, section: str, key: str) -> int:
    """GPUs per pod or node: the target's own setting, else the hosts' common explicit count."""
    given = getattr(getattr(plan.cluster.spec, section) or _Empty(), key, None)
    if given is not None:
        return given
    counts = {len(g) if isinstance(g, list) else g for g in (h.gpus for h in plan.cluster.hosts)}
    if len(counts) == 1 and "all" not in counts:
        return counts.pop()
    raise InventoryError(f"{plan.cluster.path}: {section}.{key}: Missing. Expected a GPU count: the hosts' "
                         f"gpus are 'all' or differ ({', '.join(sorted(map(str, counts)))}).")


def program(plan: Plan) -> tuple[list[str], dict[str, str], str]:
    """(command, its extra environment, results folder in the container)."""
    run = plan.cluster.spec.run
    if run:
        return list(run.command), dict(run.env), run.results_dir
    return ["python3", "-m", "trainer", "--config", CONFIG], {}, plan.train_config().results_dir


def train_yaml(plan: Plan) -> Optional[str]:
    """The trainer's config for every replica: backups beside the results, on the shared volume."""
    import yaml
    if plan.cluster.spec.run:
        return None
    cfg = plan.cluster.spec.train_or_defaults
    results = cfg.results_dir.rstrip("/")
    # Only the results volume outlives a pod or a node: keep the backups there, so a restart resumes.
    if not (cfg.backup_dir or "").startswith(results + "/"):
        cfg = cfg.model_copy(update={"backup_dir": f"{results}/backup"})
    return ("# The trainer's configuration for every replica (from the inventory's `train:` section).\n"
            + yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))


def task_env(plan: Plan, results_dir: str, gpus: int) -> dict[str, str]:
    c = plan.cluster
    return {"TFC_NUM_WORKERS": str(len(c.hosts)), "TFC_TF_PORT": str(c.chief.tf_port), "TFC_RESULTS_DIR": results_dir,
            "TFC_RUN_ID": plan.run_id, "TFC_CLUSTER": c.name, "TFC_EXPECT_GPUS": str(gpus)}


# --- Kubernetes JobSet ----------------------------------------------------------------------------

def jobset_files(plan: Plan) -> dict[str, str]:
    import yaml
    k = plan.cluster.spec.kubernetes
    namespace = _required(plan, "kubernetes", "namespace", "a Kubernetes namespace")
    claim = _required(plan, "kubernetes", "results_claim", "a PersistentVolumeClaim for the results")
    files = {"jobset.yaml": yaml.safe_dump(jobset(plan, namespace, claim, k), sort_keys=False)}
    text = train_yaml(plan)
    if text is not None:
        files["configmap.yaml"] = yaml.safe_dump(
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"{plan.cluster.name}-train", "namespace": namespace, "labels": labels(plan)},
             "data": {"train.yaml": text}}, sort_keys=False)
    return files


def labels(plan: Plan) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "tfcompose", "tfcompose.cluster": plan.cluster.name,
            "tfcompose.run": plan.run_id}


def jobset(plan: Plan, namespace: str, claim: str, k) -> dict:
    name, n = plan.cluster.name, len(plan.cluster.hosts)
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": labels(plan)},
            "spec": {"network": {"enableDNSHostnames": True, "subdomain": name},
                     # MWMS cannot lose one replica and go on: the whole set restarts, and resumes
                     # from the backups on the results volume.
                     "failurePolicy": {"maxRestarts": plan.cluster.spec.defaults.restart_retries},
                     "replicatedJobs": [{"name": "worker", "replicas": 1, "template": {"spec": {
                         "parallelism": n, "completions": n, "completionMode": "Indexed", "backoffLimit": 0,
                         "template": {"metadata": {"labels": labels(plan)}, "spec": pod(plan, claim, k)}}}}]}}


def pod(plan: Plan, claim: str, k) -> dict:
    command, extra, results = program(plan)
    gpus = gpus_each(plan, "kubernetes", "gpus_per_pod")
    name = plan.cluster.name
    env = {**task_env(plan, results, gpus), "TFC_PEER_PATTERN": f"{name}-worker-0-{{index}}.{name}", **extra}
    mounts = [{"name": "results", "mountPath": results}, {"name": "shm", "mountPath": "/dev/shm"}]
    volumes = [{"name": "results", "persistentVolumeClaim": {"claimName": claim}},
               {"name": "shm", "emptyDir": {"medium": "Memory"}}]
    if not plan.cluster.spec.run:
        mounts.append({"name": "config", "mountPath": "/config", "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": f"{name}-train"}})
    if k.data_claim:
        mounts.append({"name": "data", "mountPath": "/data", "readOnly": True})
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": k.data_claim, "readOnly": True}})
    container = {"name": "trainer", "image": plan.container_image, "imagePullPolicy": k.image_pull_policy,
                 "args": command, "ports": [{"name": "tf", "containerPort": plan.cluster.chief.tf_port, "protocol": "TCP"}],
                 "env": [{"name": key, "value": value} for key, value in env.items()], "volumeMounts": mounts}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return {"restartPolicy": "Never", "containers": [container], "volumes": volumes}


# --- Slurm ----------------------------------------------------------------------------------------

SBATCH = """#!/bin/bash
# tfcompose cluster {cluster} (run {run}) as one Slurm job: {nodes} node(s), one task each.
# Rendered by `tfcompose render --target slurm`. Submit from this folder: sbatch tfcompose.sbatch
# Each task learns its rank from SLURM_PROCID and its peers from SLURM_JOB_NODELIST (no TF_CONFIG).
#SBATCH --job-name=tfcompose-{cluster}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --time={time}
#SBATCH --output={results}/slurm-%j.out
{extra_sbatch}set -euo pipefail
export {exports}
here=${{SLURM_SUBMIT_DIR:-$(pwd)}}
mkdir -p {results}
srun --ntasks-per-node=1 {runner} {image} tfcompose-entrypoint {command}
"""


def slurm_files(plan: Plan) -> dict[str, str]:
    s = plan.cluster.spec.slurm
    results = _required(plan, "slurm", "results_dir", "a folder on the shared filesystem for the results")
    command, extra, inside = program(plan)
    gpus = gpus_each(plan, "slurm", "gpus_per_node")
    env = {**task_env(plan, inside, gpus), **extra}
    binds = [(results, inside)] + ([(s.data_dir, "/data:ro")] if s.data_dir else [])
    config = [] if plan.cluster.spec.run else [('"$here/train.yaml"', f"{CONFIG}:ro")]
    extra_sbatch = (f"#SBATCH --gpus-per-node={gpus}\n" if gpus else "") + \
        (f"#SBATCH --partition={s.partition}\n" if s.partition else "")
    script = SBATCH.format(cluster=plan.cluster.name, run=plan.run_id, nodes=len(plan.cluster.hosts),
                           time=s.time_limit, results=shlex.quote(results), extra_sbatch=extra_sbatch,
                           exports=" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                           runner=runner(s.runtime, binds, config, gpus), image=image_ref(s.runtime, plan.container_image),
                           command=shlex.join(command))
    files = {"tfcompose.sbatch": script}
    text = train_yaml(plan)
    if text is not None:
        files["train.yaml"] = text
    return files


def runner(runtime: str, binds: list[tuple[str, str]], config: list[tuple[str, str]], gpus: int) -> str:
    mounts = [f"{shlex.quote(a)}:{b}" for a, b in binds] + [f"{a}:{b}" for a, b in config]
    if runtime == "enroot":   # pyxis: srun's own container options
        return f"--container-mounts={','.join(mounts)} --container-image"
    return "apptainer exec " + ("--nv " if gpus else "") + f"--bind {','.join(mounts)}"


def image_ref(runtime: str, image: str) -> str:
    return image if runtime == "enroot" else f"docker://{image}"
