"""Collect: the run's results and every host's log into runs/<cluster>/<run>/, and
runs/<cluster>/latest pointing there. Only this run's own folder on each host is read
(`<workdir>/<cluster>/runs/<run>/results`, launcher/runs.py), so nothing of another run comes back.
In parallel mode every host's results go to hosts/<host>/ and the chief's results.json, which names
every trial of the queue and the host that trained it, is the run's. `outcome.json` says how the
run ended (a failed run says so, whatever it left); a log of an earlier attempt of the same run (a
resumed run) is kept beside the new one.

What comes back from a host is hostile input: the run id must look like one tfcompose made, the
copy (transfer.get_tree) writes only regular files under checked names, and nothing is written
outside the run folder: every file in it is written and read as launcher/runfiles.py does (no link
followed, no FIFO read, a fresh temporary name for each file). `--run` names a run some host
still holds, or nothing is done at all.
"""
from __future__ import annotations

import json
import os
import secrets
import threading
from pathlib import Path
from typing import Optional

from launcher import docker_commands as dc, runfiles
from launcher.errors import BadInput, RemoteError, TfcError, summary
from launcher.files import PART
from launcher.inventory.model import Cluster, Host
from launcher.plan import Plan, make, named
from launcher.report import outcome
from launcher.ssh import transfer
from launcher.ssh.group import Group
from launcher.containers import attach, containers, newest, run_label
from launcher.stages.status import statuses
from launcher.telemetry.assemble import assemble
from launcher.text import Scrubber
from launcher.tracking import upload as tracking
from trainer.spec import results


def collect(cluster: Cluster, runs_dir: Path = Path("runs"), reporter=None, run: str = "") -> Path:
    """The cluster's current run (or `run`, one still on the hosts) into runs/<cluster>/<run>/."""
    with Group(cluster, reporter) as group:
        plan = named(make(cluster), run) if run else attach(group, make(cluster))
        if run:
            require_run(group, plan)
        states = {st.host: st for st in statuses(group, with_line=False)}
        chief = states.get(cluster.chief.name)
        state = ("finished" if chief and chief.state == "exited" and chief.exit_code == 0 and chief.run == plan.run
                 else "running" if chief and chief.state in ("running", "restarting") else "unknown")
        return collect_into(group, plan, runs_dir, state, strict=bool(run))


def require_run(group: Group, plan: Plan) -> None:
    """`collect --run`: some host holds the run (its folder, or a container of it), else exit 2
    with nothing made, copied or moved here."""
    def holds(host: Host, conn) -> bool:
        if conn.run(["test", "-d", plan.run_dir(host)], check=False).ok:
            return True
        return any(run_label(c) == plan.run for c in containers(conn, plan.cluster.name, host.name))
    found = group.run("collect", holds)
    if any(found.succeeded.values()):
        return
    found.raise_if_failed()          # a host that did not answer may hold it: said as such (exit 1)
    raise BadInput(f"--run: Received {plan.run!r}, a run no host of cluster {plan.cluster.name} holds. Expected a run "
                   f"still on the hosts (under <workdir>/{plan.cluster.name}/runs/); nothing was collected.")


def collect_into(group: Group, plan: Plan, runs_dir: Path, state: str = "unknown", message: str = "",
                 strict: bool = False) -> Path:
    """This run's results and logs into runs/<cluster>/<run>/, with how it ended (`state`, `message`);
    `strict`: each log only from a container of this very run (a run named by `collect --run`)."""
    cluster = plan.cluster
    Path(runs_dir).mkdir(parents=True, exist_ok=True)      # --runs: the user's, wherever it leads
    run_dir = runfiles.make_folder(Path(runs_dir), Path(cluster.name) / plan.run)     # beneath it, real folders
    for host in cluster.hosts:
        group.reporter.stage(host.name, "collect")
    program, doc = None, None
    if plan.parallel:
        doc = gather_parallel(group, plan, run_dir)
    else:
        copied = fetch_results(group, cluster.chief, run_dir, plan)
        program = program_files(plan, copied)
    logs = group.run("collect", lambda h, c: fetch_log(h, c, cluster.name, run_dir, plan.run, strict))
    for name, exc in list(logs.failed.items()):
        if isinstance(exc, NoLogOfRun):        # an older run whose containers are gone: its results still come
            group.reporter.warn(name, f"no log: {exc.reason}")
            del logs.failed[name]
    logs.raise_if_failed()
    for problem in assemble(run_dir, [h.name for h in cluster.hosts], doc):     # telemetry/<host>.csv; results.json
        group.reporter.warn(None, problem)
    if state == "unknown" and runfiles.is_file(run_dir, runfiles.RESULTS):
        state = "finished"
    outcome.write(run_dir, cluster.name, plan.run, state, message)
    point_latest(group, run_dir)
    write_report(group, run_dir, program)
    tracking.after_collect(group.reporter, plan, plan.run, run_dir)     # with `tracking:`; a tracker down is a warning
    return run_dir


