"""`tfcompose`: parse, dispatch, print. Exceptions become exit codes here and only here.

Heavy libraries (paramiko, the docker SDK, matplotlib, jinja2, rich's live view) are imported by
the command that needs them, so `--help` and `validate` start fast.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from launcher.errors import BadInput, ClusterFailed, ExitCode, InventoryError, TfcError, summary
from launcher.runfiles import RunFileError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and compare TensorFlow models across the GPU boxes of an inventory.")

InventoryOpt = typer.Option(Path("inventory.yaml"), "--inventory", "-i", help="the inventory YAML", dir_okay=False)
ParallelOpt = typer.Option(None, "--parallel", min=1, help="hosts worked on at once (default: all)")
RunsOpt = typer.Option(Path("runs"), "--runs", help="where results go")


@app.callback()
def _global(debug: bool = typer.Option(False, "--debug", help="show tracebacks")) -> None:
    """--debug is read by main(); declared here so that typer accepts it."""


def _load(path: Path):
    from launcher.inventory.load import load_cluster
    cluster = load_cluster(path)
    if cluster.tracking is not None:        # its password or token masked in all this process prints
        from launcher.tracking.secrets import remember
        remember(cluster.tracking.uri)
    return cluster


def _load_tracked(path: Path):
    """An inventory for a command that may send to its tracker: MLflow's client must be here."""
    from launcher.tracking.client import require_client
    cluster = _load(path)
    require_client(cluster)
    return cluster


def _say_tracking(run_dir: Path) -> None:
    from launcher.tracking.ledger import summary
    line = summary(run_dir)
    if line:
        _say(line)


def _say(text: str) -> None:
    from launcher.view import say
    say(text)


@app.command()
def validate(inventory_path: Path = InventoryOpt) -> None:
    """Check the inventory; print the cluster it describes. Contacts nothing, runs nothing."""
    from launcher.plan import expect_gpus
    from launcher.view import out, table
    cluster = _load_tracked(inventory_path)
    rows = [[f"{h.index}{' (chief)' if h.chief else ''}", h.name, f"{h.ssh_user}@{h.address}:{h.ssh_port}",
             h.tf_address, expect_gpus(h.gpus), h.bundle_dir] for h in cluster.hosts]
    columns = ["task", "host", "ssh", "TF address", "gpus", "workdir"]
    if any(h.jumps or h.proxy_command for h in cluster.hosts):      # how SSH gets there, first hop first
        columns.insert(3, "via")
        for row, h in zip(rows, cluster.hosts):
            row.insert(3, " → ".join(b.target for b in h.jumps) or ("ProxyCommand" if h.proxy_command else "direct"))
    out.print(table(f"cluster {cluster.name}: {len(cluster.hosts)} host(s), image {cluster.spec.image}", columns, rows))
    if cluster.tracking is not None:
        from launcher.tracking.secrets import shown
        t = cluster.tracking
        _say(f"tracking: MLflow at {shown(t.uri)}, experiment {t.experiment!r}"
             + (f", best model registered as {t.register_as}" if t.register_as else ""))
    if cluster.spec.run is None:        # the search it understood: your own program searches as it likes
        from launcher.report.values import space_lines
        for line in space_lines(cluster.spec.train_or_defaults):
            _say(line)
    _say(f"{inventory_path}: valid")


@app.command("schema")
def schema_cmd() -> None:
    """Print the inventory's JSON Schema (every key, its type, default and description), for editors:
    an inventory whose first line is `# yaml-language-server: $schema=<file>` gets completion and checks."""
    from launcher.inventory.json_schema import text
    sys.stdout.write(text())


