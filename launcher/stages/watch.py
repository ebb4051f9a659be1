"""`tfcompose watch`: attach to a running cluster and show its progress until the run ends, the
same view as `up --wait` (wait.py's loop, acting on nothing): nothing is stopped or collected.
Hardware telemetry is recorded into the run's folder meanwhile (telemetry/<host>.csv)."""
from __future__ import annotations

from pathlib import Path

from launcher.inventory.model import Cluster
from launcher.plan import make
from launcher.ssh.group import Group
from launcher.containers import attach
from launcher.stages.wait import RunOutcome, wait_for_end
from launcher.telemetry.session import sampling
from launcher.tracking.outbox import live


def watch(cluster: Cluster, reporter=None, poll_s: float = 2.0, runs_dir: Path = Path("runs")) -> RunOutcome:
    with Group(cluster, reporter) as group:
        plan = attach(group, make(cluster))
        # with `tracking:`, each epoch to the tracker as it comes; hardware telemetry into the run folder
        with live(group, plan, plan.run), sampling(group, plan, Path(runs_dir) / cluster.name / plan.run):
            return wait_for_end(group, plan, poll_s, act=False)