def collect_earlier(group: Group, plan: Plan, earlier: str, runs_dir: Path) -> Optional[Path]:
    """Before `up` starts a new run: the run the hosts were on, if it finished and was never
    collected here (an `up` without --wait, perhaps watched meanwhile), into its own folder, so
    that nothing of it (its results, the telemetry `watch` recorded) waits on the hosts unseen."""
    if not earlier or earlier == plan.run or (Path(runs_dir) / plan.cluster.name / earlier / outcome.FILE).exists():
        return None
    group.reporter.warn(None, f"run {earlier} finished and was not collected: collecting it before the new run")
    try:
        return collect_into(group, named(plan, earlier), runs_dir, "finished")
    except TfcError as exc:     # the new run goes ahead; `collect --run` can try again
        group.reporter.warn(None, f"run {earlier} was not collected ({summary(exc)}); "
                                  f"`tfcompose collect --run {earlier}` brings it back")
        return None


def program_files(plan: Plan, copied) -> "report.ProgramFiles | None":
    """A `run:` program's results as collected: how many files it left in its results folder, and
    where that folder is (None for the built-in trainer, or when the chief's folder was not read)."""
    from launcher.report import build as report
    user = plan.cluster.spec.run
    if user is None or copied is None:
        return None
    return report.ProgramFiles(user.results_dir, len(copied.files))


def write_report(group: Group, run_dir: Path, program=None) -> None:
    """report.md and its pictures; for a run that left no results, report.md says how it ended (a
    `run:` program that wrote nothing where it should have: where its files must go)."""
    from launcher.report import build as report
    if program is not None and program.files == 0:
        group.reporter.warn(plan_chief(group), report.nothing_written(program))
    try:
        try:
            report.write_report(run_dir)
        except results.ResultsError as exc:
            if runfiles.found(run_dir, runfiles.RESULTS) is not None:
                group.reporter.warn(None, f"no report: {exc}")
            report.write_outcome_only(run_dir, program)
    except runfiles.RunFileError as exc:         # a folder where report.md belongs: the run is collected all the same
        group.reporter.warn(None, f"no report: {exc.line}")


def plan_chief(group: Group) -> str:
    return group.cluster.chief.name


def fetch_results(group: Group, host: Host, run_dir: Path, plan: Plan, into: str = "") -> "transfer.TreeCopy | None":
    """The host's results folder of this run into run_dir/into (the run folder itself, or hosts/<host>):
    what was copied, or None when it could not be read."""
    try:
        copy = transfer.get_tree(group.conn(host), f"{plan.run_dir(host)}/results", run_dir / into, root=run_dir)
    except RemoteError as exc:
        group.reporter.warn(host.name, f"no results collected: {exc.reason}")
        return None
    except runfiles.RunFileError as exc:
        group.reporter.warn(host.name, f"no results collected: {exc.line}")
        return None
    for why in copy.skipped:
        group.reporter.warn(host.name, f"left behind: {why}")
    return copy


class NoLogOfRun(RemoteError):
    """`collect --run` of a run whose containers are gone from a host: its log is no more (not another run's)."""


LOG_MAX_BYTES = 512 << 20    # a host's log kept in full up to this; past it, cut with a note


