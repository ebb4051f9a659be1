"""Collect: the run's results and every host's log into runs/<cluster>/<run>/, and
runs/<cluster>/latest pointing there. Only this run's own folder on each host is read
(`<workdir>/<cluster>/runs/<run>/results`, launcher/runs.py), so nothing of another run comes back.
In parallel mode every host's results go to hosts/<host>/ and the chief's results.json, which names
every trial of the queue and the host that trained it, is the run's. `outcome.json` says how the
run ended (a failed run says so, whatever it left); a log of an earlier attempt of the same run (a
resumed run) is kept beside the new one.

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
from launcher.plan import Plan, make, named
from launcher.results import outcome
from launcher.ssh import transfer
from launcher.ssh.group import Group
from launcher.stages.status import attach, containers, newest, run_label, statuses
from launcher.telemetry.assemble import assemble
from launcher.tracking import upload as tracking
from trainer import results


def collect(cluster: Cluster, runs_dir: Path = Path("runs"), reporter=None, run: str = "") -> Path:
    """The cluster's current run (or `run`, one still on the hosts) into runs/<cluster>/<run>/."""
    with Group(cluster, reporter) as group:
        plan = named(make(cluster), run) if run else attach(group, make(cluster))
        states = {st.host: st for st in statuses(group, with_line=False)}
        chief = states.get(cluster.chief.name)
        state = ("finished" if chief and chief.state == "exited" and chief.exit_code == 0 and chief.run == plan.run
                 else "running" if chief and chief.state in ("running", "restarting") else "unknown")
        return collect_into(group, plan, runs_dir, state)


def collect_into(group: Group, plan: Plan, runs_dir: Path, state: str = "unknown", message: str = "") -> Path:
    """This run's results and logs into runs/<cluster>/<run>/, with how it ended (`state`, `message`)."""
    cluster = plan.cluster
    run_dir = Path(runs_dir) / cluster.name / plan.run
    for host in cluster.hosts:
        group.reporter.stage(host.name, "collect")
    if plan.parallel:
        gather_parallel(group, plan, run_dir)
    else:
        fetch_results(group, cluster.chief, run_dir, plan)
    group.run("collect", lambda h, c: fetch_log(h, c, cluster.name, run_dir / "logs", plan.run)).raise_if_failed()
    if state == "unknown" and (run_dir / "results.json").is_file():
        state = "finished"
    outcome.write(run_dir, cluster.name, plan.run, state, message)
    point_latest(group, run_dir)
    for problem in assemble(run_dir, [h.name for h in cluster.hosts]):     # telemetry/<host>.csv, per-trial figures
        group.reporter.warn(None, problem)
    write_report(group, run_dir)
    tracking.after_collect(group.reporter, plan, plan.run, run_dir)     # with `tracking:`; a tracker down is a warning
    return run_dir


def write_report(group: Group, run_dir: Path) -> None:
    """report.md and its pictures; for a run that left no results, report.md says how it ended."""
    from launcher.results import report
    try:
        report.write_report(run_dir)
    except results.ResultsError as exc:
        if (run_dir / "results.json").is_file():
            group.reporter.warn(None, f"no report: {exc}")
        report.write_outcome_only(run_dir)


def fetch_results(group: Group, host: Host, into: Path, plan: Plan) -> bool:
    try:
        copy = transfer.get_tree(group.conn(host), f"{plan.run_dir(host)}/results", into)
    except RemoteError as exc:
        group.reporter.warn(host.name, f"no results collected: {exc.reason}")
        return False
    for why in copy.skipped:
        group.reporter.warn(host.name, f"left behind: {why}")
    return True


LOG_MAX_BYTES = 512 << 20    # a host's log kept in full up to this; past it, cut with a note


def fetch_log(host: Host, conn, cluster: str, folder: Path, run: str = "") -> int:
    """The host's container log of this run into logs/<host>.log, streamed to disk (never whole in
    memory); a log already there from another container of the run (an earlier attempt, before the
    run was resumed) is kept as logs/<host>.attempt-<k>.log."""
    every = containers(conn, cluster, host.name)
    found = [c for c in every if run_label(c) == run] or every      # this run's, else (older labels) the newest
    if not found:
        raise RemoteError(host.name, reason=f"no container of cluster {cluster} on this host (run `tfcompose up` first)")
    container = newest(found)["Id"][:12]
    folder.mkdir(parents=True, exist_ok=True)
    keep_earlier_attempt(folder, host.name, container)
    command = dc.container_logs(container)
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


def keep_earlier_attempt(folder: Path, host: str, container: str) -> None:
    """logs/<host>.log came from another container of this run: keep it under an attempt's name."""
    import json
    seen_file = folder.parent / ".log-containers.json"  # beside logs/, which holds logs only
    try:
        seen = json.loads(seen_file.read_text())
        seen = seen if isinstance(seen, dict) else {}
    except (OSError, ValueError):
        seen = {}
    log = folder / f"{host}.log"
    if seen.get(host) not in (None, container) and log.is_file() and not log.is_symlink():
        k = 1
        while (folder / f"{host}.attempt-{k}.log").exists():
            k += 1
        os.replace(log, folder / f"{host}.attempt-{k}.log")
    write_atomic(seen_file, json.dumps({**seen, host: container}).encode())


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
    fetched = group.run("collect", lambda h, c: fetch_results(group, h, run_dir / "hosts" / h.name, plan))
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
