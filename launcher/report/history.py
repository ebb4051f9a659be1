"""Run history: every collected run under runs/ summarised (`tfcompose runs`), and runs compared
side by side with one picture of each run's best validation curve (`tfcompose compare`)."""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher import runfiles
from launcher.report import axes, outcome
from launcher.report.epochs import history
from launcher.report.values import state_text
from launcher.text import one_line
from trainer.spec import results
from trainer.spec.errors import BadInput


@dataclass(frozen=True)
class RunSummary:
    cluster: str
    run_id: str
    folder: Path
    started: str
    mode: str
    trials: int
    best: str
    best_val_accuracy: float
    duration_s: Optional[float]
    restarts: int
    state: str = "finished"        # outcome.json's: a run that failed or has not ended has no results


def summarise(folder: Path, doc: dict) -> RunSummary:
    best = results.best(doc["candidates"])
    made = outcome.read(folder)
    return RunSummary(folder.parent.name if folder.name != "local" else "local", folder.name, folder,
                      str(doc.get("started", "")), str(doc.get("mode", "sync")), len(doc["candidates"]),
                      best["candidate"], best["val_accuracy"], duration(doc), doc.get("restarts") or 0,
                      made.state if made else "finished")


def without_results(folder: Path) -> Optional[RunSummary]:
    """A collected run that left no results (it failed, or was collected while it ran): its outcome."""
    made = outcome.read(folder)
    if made is None:
        return None
    return RunSummary(folder.parent.name, folder.name, folder, made.collected, "", 0, made.message[:60], math.nan,
                      None, 0, made.state)


def duration(doc: dict) -> Optional[float]:
    try:
        return (dt.datetime.fromisoformat(str(doc["finished"])) - dt.datetime.fromisoformat(str(doc["started"]))).total_seconds()
    except (KeyError, ValueError, TypeError):
        return None


DAMAGED = "damaged"


def damaged(folder: Path, why: str) -> RunSummary:
    """A run folder whose results.json or outcome.json is not one tfcompose wrote: listed, saying why."""
    why = why.replace(f"{folder}/", "")          # the run is named in its row already: the file, field and why
    return RunSummary(folder.parent.name if folder.name != "local" else "local", folder.name, folder, "", "", 0,
                      one_line(why, 200), math.nan, None, 0, DAMAGED)


def read(folder: Path) -> Optional[RunSummary]:
    """One run folder as `runs` lists it: its results, else its outcome, else why neither can be
    read (a damaged run is said, never hidden); None for a folder that is no run."""
    results_there = runfiles.found(folder, runfiles.RESULTS)
    if results_there is not None:
        try:
            return summarise(folder, runfiles.load_results(folder))
        except results.ResultsError as exc:
            return damaged(folder, str(exc))
    if (summary := without_results(folder)) is not None:
        return summary
    why = outcome.damage(folder)
    return damaged(folder, why) if why else None


def find(runs_dir: Path, cluster: Optional[str] = None, with_damaged: bool = False) -> list[RunSummary]:
    """Every run folder (results.json or outcome.json there), oldest first ('latest' links
    skipped); `with_damaged`: those whose files tfcompose cannot read too (state `damaged`)."""
    runs_dir = Path(runs_dir)
    candidates = [runs_dir / "local"] if cluster in (None, "local") and (runs_dir / "local").is_dir() else []
    for cluster_dir in sorted(p for p in runs_dir.glob("*") if p.is_dir() and not p.is_symlink()):
        if cluster is None or cluster_dir.name == cluster:
            candidates += [p for p in sorted(cluster_dir.iterdir()) if p.is_dir() and not p.is_symlink()]
    found = [summary for folder in candidates if (summary := read(folder)) is not None]
    return sorted((r for r in found if with_damaged or r.state != DAMAGED), key=lambda r: r.started)


def resolve(runs_dir: Path, ref: str) -> Path:
    """A run by its folder, or by its id (or a unique start of it) under runs/."""
    path = Path(ref)
    if path.is_dir() and runfiles.found(path, runfiles.RESULTS) is not None:
        return path
    hits = [r.folder for r in find(runs_dir) if r.run_id.startswith(ref)]
    if len(hits) != 1:
        raise BadInput(f"{ref}: Received {'no' if not hits else len(hits)} matching run(s) in {runs_dir}. "
                       "Expected a run folder or the id of exactly one run (see `tfcompose runs`).")
    return hits[0]


def best_curve(folder: Path, doc: dict) -> tuple[str, list[int], list[float]]:
    best = results.best(doc["candidates"])
    rows = history(folder, best)
    return best["candidate"], [int(r["epoch"]) for r in rows], [float(r["val_accuracy"]) for r in rows]


PICTURE_SUFFIXES = (".png", ".svg", ".pdf")


def picture_path(out: Path) -> Path:
    """Where `compare -o` may write: a new or existing file named .png, .svg or .pdf (exit 2 otherwise)."""
    if out.is_dir() or out.suffix.lower() not in PICTURE_SUFFIXES:
        raise BadInput(f"--output: Received {str(out)!r}{' (a folder)' if out.is_dir() else ''}. "
                       f"Expected a picture file ending in {', '.join(PICTURE_SUFFIXES)}.")
    return out


def compare_picture(folders: list[Path], out: Path) -> Path:
    """Each run's best trial: validation accuracy per epoch, one line per run."""
    picture_path(out)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    every, last = [], 1
    for folder, label in zip(folders, run_labels(folders)):
        trial, epochs, values = best_curve(folder, runfiles.load_results(folder))
        ax.plot(epochs, values, "-o", markersize=3, label=axes.plain(f"{label}: {trial}"))
        every, last = every + values, max([last, *epochs])
    ax.set_ylim(*axes.accuracy_limits(every))
    axes.epoch_axis(ax, last)
    ax.set_ylabel("validation accuracy")
    ax.set_title("Best trial of each run")
    fig.legend(fontsize=8, loc="outside lower center", ncols=min(2, len(folders)), frameon=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    with runfiles.writer(out.parent, out.name) as fh:          # readable as the umask says, like the report's
        fig.savefig(fh, format=out.suffix[1:].lower(), dpi=110, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return out


def leaderboards(folders: list[Path]) -> tuple[list[str], list[list[str]]]:
    """Columns: one per run; rows: rank 1, 2, … with `trial val_accuracy` in each cell."""
    boards = [results.ranked(runfiles.load_results(f)["candidates"]) for f in folders]
    rows = []

    def cell(record: dict) -> str:       # a trial not trained to the end says what became of it
        state = f" ({state_text(record)})" if record.get("state", "complete") != "complete" else ""
        return f"{record['candidate']} {record['val_accuracy']:.4f}{state}"
    for rank in range(max(len(b) for b in boards)):
        rows.append([str(rank + 1)] + [cell(b[rank]) if rank < len(b) else "" for b in boards])
    return ["rank"] + run_labels(folders), rows


def run_labels(folders: list[Path]) -> list[str]:
    """Each run by its cluster and run id (`lab/3f2a1b2c3d4e`, or `local`), whatever folder or link
    named it (two `…/latest` are two runs); the same run given twice is numbered."""
    bases = []
    for folder in folders:
        real = Path(folder).resolve()
        bases.append(real.name if real.name == "local" else f"{real.parent.name}/{real.name}")
    return [base if bases.count(base) == 1 else f"{base} ({bases[:i].count(base) + 1})" for i, base in enumerate(bases)]