@app.command("init")
def init_cmd(hosts: list[str] = typer.Argument(..., help="the hosts: host, user@host, host:port, or ~/.ssh/config aliases"),
             output: Path = typer.Option(Path("inventory.yaml"), "--output", "-o", dir_okay=False,
                                         help="the inventory to write (never overwritten)"),
             cluster: str = typer.Option("lab", "--cluster", help="the cluster's name in it"),
             user: Optional[str] = typer.Option(None, "--user", help="the login user on every host (default: "
                                                "~/.ssh/config's, else yours)"),
             identity_file: Optional[Path] = typer.Option(None, "--identity-file", dir_okay=False,
                                                          help="the private key (default: the agent, ~/.ssh/config)"),
             known_hosts: Optional[Path] = typer.Option(None, "--known-hosts", dir_okay=False,
                                                        help="where host keys are checked (default ~/.ssh/known_hosts)"),
             accept_new: bool = typer.Option(False, "--accept-new", help="record a host key seen for the first time "
                                             "(default: strict, an unknown key is refused)"),
             parallel: Optional[int] = ParallelOpt) -> None:
    """Ask each host, over SSH and read-only, for its OS, Docker, GPUs, network interfaces and free disk,
    and write a commented starter inventory for them (a file that exists is refused)."""
    from launcher.bootstrap.init import SshOptions, init
    from launcher.inventory.json_schema import schema_reference
    from launcher.view import RichReporter
    ssh = SshOptions(user, identity_file.absolute() if identity_file else None,
                     known_hosts.absolute() if known_hosts else None, accept_new)
    names = [f"h{i}" for i in range(len(hosts))]
    with RichReporter(names) as rep:
        written = init(hosts, output, cluster, ssh, schema_reference(output),
                       "tfcompose init " + " ".join(hosts), rep, parallel)
    for name, address, found in written.hosts:
        gpus = f"{len(found.gpus)} GPU(s)" if found.gpus else "no GPU"
        docker = f"Docker {found.engine_version}" if found.engine_version else "no Docker"
        _say(f"{name} ({address}): {found.os_name}, {docker}, {gpus}" + (f", route via {found.route_nic}"
                                                                          if found.route_nic else ""))
    _say(f"wrote {written.path}; check it with `tfcompose validate -i {written.path}`")


@app.command("render")
def render_cmd(inventory_path: Path = InventoryOpt,
               output: Path = typer.Option(Path("build"), "--output", "-o", help="folder to write into"),
               target: str = typer.Option("compose", "--target", help="compose (what `up` pushes), jobset (Kubernetes) "
                                          "or slurm (an sbatch script)")) -> None:
    """Write exactly what `up` pushes (build/<cluster>/<host>/…), or the cluster as a Kubernetes JobSet
    (build/<cluster>/{jobset,configmap}.yaml) or a Slurm job (build/<cluster>/{tfcompose.sbatch,train.yaml})."""
    from launcher import plan, targets
    from launcher.stages import render
    if target not in ("compose", *targets.TARGETS):
        raise BadInput(f"--target: Received {target!r}. Expected compose, {', '.join(targets.TARGETS)}.")
    made = plan.make(_load(inventory_path))
    paths = render.write_bundles(made, output) if target == "compose" else targets.write(made, target, output)
    for path in paths:
        _say(str(path))


