"""`tfcompose`: parse, dispatch, print. Exceptions become exit codes here and only here."""
from __future__ import annotations

import json
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from launcher import cluster as cluster_mod, inventory, render, report as report_mod
from launcher.errors import ExitCode, InventoryError, TfcError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and compare TensorFlow models across the GPU boxes of an inventory.")
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
STATE = {"debug": False}

InventoryOpt = typer.Option(Path("inventory.yaml"), "--inventory", "-i", help="the inventory YAML",
                            dir_okay=False)


@app.callback()
def _global(debug: bool = typer.Option(False, "--debug", help="show tracebacks")) -> None:
    STATE["debug"] = debug


@app.command()
def validate(inventory_path: Path = InventoryOpt) -> None:
    """Check the inventory; print the cluster it describes. Contacts nothing."""
    cluster = inventory.load(inventory_path)
    table = Table(title=f"cluster {cluster.name}: {len(cluster.hosts)} host(s), image {cluster.spec.image}")
    for column in ("task", "host", "ssh", "TF address", "gpus", "workdir"):
        table.add_column(column)
    for h in cluster.hosts:
        table.add_row(*(Text(c) for c in (f"{h.index}{' (chief)' if h.chief else ''}", h.name,
                        f"{h.ssh_user}@{h.address}:{h.ssh_port}", h.tf_address, render.expect_gpus(h.gpus), h.bundle_dir)))
    out.print(table)
    out.print(f"{inventory_path}: valid", markup=False)


@app.command("render")
def render_cmd(inventory_path: Path = InventoryOpt,
               output: Path = typer.Option(Path("build"), "--output", "-o", help="folder to write into")) -> None:
    """Write exactly what `up` pushes: build/<cluster>/<host>/{compose.yaml, tf_config.json, train.yaml, .env}."""
    cluster = inventory.load(inventory_path)
    for path in render.write_bundles(cluster, output):
        out.print(str(path), markup=False)


class RichReporter:
    """Each host's stage: a live table on a terminal, one line per change otherwise."""

    def __init__(self, hosts: list[str]):
        self.stages = {h: ("waiting", "") for h in hosts}
        self.live = Live(self._table(), console=out, refresh_per_second=4, transient=False) if out.is_terminal else None
        self._lock = threading.Lock()

    def _table(self) -> Table:
        table = Table(show_header=True, header_style="bold")
        table.add_column("host")
        table.add_column("stage")
        table.add_column("detail")
        for host, (stage, detail) in self.stages.items():
            table.add_row(host, stage, detail)
        return table

    def stage(self, host: str, stage: str, detail: str = "") -> None:
        with self._lock:
            if self.stages.get(host) == (stage, detail):
                return
            self.stages[host] = (stage, detail)
            if self.live:
                self.live.update(self._table())
            else:
                out.print(f"{host}: {stage}" + (f" ({detail})" if detail else ""), markup=False)

    def warn(self, host: str | None, message: str) -> None:
        err.print(f"warning: {host + ': ' if host else ''}{message}", markup=False, soft_wrap=True)

    def __enter__(self):
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.stop()


ParallelOpt = typer.Option(None, "--parallel", min=1, help="hosts worked on at once (default: all)")


