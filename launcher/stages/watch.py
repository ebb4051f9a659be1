"""`tfcompose watch`: attach to a running cluster and show its progress until the run ends, the
same view as `up --wait` (wait.py's loop, acting on nothing): nothing is stopped or collected.
Hardware telemetry is recorded into the run's folder meanwhile (telemetry/<host>.csv)."""
from __future__ import annotations

from pathlib import Path

from launcher.errors import TfcError
from launcher.inventory.model import Cluster
from launcher.plan import make
from launcher.ssh.group import Group
from launcher.stages.collect import chief_run
from launcher.stages.wait import RunOutcome, wait_for_end
from launcher.telemetry.session import sampling


def watch(cluster: Cluster, reporter=None, poll_s: float = 2.0, runs_dir: Path = Path("runs")) -> RunOutcome:
    with Group(cluster, reporter) as group:
        plan = make(cluster)
        with sampling(group, plan, Path(runs_dir) / cluster.name / run_of(group, plan)):   # hardware telemetry
            return wait_for_end(group, plan, poll_s, act=False)


def run_of(group: Group, plan) -> str:
    """The run the chief's container belongs to (its telemetry goes to that run's folder); the
    inventory's when the chief does not answer (the loop then says why)."""
    try:
        return chief_run(group, plan)
    except TfcError:
        return plan.run_id