@app.command("preflight")
def preflight_cmd(inventory_path: Path = InventoryOpt, parallel: Optional[int] = ParallelOpt) -> None:
    """Check every host at once: SSH, Docker, compose v2, GPUs, tf_port, workdir, disk, data_dir, clock."""
    from launcher.stages import preflight
    from launcher.view import RichReporter
    cluster = _load(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        found = preflight.run(cluster, rep, parallel)
    for host in cluster.hosts:
        f = found.facts[host.name]
        _say(f"{host.name}: ready (docker compose {f.compose}, "
             f"{f.free_kb // 1048576 if f.free_kb is not None else '?'} GB free, nic {found.plan.nic(host) or '?'})")
    _say(f"links between hosts ({found.links.port}):\n{found.links.text()}" if found.links else
         "links between hosts: checked by `up` once the image is on every host")
    if cluster.spec.dataset_source:
        _say("datasets: `up` makes every data_dir a copy of dataset_source, then checks them")
    elif found.datasets:
        _say(f"datasets: the {len(found.datasets)} hosts hold the same files "
             f"({next(iter(found.datasets.values())).summary()})")


@app.command("bootstrap")
def bootstrap_cmd(inventory_path: Path = InventoryOpt,
                  yes: bool = typer.Option(False, "--yes", "-y", help="take the steps (without it: the plan only, nothing "
                                           "changes)"),
                  offline: Optional[bool] = typer.Option(None, "--offline/--online", help="the hosts need no network: "
                                                         "their .debs are resolved here and sent over SSH (default: the "
                                                         "inventory's bootstrap.offline)"),
                  ask_become_pass: bool = typer.Option(False, "--ask-become-pass", "-K", help="ask once for the sudo "
                                                       "password of the hosts' user (given to sudo on stdin only)"),
                  parallel: Optional[int] = ParallelOpt) -> None:
    """Make bare Debian 12 / Ubuntu 22.04, 24.04 boxes ready hosts: Docker with compose v2, you in the
    docker group, the workdir, and on GPU hosts the NVIDIA Container Toolkit. Prints the plan; --yes does it."""
    from launcher.bootstrap.stage import Options, Secret, bootstrap
    from launcher.view import RichReporter, bootstrap_lines
    cluster = _load(inventory_path)
    secret = None
    if ask_become_pass:
        import getpass
        try:
            secret = Secret(getpass.getpass("sudo password on the hosts: "))
        except EOFError:
            raise BadInput("--ask-become-pass: Received no password (its input ended). Expected the sudo password, "
                           "typed at the terminal or given on stdin.") from None
    try:
        with RichReporter([h.name for h in cluster.hosts]) as rep:
            outcome = bootstrap(cluster, rep, Options(yes=yes, offline=offline, become_pass=secret), parallel)
    except KeyboardInterrupt:
        if yes:
            _print_error("tfcompose: an installation already started goes on on its host; `tfcompose bootstrap` "
                         "again follows it to its end")
        raise
    for line in bootstrap_lines(outcome):
        _say(line)
    if not outcome.ok:
        bad = [f"{r.host} {r.state}" for r in outcome.hosts.values() if not r.ok]
        raise TfcError(f"bootstrap: {len(bad)} of {len(outcome.hosts)} host(s) not ready ({', '.join(bad)})")


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
    cluster = _load_tracked(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        report = up(cluster, rep, parallel, wait_for_end=wait, runs_dir=runs, queue=queue, break_lease=break_lease,
                    new_run=new_run)
    out.print(up_table(cluster, report))
    _say({"new": f"run {report.run_id}: a new run", "resumed": f"run {report.run_id}: resumed where it stopped",
          "running": f"run {report.run_id}: already running, left as it is"}[report.how])
    if report.links:
        _say(f"links between hosts ({report.links.port}), all open:\n{report.links.text()}")
    if report.outcome:
        latest = runs / cluster.name / "latest"
        board = leaderboard(latest)
        if board is not None:
            out.print(board)
        for line in lost_trials(latest):
            _say(line)
        _say(f"{report.outcome.message}; results" + (" and report.md" if (latest / "report.md").is_file() else "")
             + f" in {latest}")
        _say_tracking(latest)
    else:
        _say("started; follow with `tfcompose logs`, check with `tfcompose status`")


@app.command("status")
def status_cmd(inventory_path: Path = InventoryOpt, as_json: bool = typer.Option(False, "--json", help="JSON for scripts"),
               parallel: Optional[int] = ParallelOpt) -> None:
    """Each host's container: state, exit code, uptime, restarts, last progress line; and its leases."""
    from launcher.stages.status import status
    from launcher.view import leases_table, out, status_table, table
    cluster = _load(inventory_path)
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
            _print_error(f"warning: {st.host}: {note}")


@app.command("watch")
def watch_cmd(inventory_path: Path = InventoryOpt,
              poll: float = typer.Option(2.0, "--poll", min=0.2, help="seconds between looks at the hosts"),
              runs: Path = RunsOpt) -> None:
    """Attach to a running cluster: each host's trial, epoch, images/s, metrics, ETA and hardware until
    the run ends (Ctrl-C leaves it running). Stops nothing, collects nothing; records the hardware's
    telemetry into the run's folder."""
    from launcher.stages.watch import watch
    from launcher.view import RichReporter
    cluster = _load_tracked(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        outcome = watch(cluster, rep, poll, runs)
    if outcome.failed:
        raise ClusterFailed(outcome.message)
    _say(outcome.message)


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
    cluster = _load(inventory_path)
    if every:
        from launcher.view import log_line_printer
        failed = logs_all(cluster, follow, log_line_printer([h.name for h in cluster.hosts]), since, tail)
        for name, exc in failed.items():
            _print_error(f"warning: {name}: no log: {summary(exc)}")
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
        _say(f"TensorBoard of {served.what}: {served.url} (Ctrl-C stops it)")

    if run_dir is not None:
        if inventory_path is not None:
            raise BadInput(f"{run_dir}: Received a run folder and --inventory {inventory_path}. Expected one of the two: "
                           "a collected run is served from this machine, the inventory's cluster from its host.")
        served = tb.serve_collected(run_dir, host, port, ready)
    else:
        served = tb.serve_live(_load(inventory_path or Path("inventory.yaml")), host, port, ready)
    if served.failed:
        raise TfcError(served.message)
    _say(served.message)


@app.command("collect")
def collect_cmd(inventory_path: Path = InventoryOpt, runs: Path = RunsOpt,
                run: Optional[str] = typer.Option(None, "--run", help="a run still on the hosts other than the current one")) -> None:
    """The chief's results and every host's log into runs/<cluster>/<run>/ (and runs/<cluster>/latest)."""
    from launcher.runs import RUN_ID_RE
    from launcher.stages.collect import collect
    from launcher.view import RichReporter, leaderboard, out
    if run is not None and not RUN_ID_RE.match(run):
        raise BadInput(f"--run: Received {run!r}. Expected a run id as `tfcompose runs` shows it, like 20261125-140233-3f2a1b2c.")
    cluster = _load_tracked(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        run_dir = collect(cluster, runs, rep, run or "")
    board = leaderboard(run_dir)
    if board is not None:
        out.print(board)
    report_md = run_dir / "report.md"
    _say(f"collected into {run_dir}" + (f" (report: {report_md})" if report_md.is_file() else " (no report: no results.json)"))
    _say_tracking(run_dir)


@app.command("track")
def track_cmd(run_dir: Path = typer.Argument(..., help="a collected run: runs/<cluster>/<run>"),
              inventory_path: Optional[Path] = typer.Option(None, "--inventory", "-i", dir_okay=False,
                                                            help="its inventory: its tracking: section and settings")) -> None:
    """Send a collected run to MLflow (what is not there yet): one parent run, one run per trial, the
    best model registered. Without --inventory: MLFLOW_TRACKING_URI, or where the run went before."""
    from launcher.tracking import upload
    from launcher.tracking.client import require_client
    upload.check_run_folder(run_dir)            # a folder that is no run: refused before anything else
    cluster = _load(inventory_path) if inventory_path else None
    settings = upload.settings_for(run_dir, cluster)
    require_client(cluster or _Tracked(settings, run_dir))
    book = upload.send(settings, upload.from_folder(run_dir, cluster))
    _say_tracking(run_dir)
    if not book.complete:
        raise TfcError(f"not all sent: {book.pending}")


class _Tracked:
    """What require_client needs to name: the run folder, for a run tracked without an inventory."""

    def __init__(self, settings, run_dir: Path):
        self.tracking, self.path = settings, run_dir


@app.command("down")
def down_cmd(inventory_path: Path = InventoryOpt, purge: bool = typer.Option(False, "--purge", help="also remove the pushed files and results on the hosts"),
             parallel: Optional[int] = ParallelOpt) -> None:
    """Stop and remove the cluster's containers everywhere; unreachable hosts get a warning."""
    from launcher.stages.down import down
    result = down(_load(inventory_path), purge, parallel=parallel)
    for host in result.hosts:
        if host in result.succeeded:
            _say(f"{host}: {result.succeeded[host]}")
        else:
            _print_error(f"warning: {host}: nothing removed there: {summary(result.failed[host])}")


@app.command("runs")
def runs_cmd(inventory_path: Optional[Path] = typer.Option(None, "--inventory", "-i", help="only this inventory's cluster",
                                                           dir_okay=False), runs: Path = RunsOpt) -> None:
    """The collected runs: id, date, mode, trials, best trial and its val_accuracy, duration, restarts
    (a run whose files tfcompose cannot read is listed as damaged, saying why)."""
    from launcher.report.history import find
    from launcher.text import clock
    from launcher.view import out, table
    found = find(runs, _load(inventory_path).name if inventory_path else None, with_damaged=True)
    rows = [[r.cluster, r.run_id, r.state, r.started, r.mode, r.trials or "", r.best,
             f"{r.best_val_accuracy:.4f}" if r.trials else "", clock(r.duration_s) if r.trials else "", r.restarts]
            for r in found]
    out.print(table(f"runs in {runs}", ["cluster", "run", "state", "started", "mode", "trials", "best trial", "val_acc",
                                        "duration", "restarts"], rows))


@app.command("compare")
def compare_cmd(refs: list[str] = typer.Argument(..., help="run folders or run ids (see `tfcompose runs`)"),
                runs: Path = RunsOpt,
                output: Path = typer.Option(Path("compare.png"), "--output", "-o", help="the picture to write")) -> None:
    """Leaderboards side by side, and one picture of each run's best validation curve."""
    from launcher.report.history import compare_picture, leaderboards, picture_path, resolve
    from launcher.view import out, table
    picture_path(output)            # a wrong --output is refused before anything is read
    folders = [resolve(runs, ref) for ref in refs]
    columns, rows = leaderboards(folders)
    out.print(table("leaderboards", columns, rows))
    _say(str(compare_picture(folders, output)))


@app.command("report")
def report_cmd(run_dir: Path = typer.Argument(..., help="a run folder: runs/<cluster>/<run> or runs/local")) -> None:
    """Write report.md with a leaderboard, training curves and the best model's confusion matrix (PNGs)."""
    from launcher.report.build import write_report
    from launcher.view import leaderboard, out
    made = write_report(run_dir)
    board = leaderboard(run_dir)
    if board is not None:
        out.print(board)
    for path in made.files:
        _say(str(path))


def _print_error(text: str) -> None:
    from launcher.view import shout
    shout(text)


# What Ctrl-C leaves behind, by command: only `up` starts containers; `logs` and `watch` only read.
INTERRUPTED = {"up": "containers already started keep running: `tfcompose down` stops them",
               "logs": "stopped following the logs; nothing was changed on the hosts",
               "watch": "stopped watching; the run goes on (`tfcompose watch` attaches again)",
               "down": "`tfcompose down` again removes what is left",
               "collect": "`tfcompose collect` again brings back what is missing"}


def _interrupted(argv: list[str]) -> int:
    # Its clean-up has run: Ctrl-C pressed yet again changes nothing now, and must not turn the
    # exit into a death by signal, or a traceback from the interpreter's shutdown (the command's
    # own process only: a test calling `main` keeps its handler).
    if _PROCESS["own"]:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    command = next((a for a in argv if not a.startswith("-")), "")
    note = INTERRUPTED.get(command)
    _print_error("tfcompose: interrupted" + (f" ({note})" if note else ""))
    return int(ExitCode.INTERRUPTED)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        result = app(args=argv, prog_name="tfcompose", standalone_mode=False)
        if result == ExitCode.INTERRUPTED:    # typer answers Ctrl-C by returning 130, silently
            return _interrupted(argv)
        return int(result or ExitCode.OK)
    except BadInput as exc:
        if debug:
            raise
        for line in exc.lines:  # already `file:line:col: field: …`
            _print_error(line)
        if isinstance(exc, InventoryError):
            _print_error(f"tfcompose: {len(exc.lines)} problem(s) in the inventory; nothing was contacted.")
        return int(exc.exit_code)
    except TfcError as exc:
        if debug:
            raise
        _print_error(f"tfcompose: {exc}")
        return int(exc.exit_code)
    except RunFileError as exc:   # a link, a FIFO or a device in a run folder: bad input, said as such
        if debug:
            raise
        _print_error(exc.line)
        return int(ExitCode.BAD_INPUT)
    except OSError as exc:        # this machine's files: a folder not writable, a disk full
        if debug:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        _print_error(f"tfcompose: cannot use{where}: {exc.strerror or exc}")
        return int(ExitCode.FAILED)
    except (KeyboardInterrupt, typer.Abort):
        return _interrupted(argv)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: unknown option, missing argument...
        exc.show()
        return int(ExitCode.BAD_INPUT)


_PROCESS = {"own": False}     # `run`: this process is the command's own


def run() -> None:
    _PROCESS["own"] = True
    sys.exit(main())