@app.command("preflight")
def preflight_cmd(inventory_path: Path = InventoryOpt, parallel: Optional[int] = ParallelOpt) -> None:
    """Check every host at once: SSH, Docker, compose v2, GPUs, tf_port, workdir, disk, data_dir, clock."""
    cluster = inventory.load(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep, cluster_mod.Session(cluster, rep, parallel) as s:
        ready = cluster_mod.preflight(s)
    for host, result in ready.items():
        out.print(f"{host}: ready (docker compose {result.facts.get('compose')}, "
                  f"{int(result.facts.get('free_kb', '0') or 0) // 1048576} GB free)", markup=False)


@app.command("up")
def up_cmd(inventory_path: Path = InventoryOpt, wait: bool = typer.Option(False, "--wait", help="wait for the chief, then collect"),
           parallel: Optional[int] = ParallelOpt,
           runs: Path = typer.Option(Path("runs"), "--runs", help="where --wait collects results")) -> None:
    """Preflight, push, ship the image and start on every host; all or nothing. Idempotent."""
    cluster = inventory.load(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        report = cluster_mod.up(cluster, rep, parallel, wait=wait, runs_dir=runs)
    table = Table(title=f"cluster {cluster.name}, run {report.run_id}")
    for column in ("host", "bundle sent", "image", "container"):
        table.add_column(column)
    for h in cluster.hosts:
        img = report.images[h.name]
        table.add_row(h.name, f"{report.bytes_pushed[h.name]:,} B", f"{img['action']} ({img['bytes_sent']:,} B)",
                      str(report.started[h.name]))
    out.print(table)
    if report.outcome:
        print_leaderboard(runs / cluster.name / "latest")
        out.print(f"{report.outcome.message}; results and report.md in {runs / cluster.name / 'latest'}", markup=False)
    else:
        out.print("started; follow with `tfcompose logs`, check with `tfcompose status`", markup=False)


@app.command("status")
def status_cmd(inventory_path: Path = InventoryOpt, as_json: bool = typer.Option(False, "--json", help="JSON for scripts"),
               parallel: Optional[int] = ParallelOpt) -> None:
    """Each host's container: state, exit code, uptime, restarts, last progress line."""
    cluster = inventory.load(inventory_path)
    states = cluster_mod.status(cluster, parallel=parallel)
    if as_json:
        out.print_json(json.dumps([asdict(st) for st in states]))
        return
    table = Table(title=f"cluster {cluster.name}")
    for column in ("host", "state", "exit", "uptime", "restarts", "last progress"):
        table.add_column(column, overflow="fold")
    for st in states:
        cells = [st.host, st.state, "" if st.exit_code is None else str(st.exit_code),
                 "" if st.uptime_s is None else f"{st.uptime_s:.0f} s", str(st.restarts), st.last_line or st.error]
        table.add_row(*(Text(cell) for cell in cells))  # literal: log lines hold [brackets]
    out.print(table)


@app.command("logs")
def logs_cmd(inventory_path: Path = InventoryOpt, host: Optional[str] = typer.Option(None, "--host", help="a host other than the chief"),
             follow: bool = typer.Option(True, "--follow/--no-follow", help="follow until the container ends")) -> None:
    """The chief's container output (or --host's), followed until Ctrl-C or the container ends."""
    cluster = inventory.load(inventory_path)

    def write(chunk: bytes) -> None:
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()

    cluster_mod.logs(cluster, host, follow, write)


@app.command("collect")
def collect_cmd(inventory_path: Path = InventoryOpt,
                runs: Path = typer.Option(Path("runs"), "--runs", help="where results go")) -> None:
    """The chief's results and every host's log into runs/<cluster>/<run>/ (and runs/<cluster>/latest)."""
    cluster = inventory.load(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        run_dir = cluster_mod.collect(cluster, runs, rep)
    print_leaderboard(run_dir)
    out.print(f"collected into {run_dir} (report: {run_dir / 'report.md'})", markup=False)


@app.command("down")
def down_cmd(inventory_path: Path = InventoryOpt, purge: bool = typer.Option(False, "--purge", help="also remove the pushed files and results on the hosts"),
             parallel: Optional[int] = ParallelOpt) -> None:
    """Stop and remove the cluster's containers everywhere; unreachable hosts get a warning."""
    cluster = inventory.load(inventory_path)
    for host, result in cluster_mod.down(cluster, purge, parallel=parallel).items():
        if isinstance(result, BaseException):
            err.print(f"warning: {host}: not reached, nothing removed there: {str(result).splitlines()[0]}", markup=False, soft_wrap=True)
        else:
            out.print(f"{host}: {result}", markup=False)


def print_leaderboard(run_dir: Path) -> None:
    if not (run_dir / "results.json").is_file():
        return
    rows = report_mod.ranked(report_mod.load_results(run_dir))
    table = Table(title=f"leaderboard: {run_dir}")
    for column in ("rank", "trial", "val_acc", "val_loss", "train s", "img/s", "params", "host"):
        table.add_column(column, justify="left" if column in ("trial", "host") else "right",
                         overflow="fold", min_width=22 if column == "trial" else None)
    for i, r in enumerate(rows, start=1):
        table.add_row(*(Text(str(c)) for c in (i, r["candidate"], f"{r['val_accuracy']:.4f}", f"{r['val_loss']:.4f}",
                                             f"{r['train_seconds']:.1f}", f"{r['images_per_second']:.0f}",
                                             f"{r['params']:,}", r.get("host", ""))))
    out.print(table)


@app.command("report")
def report_cmd(run_dir: Path = typer.Argument(..., help="a run folder: runs/<cluster>/<run> or runs/local")) -> None:
    """Write report.md with a leaderboard, training curves and the best model's confusion matrix (PNGs)."""
    made = report_mod.write_report(run_dir)
    print_leaderboard(run_dir)
    for path in made.files:
        out.print(str(path), markup=False)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        result = app(args=argv, prog_name="tfcompose", standalone_mode=False)
        return int(result or ExitCode.OK)
    except InventoryError as exc:
        if debug:
            raise
        for line in exc.lines:  # already `file:line:col: field: …`
            err.print(line, markup=False, soft_wrap=True)
        err.print(f"tfcompose: {len(exc.lines)} problem(s) in the inventory; nothing was contacted.", markup=False)
        return int(exc.exit_code)
    except TfcError as exc:
        if debug:
            raise
        err.print(f"tfcompose: {exc}", markup=False, soft_wrap=True)
        return int(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err.print("tfcompose: interrupted (containers already started keep running: `tfcompose down` stops them)",
                  markup=False)
        return int(ExitCode.INTERRUPTED)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: unknown option, missing argument...
        exc.show()
        return int(ExitCode.BAD_INPUT)


def run() -> None:
    sys.exit(main())
