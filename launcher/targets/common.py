"""What the JobSet and the Slurm job make of the plan alike: the program and its environment, the
trainer's config, the GPUs per replica, and the fields a target cannot do without.

Neither target gets a TF_CONFIG: each replica learns who it is from the scheduler
(trainer/cluster/rank.py), so every replica gets the same environment.
"""
from __future__ import annotations

from typing import Optional

from launcher.errors import InventoryError
from launcher.plan import Plan

CONFIG = "/config/train.yaml"


def required(plan: Plan, section: str, key: str, expected: str):
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
            "TFC_RUN_ID": plan.run, "TFC_CLUSTER": c.name, "TFC_EXPECT_GPUS": str(gpus)}
