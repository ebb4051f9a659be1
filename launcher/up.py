"""`up`: the stages in order, on every host; all or nothing.

    plan → preflight (+ cluster rules) → render → push → image → links → start [→ wait → collect]
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from launcher import hooks, image, links, plan as plan_mod, preflight, push, render, start, wait
from launcher.collect import collect_into
from launcher.errors import ClusterFailed, TfcError
from launcher.group import Group
from launcher.inventory import Cluster


@dataclass
class UpReport:
    run_id: str
    bytes_pushed: dict
    images: dict
    started: dict
    links: Optional[links.Matrix] = None
    nics: Optional[dict] = None
    outcome: Optional[wait.RunOutcome] = None


def up(cluster: Cluster, reporter=None, parallel: Optional[int] = None,
       wait_for_end: bool = False, poll_s: float = 2.0, runs_dir: Path = Path("runs")) -> UpReport:
    with Group(cluster, reporter, parallel) as group:
        plan, facts = preflight.ready_plan(group, plan_mod.make(cluster))
        pushed = push.push(group, render.render_cluster(plan))
        images = image.provide(group, plan)
        matrix = links.check(group, plan) if links.needed(plan, facts) else None
        started = start.start(group, plan)
        for host in cluster.hosts:
            group.reporter.stage(host.name, "running")
        report = UpReport(plan.run_id, pushed, {h: asdict(o) for h, o in images.items()}, started, matrix, plan.nics)
        if wait_for_end:
            report.outcome = wait.wait_for_chief(group, plan, poll_s)
            collect_after(group, plan, report.outcome, runs_dir)
            problem = hooks.after_run(plan, report.outcome.failed, report.outcome.message,
                                      Path(runs_dir) / cluster.name / plan.run_id)
            if problem:
                group.reporter.warn(None, problem)
            if report.outcome.failed:
                raise ClusterFailed(report.outcome.message)
    return report


def collect_after(group: Group, plan, outcome: wait.RunOutcome, runs_dir: Path) -> None:
    """Collect what there is; after a failed run, a host that cannot give its part is a warning,
    so that the reason the run failed stays the error the user sees."""
    try:
        collect_into(group, plan, plan.run_id, runs_dir)
    except TfcError as exc:
        if not outcome.failed:
            raise
        group.reporter.warn(None, f"collecting after the failure: {str(exc).splitlines()[0]}")
