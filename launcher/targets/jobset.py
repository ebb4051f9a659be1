"""Export: the same inventory and image as a Kubernetes JobSet or a Slurm batch script, for when a
lab outgrows SSH (`tfcompose render --target jobset|slurm`).

Neither target gets a TF_CONFIG: each replica learns who it is from the scheduler
(trainer/cluster/rank.py): JobSet pods from JOB_COMPLETION_INDEX and their stable DNS names, Slurm tasks
from SLURM_PROCID and SLURM_JOB_NODELIST. The hosts become a replica count, `gpus` a GPU count
per pod or node, `data_dir` a volume or a path, the train config a ConfigMap or a file. What both
targets share is in common.py, the Slurm job in slurm.py; the JobSet is here (launcher/targets/ names them all).
"""
from __future__ import annotations

import functools
import re

from launcher.plan import Plan
from launcher.targets.common import gpus_each, program, required, task_env, train_yaml

# --- Kubernetes JobSet ----------------------------------------------------------------------------

def jobset_files(plan: Plan) -> dict[str, str]:
    k = plan.cluster.spec.kubernetes
    namespace = required(plan, "kubernetes", "namespace", "a Kubernetes namespace")
    claim = required(plan, "kubernetes", "results_claim", "a PersistentVolumeClaim for the results")
    files = {"jobset.yaml": dump(jobset(plan, namespace, claim, k))}
    text = train_yaml(plan)
    if text is not None:
        files["configmap.yaml"] = dump(
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"{plan.cluster.name}-train", "namespace": namespace, "labels": labels(plan)},
             "data": {"train.yaml": text}})
    return files


def dump(doc: dict) -> str:
    import yaml
    return yaml.dump(doc, Dumper=_quoting_dumper(), sort_keys=False)


@functools.lru_cache(maxsize=None)
def _quoting_dumper():
    """A SafeDumper that quotes every string a YAML 1.2 reader would take for a number.

    PyYAML writes YAML 1.1, where `1e-3` and `0o17` are strings, so it leaves them plain; kubectl's
    reader (and any YAML 1.2 core-schema reader) gets numbers, which the JobSet's schema then
    rejects. Telling the dumper that such text resolves to a number makes it quote the strings.
    Go's number forms (0b…, 0x…, `_` between digits) are quoted too: kubectl is written in Go.
    """
    import yaml

    class QuotingDumper(yaml.SafeDumper):
        pass

    QuotingDumper.add_implicit_resolver(  # YAML 1.2 core: 1e-3, 1e3, .5, 1., -2.5E+3
        "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?$"),
        list("-+.0123456789"))
    QuotingDumper.add_implicit_resolver(  # YAML 1.2 core and Go: 0o17, 0x1F, 0b101, 1_000
        "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0[bBoOxX][0-9a-fA-F_]+|[0-9][0-9_]*)$"), list("-+0123456789"))
    return QuotingDumper


def labels(plan: Plan) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "tfcompose", "tfcompose.cluster": plan.cluster.name,
            "tfcompose.run": plan.run}


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
