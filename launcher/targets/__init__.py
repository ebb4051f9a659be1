"""Targets: the same inventory and image as files for a scheduler other than tfcompose's own SSH
and Compose (`tfcompose render --target NAME`). Each is one module with a function from the plan to
its files (name → text); a new target is that module and one line in TARGETS.

    common.py   what every target shares: the program, its environment, the GPU count, train.yaml
    jobset.py   a Kubernetes JobSet (and the ConfigMap of train.yaml)
    slurm.py    a Slurm batch script (and train.yaml beside it)

`compose` (what `up` pushes, per host) is not here: it is the render stage's (stages/render.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from launcher.files import write_folder
from launcher.plan import Plan
from launcher.targets.jobset import jobset_files
from launcher.targets.slurm import slurm_files

TARGETS: dict[str, Callable[[Plan], dict[str, str]]] = {
    "jobset": jobset_files,
    "slurm": slurm_files,
}


def write(plan: Plan, target: str, out_dir: Path) -> list[Path]:
    """The target's files under out_dir/<cluster>/, each written whole or not at all."""
    return write_folder(Path(out_dir) / plan.cluster.name, TARGETS[target](plan), out_dir)
