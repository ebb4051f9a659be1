"""Commands on collected runs: track (to MLflow), runs, compare, report."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from launcher.cli.app import RunsOpt, app, load_inventory, say, say_tracking
from launcher.errors import TfcError


@app.command("track")
def track_cmd(run_dir: Path = typer.Argument(..., help="a collected run: runs/<cluster>/<run>"),
              inventory_path: Optional[Path] = typer.Option(None, "--inventory", "-i", dir_okay=False,
                                                            help="its inventory: its tracking: section and settings")) -> None:
    """Send a collected run to MLflow (what is not there yet): one parent run, one run per trial, the
    best model registered. Without --inventory: MLFLOW_TRACKING_URI, or where the run went before."""
    from launcher.tracking import source, upload
    from launcher.tracking.client import require_client
    source.check_run_folder(run_dir)            # a folder that is no run: refused before anything else
    cluster = load_inventory(inventory_path) if inventory_path else None
    settings = source.settings_for(run_dir, cluster)
    require_client(cluster or _Tracked(settings, run_dir))
    book = upload.send(settings, source.from_folder(run_dir, cluster))
    say_tracking(run_dir)
    if not book.complete:
        raise TfcError(f"not all sent: {book.pending}")


class _Tracked:
    """What require_client needs to name: the run folder, for a run tracked without an inventory."""

    def __init__(self, settings, run_dir: Path):
        self.tracking, self.path = settings, run_dir



@app.command("runs")
def runs_cmd(inventory_path: Optional[Path] = typer.Option(None, "--inventory", "-i", help="only this inventory's cluster",
                                                           dir_okay=False), runs: Path = RunsOpt) -> None:
    """The collected runs: id, date, mode, trials, best trial and its val_accuracy, duration, restarts
    (a run whose files tfcompose cannot read is listed as damaged, saying why)."""
    from launcher.report.history import find
    from launcher.text import clock
    from launcher.view import out, table
    found = find(runs, load_inventory(inventory_path).name if inventory_path else None, with_damaged=True)
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
    say(str(compare_picture(folders, output)))


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
        say(str(path))