def fetch_log(host: Host, conn, cluster: str, run_dir: Path, run: str = "", strict: bool = False) -> int:
    """The host's container log of this run into logs/<host>.log, streamed to disk (never whole in
    memory) and scrubbed of the secrets this process knows; a log already there from another
    container of the run (an earlier attempt, before the run was resumed) is kept as
    logs/<host>.attempt-<k>.log. `strict`: only a container of this very run (else, for the
    labels of older versions, the cluster's newest)."""
    every = containers(conn, cluster, host.name)
    found = [c for c in every if run_label(c) == run] or ([] if strict else every)
    if not found and strict:
        raise NoLogOfRun(host.name, reason=f"no container of run {run} is left on this host")
    if not found:
        raise RemoteError(host.name, reason=f"no container of cluster {cluster} on this host (run `tfcompose up` first)")
    container = newest(found)["Id"][:12]
    runfiles.make_folder(run_dir, "logs")
    keep_earlier_attempt(run_dir, host.name, container)
    kept, stop, scrubber = [0], threading.Event(), Scrubber()
    with runfiles.writer(run_dir, f"logs/{host.name}.log") as out:
        def take(chunk: bytes) -> None:
            room = LOG_MAX_BYTES - kept[0]
            out.write(scrubber.feed(chunk[:room]))
            kept[0] += min(len(chunk), room)
            if len(chunk) > room:
                stop.set()
        conn.stream(dc.container_logs(container), on_output=take, stop=stop)
        out.write(scrubber.close())
        if stop.is_set():
            out.write(f"\n[tfcompose: the log was cut at {LOG_MAX_BYTES:,} bytes]\n".encode())
    return kept[0]


SEEN = ".log-containers.json"           # beside logs/, which holds logs only


_SEEN_LOCK = threading.Lock()           # every host's log is fetched at once: one writer of SEEN at a time


def keep_earlier_attempt(run_dir: Path, host: str, container: str) -> None:
    """logs/<host>.log came from another container of this run: keep it under an attempt's name."""
    with _SEEN_LOCK:
        _keep_earlier_attempt(run_dir, host, container)


def _keep_earlier_attempt(run_dir: Path, host: str, container: str) -> None:
    try:
        seen = json.loads(runfiles.read_text(run_dir, SEEN, 1 << 20))
        seen = seen if isinstance(seen, dict) else {}
    except (OSError, ValueError, RecursionError):
        seen = {}
    if seen.get(host) not in (None, container) and runfiles.is_file(run_dir, f"logs/{host}.log"):
        k = 1
        while runfiles.found(run_dir, f"logs/{host}.attempt-{k}.log") is not None:
            k += 1
        runfiles.rename(run_dir, "logs", f"{host}.log", f"{host}.attempt-{k}.log")
    runfiles.write_bytes(run_dir, SEEN, json.dumps({**seen, host: container}).encode())


def point_latest(group: Group, run_dir: Path) -> None:
    latest = run_dir.parent / "latest"
    if latest.exists() and not latest.is_symlink():
        group.reporter.warn(None, f"{latest} is not tfcompose's link (a real file or folder); left as it is")
        return
    tmp = run_dir.parent / f".latest.{secrets.token_hex(6)}{PART}"      # a fresh name: nothing there to follow
    tmp.symlink_to(run_dir.name, target_is_directory=True)
    os.replace(tmp, latest)


def gather_parallel(group: Group, plan: Plan, run_dir: Path) -> Optional[dict]:
    """Every host's results into hosts/<host>/ (histories, each host's best model); the overall best
    model copied up from the host that trained it; the chief's results.json, which names every trial
    of the queue and the host that trained it: the run's, written once telemetry has added its figures."""
    fetched = group.run("collect", lambda h, c: fetch_results(group, h, run_dir, plan, f"hosts/{h.name}"))
    chief = plan.cluster.chief.name
    if not fetched.succeeded.get(chief):
        return None
    try:
        doc = runfiles.load_results(run_dir, f"hosts/{chief}")
    except results.ResultsError as exc:
        group.reporter.warn(chief, f"no results: {exc}")
        return None
    host = doc["best"].get("host")
    if host in {h.name for h in plan.cluster.hosts} and runfiles.is_file(run_dir, f"hosts/{host}/best_model.keras"):
        runfiles.copy(run_dir, f"hosts/{host}/best_model.keras", "best_model.keras")
    return doc
