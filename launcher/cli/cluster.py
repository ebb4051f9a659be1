"""Commands on a cluster and its run: up, status, watch, logs, tensorboard, collect, down."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from launcher.cli.app import (InventoryOpt, ParallelOpt, RunsOpt, app, load_inventory, load_tracked, print_error, say,
                              say_tracking)
from launcher.errors import BadInput, ClusterFailed, TfcError, summary


@app.command("up")
def up_cmd(inventory_path: Path = InventoryOpt, wait: bool = typer.Option(False, "--wait", help="wait for the chief, then collect"),
           parallel: Optional[int] = ParallelOpt, runs: Path = RunsOpt,
           queue: bool = typer.Option(False, "--queue", help="wait for hosts another cluster holds, in the order asked"),
           break_lease: bool = typer.Option(False, "--break-lease", help="take leases in the way whose containers are "
                                            "gone or ended (never a live one)"),
           new_run: bool = typer.Option(False, "--new-run", help="start a new run even if the last one of this "
                                        "inventory stopped before its end (it would be resumed)")) -> None:
    """Lease, preflight, push, ship the image and start on every host; all or nothing. A running run
    goes on untouched, one that stopped before its end is resumed, anything else is a new run."""
    from launcher.stages.up import up
    from launcher.view import RichReporter, leaderboard, lost_trials, out, up_table
    cluster = load_tracked(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        report = up(cluster, rep, parallel, wait_for_end=wait, runs_dir=runs, queue=queue, break_lease=break_lease,
                    new_run=new_run)
    out.print(up_table(cluster, report))
    say({"new": f"run {report.run_id}: a new run", "resumed": f"run {report.run_id}: resumed where it stopped",
          "running": f"run {report.run_id}: already running, left as it is"}[report.how])
    if report.links:
        say(f"links between hosts ({report.links.port}), all open:\n{report.links.text()}")
    if report.outcome:
        latest = runs / cluster.name / "latest"
        board = leaderboard(latest)
        if board is not None:
            out.print(board)
        for line in lost_trials(latest):
            say(line)
        say(f"{report.outcome.message}; results" + (" and report.md" if (latest / "report.md").is_file() else "")
             + f" in {latest}")
        say_tracking(latest)
    else:
        say("started; follow with `tfcompose logs`, check with `tfcompose status`")


@app.command("status")
def status_cmd(inventory_path: Path = InventoryOpt, as_json: bool = typer.Option(False, "--json", help="JSON for scripts"),
               parallel: Optional[int] = ParallelOpt) -> None:
    """Each host's container: state, exit code, uptime, restarts, last progress line; and its leases."""
    from launcher.stages.status import status
    from launcher.view import leases_table, out, status_table, table
    cluster = load_inventory(inventory_path)
    states = status(cluster, parallel=parallel)
    if as_json:
        print(json.dumps([asdict(st) for st in states], indent=2))
        return
    out.print(status_table(cluster, states))
    if any(st.hardware_line for st in states):       # GPUs, CPU, memory, network now (telemetry)
        out.print(table("hardware now", ["host", "GPUs, CPU, memory, network"], [[st.host, st.hardware_line] for st in states]))
    out.print(leases_table(states))
    for st in states:
        for note in st.lease_notes:
            print_error(f"warning: {st.host}: {note}")


