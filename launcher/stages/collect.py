"""Collect: the run's results and every host's log into runs/<cluster>/<run>/, and
runs/<cluster>/latest pointing there. In parallel mode every host's results go to hosts/<host>/
and are merged into one results.json (trainer/results.py owns that format).

What comes back from a host is hostile input: the run id must look like one tfcompose made, the
copy (transfer.get_tree) writes only regular files under checked names, and nothing is written
outside the run folder.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from launcher import docker_commands as dc
from launcher.errors import RemoteError
from launcher.files import PART, atomic_writer, write_atomic
from launcher.inventory.model import Cluster, Host
from launcher.plan import Plan, make
from launcher.ssh import transfer
from launcher.ssh.group import Group
from launcher.stages.status import containers, newest, newest_container, run_label
from launcher.telemetry.assemble import assemble
from trainer import results


def collect(cluster: Cluster, runs_dir: Path = Path("runs"), reporter=None) -> Path:
    plan = make(cluster)
    with Group(cluster, reporter) as group:
        return collect_into(group, plan, chief_run(group, plan), runs_dir)


def chief_run(group: Group, plan: Plan) -> str:
    """The run of the chief's newest container (it may predate an edit of the inventory)."""
    chief = plan.cluster.chief
    found = containers(group.conn(chief), plan.cluster.name, chief.name)
    if not found:
        return plan.run_id
    run = run_label(newest(found))
    if not run:
        group.reporter.warn(chief.name, "the container's tfcompose.run label is not a run id tfcompose writes; "
                                        f"collecting into run {plan.run_id} instead")
    return run or plan.run_id


def collect_into(group: Group, plan: Plan, run: str, runs_dir: Path) -> Path:
    cluster = plan.cluster
    run_dir = Path(runs_dir) / cluster.name / run
    for host in cluster.hosts:
        group.reporter.stage(host.name, "collect")
    if plan.parallel:
        gather_parallel(group, plan, run_dir)
    else:
        fetch_results(group, cluster.chief, run_dir)
    group.run("collect", lambda h, c: fetch_log(h, c, cluster.name, run_dir / "logs")).raise_if_failed()
    point_latest(group, run_dir)
    for problem in assemble(run_dir, [h.name for h in cluster.hosts]):     # telemetry/<host>.csv, per-trial figures
        group.reporter.warn(None, problem)
    if (run_dir / "results.json").is_file():
        from launcher.results import report
        try:
            report.write_report(run_dir)
        except results.ResultsError as exc:
            group.reporter.warn(None, f"no report: {exc}")
    return run_dir


def fetch_results(group: Group, host: Host, into: Path) -> bool:
    try:
        copy = transfer.get_tree(group.conn(host), f"{host.bundle_dir}/results", into)
    except RemoteError as exc:
        group.reporter.warn(host.name, f"no results collected: {exc.reason}")
        return False
    for why in copy.skipped:
        group.reporter.warn(host.name, f"left behind: {why}")
    return True


LOG_MAX_BYTES = 512 << 20    # a host's log kept in full up to this; past it, cut with a note


def fetch_log(host: Host, conn, cluster: str, folder: Path) -> int:
    """The host's container log into logs/<host>.log, streamed to disk (never whole in memory)."""
    command = dc.container_logs(newest_container(conn, cluster, host.name)["Id"][:12])
    folder.mkdir(parents=True, exist_ok=True)
    kept = [0]
    stop = threading.Event()
    with atomic_writer(folder / f"{host.name}.log") as out:
        def take(chunk: bytes) -> None:
            room = LOG_MAX_BYTES - kept[0]
            out.write(chunk[:room])
            kept[0] += min(len(chunk), room)
            if len(chunk) > room:
                stop.set()
        conn.stream(command, on_output=take, stop=stop)
        if stop.is_set():
            out.write(f"\n[tfcompose: the log was cut at {LOG_MAX_BYTES:,} bytes]\n".encode())
    return kept[0]


def point_latest(group: Group, run_dir: Path) -> None:
    latest = run_dir.parent / "latest"
    if latest.exists() and not latest.is_symlink():
        group.reporter.warn(None, f"{latest} is not tfcompose's link (a real file or folder); left as it is")
        return
    tmp = run_dir.parent / f".latest{PART}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_dir.name, target_is_directory=True)
    os.replace(tmp, latest)


def gather_parallel(group: Group, plan: Plan, run_dir: Path) -> None:
    """Every host's results into hosts/<host>/ (histories, each host's best model); the chief's
    results.json, which names every trial of the queue and the host that trained it, as the run's;
    the overall best model copied up from the host that trained it."""
    fetched = group.run("collect", lambda h, c: fetch_results(group, h, run_dir / "hosts" / h.name))
    chief = plan.cluster.chief.name
    if not fetched.succeeded.get(chief):
        return
    try:
        doc = results.load(run_dir / "hosts" / chief)
    except results.ResultsError as exc:
        group.reporter.warn(chief, f"no results: {exc}")
        return
    results.write_json_atomic(run_dir / "results.json", doc)
    host = doc["best"].get("host")
    source = run_dir / "hosts" / str(host) / "best_model.keras"
    if host in {h.name for h in plan.cluster.hosts} and source.is_file() and not source.is_symlink():
        write_atomic(run_dir / "best_model.keras", source.read_bytes())
