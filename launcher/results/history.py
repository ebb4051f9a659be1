"""Run history: every collected run under runs/ summarised (`tfcompose runs`), and runs compared
side by side with one picture of each run's best validation curve (`tfcompose compare`)."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.files import atomic_writer
from launcher.text import label
from trainer import results
from trainer.errors import BadInput


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


def summarise(folder: Path, doc: dict) -> RunSummary:
    best = results.best(doc["candidates"])
    return RunSummary(folder.parent.name if folder.name != "local" else "local", folder.name, folder,
                      str(doc.get("started", "")), str(doc.get("mode", "sync")), len(doc["candidates"]),
                      best["candidate"], best["val_accuracy"], duration(doc), doc.get("restarts") or 0)


def duration(doc: dict) -> Optional[float]:
    try:
        return (dt.datetime.fromisoformat(str(doc["finished"])) - dt.datetime.fromisoformat(str(doc["started"]))).total_seconds()
    except (KeyError, ValueError, TypeError):
        return None


def find(runs_dir: Path, cluster: Optional[str] = None) -> list[RunSummary]:
    """Every run folder with a readable results.json, oldest first ('latest' links skipped)."""
    runs_dir = Path(runs_dir)
    candidates = [runs_dir / "local"] if cluster in (None, "local") else []
    for cluster_dir in sorted(p for p in runs_dir.glob("*") if p.is_dir() and not p.is_symlink()):
        if cluster is None or cluster_dir.name == cluster:
            candidates += [p for p in sorted(cluster_dir.iterdir()) if p.is_dir() and not p.is_symlink()]
    found = []
    for folder in candidates:
        if (folder / "results.json").is_file():
            try:
                found.append(summarise(folder, results.load(folder)))
            except results.ResultsError:
                continue
    return sorted(found, key=lambda r: r.started)


def resolve(runs_dir: Path, ref: str) -> Path:
    """A run by its folder, or by its id (or a unique start of it) under runs/."""
    path = Path(ref)
    if (path / "results.json").is_file():
        return path
    hits = [r.folder for r in find(runs_dir) if r.run_id.startswith(ref)]
    if len(hits) != 1:
        raise BadInput(f"{ref}: Received {'no' if not hits else len(hits)} matching run(s) in {runs_dir}. "
                       "Expected a run folder or the id of exactly one run (see `tfcompose runs`).")
    return hits[0]


def best_curve(folder: Path, doc: dict) -> tuple[str, list[int], list[float]]:
    from launcher.results.report import history
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
    from matplotlib.ticker import MaxNLocator
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for folder in folders:
        trial, epochs, values = best_curve(folder, results.load(folder))
        ax.plot(epochs, values, "-o", markersize=3, label=label(f"{folder.name}: {trial}", 80))
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Best trial of each run")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(out) as fh:
        fig.savefig(fh, format=out.suffix[1:].lower(), dpi=110)
    plt.close(fig)
    return out


def leaderboards(folders: list[Path]) -> tuple[list[str], list[list[str]]]:
    """Columns: one per run; rows: rank 1, 2, … with `trial val_accuracy` in each cell."""
    from launcher.results.report import ranked
    boards = [ranked(results.load(f)) for f in folders]
    rows = []
    for rank in range(max(len(b) for b in boards)):
        rows.append([str(rank + 1)] + [f"{b[rank]['candidate']} {b[rank]['val_accuracy']:.4f}" if rank < len(b) else ""
                                       for b in boards])
    return ["rank"] + [f.name for f in folders], rows