@app.command("watch")
def watch_cmd(inventory_path: Path = InventoryOpt,
              poll: float = typer.Option(2.0, "--poll", min=0.2, help="seconds between looks at the hosts"),
              runs: Path = RunsOpt) -> None:
    """Attach to a running cluster: each host's trial, epoch, images/s, metrics, ETA and hardware until
    the run ends (Ctrl-C leaves it running). Stops nothing, collects nothing; records the hardware's
    telemetry into the run's folder."""
    from launcher.stages.watch import watch
    from launcher.view import RichReporter
    cluster = load_tracked(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        outcome = watch(cluster, rep, poll, runs)
    if outcome.failed:
        raise ClusterFailed(outcome.message)
    say(outcome.message)


@app.command("logs")
def logs_cmd(inventory_path: Path = InventoryOpt, host: Optional[str] = typer.Option(None, "--host", help="a host other than the chief"),
             every: bool = typer.Option(False, "--all", help="every host's log in one stream, each line with its host"),
             follow: bool = typer.Option(True, "--follow/--no-follow", help="follow until the (chief's) container ends"),
             since: Optional[str] = typer.Option(None, "--since", help="as docker compose logs: 10m, 2h, or a timestamp"),
             tail: Optional[int] = typer.Option(None, "--tail", min=0, help="only the last N lines of each log")) -> None:
    """The chief's container output (or --host's, or --all hosts'), followed until Ctrl-C or the chief ends."""
    import re
    from launcher.stages.logs import logs, logs_all
    if since is not None and not re.fullmatch(r"[0-9A-Za-z:.+-]{1,40}", since):
        raise BadInput(f"--since: Received {since!r}. Expected a duration like 10m or 2h, or a timestamp.")
    cluster = load_inventory(inventory_path)
    if every:
        from launcher.view import log_line_printer
        failed = logs_all(cluster, follow, log_line_printer([h.name for h in cluster.hosts]), since, tail)
        for name, exc in failed.items():
            print_error(f"warning: {name}: no log: {summary(exc)}")
        return

    def write(_host: str, line: str) -> None:       # a host's line, made safe to print
        from launcher.text import printable
        sys.stdout.write(printable(line) + "\n")
        sys.stdout.flush()

    logs(cluster, host, follow, write, since, tail)


@app.command("tensorboard")
def tensorboard_cmd(run_dir: Optional[Path] = typer.Argument(None, help="a collected run (runs/<cluster>/<run>), served "
                                                             "from this machine; without it, the running cluster's"),
                    inventory_path: Optional[Path] = typer.Option(None, "--inventory", "-i", dir_okay=False,
                                                                  help="the inventory YAML (default: inventory.yaml)"),
                    port: int = typer.Option(6006, "--port", min=0, max=65535, help="the port on this machine (0: any free one)"),
                    host: Optional[str] = typer.Option(None, "--host", help="a host other than the chief (a parallel "
                                                       "search: each host writes its own)")) -> None:
    """TensorBoard of the running training (the chief's, or --host's) on a port of this machine, through
    SSH, until Ctrl-C, which stops it and leaves nothing running; or a collected run's, served here."""
    from launcher.stages import tensorboard as tb

    def ready(served) -> None:
        say(f"TensorBoard of {served.what}: {served.url} (Ctrl-C stops it)")

    if run_dir is not None:
        if inventory_path is not None:
            raise BadInput(f"{run_dir}: Received a run folder and --inventory {inventory_path}. Expected one of the two: "
                           "a collected run is served from this machine, the inventory's cluster from its host.")
        served = tb.serve_collected(run_dir, host, port, ready)
    else:
        served = tb.serve_live(load_inventory(inventory_path or Path("inventory.yaml")), host, port, ready)
    if served.failed:
        raise TfcError(served.message)
    say(served.message)


@app.command("collect")
def collect_cmd(inventory_path: Path = InventoryOpt, runs: Path = RunsOpt,
                run: Optional[str] = typer.Option(None, "--run", help="a run still on the hosts other than the current one")) -> None:
    """The chief's results and every host's log into runs/<cluster>/<run>/ (and runs/<cluster>/latest)."""
    from launcher.runs import RUN_ID_RE
    from launcher.stages.collect import collect
    from launcher.view import RichReporter, leaderboard, out
    if run is not None and not RUN_ID_RE.match(run):
        raise BadInput(f"--run: Received {run!r}. Expected a run id as `tfcompose runs` shows it, like 20261125-140233-3f2a1b2c.")
    cluster = load_tracked(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        run_dir = collect(cluster, runs, rep, run or "")
    board = leaderboard(run_dir)
    if board is not None:
        out.print(board)
    report_md = run_dir / "report.md"
    say(f"collected into {run_dir}" + (f" (report: {report_md})" if report_md.is_file() else " (no report: no results.json)"))
    say_tracking(run_dir)




@app.command("down")
def down_cmd(inventory_path: Path = InventoryOpt, purge: bool = typer.Option(False, "--purge", help="also remove the pushed files and results on the hosts"),
             parallel: Optional[int] = ParallelOpt) -> None:
    """Stop and remove the cluster's containers everywhere; unreachable hosts get a warning."""
    from launcher.stages.down import down
    result = down(load_inventory(inventory_path), purge, parallel=parallel)
    for host in result.hosts:
        if host in result.succeeded:
            say(f"{host}: {result.succeeded[host]}")
        else:
            print_error(f"warning: {host}: nothing removed there: {summary(result.failed[host])}")


