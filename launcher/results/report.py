"""`tfcompose report RUN_DIR`: report.md plus pictures from a run's results.json and history.

- leaderboard.png: validation accuracy per trial, annotated with loss, time, images/s, parameters
- curves.png: accuracy and validation accuracy per epoch, one panel per trial
- confusion_matrix.png: the best trial on the validation set
- telemetry.png, with a run's telemetry: how busy each host's hardware was (results/telemetry_report.py)
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from launcher.files import atomic_writer, write_atomic  # noqa: E402
from trainer import results  # noqa: E402  (the results.json owner)
from trainer.results import load as load_results  # noqa: E402


@dataclass
class Report:
    folder: Path
    files: list[Path]
    ranked: list[dict]
    doc: dict


def ranked(doc: dict) -> list[dict]:
    """The trials best first, by the results format's one rule (trainer/results.py)."""
    return results.ranked(doc["candidates"])


def history(folder: Path, record: dict) -> list[dict]:
    """The trial's per-epoch rows; a file that is not the CSV the trainer writes gives none."""
    path = folder / record.get("history", "")
    if not record.get("history") or not path.is_file() or path.is_symlink():
        return []
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        for row in rows:
            int(row["epoch"]), float(row["accuracy"]), float(row["val_accuracy"])
        return rows
    except (OSError, ValueError, KeyError, TypeError, csv.Error):
        return []


def plot_leaderboard(rows: list[dict], out: Path) -> Path:
    width, height = 12.0, 0.6 * len(rows) + 1.5
    fig, ax = plt.subplots(figsize=(width, height))
    names = [r["candidate"] for r in rows][::-1]
    values = [r["val_accuracy"] for r in rows][::-1]
    bars = ax.barh(names, values, color=["#2a9d8f" if i == len(rows) - 1 else "#8ab17d" for i in range(len(rows))])
    for bar, r in zip(bars, rows[::-1]):
        # The figures stand in the margin right of the axis, which ends at 1.0 (accuracy's own end).
        ax.annotate(f"{r['val_accuracy']:.3f}  loss {r['val_loss']:.3f}  {r['train_seconds']:.0f} s  "
                    f"{r['images_per_second']:.0f} img/s  {r['params'] / 1e6:.2f} M params",
                    xy=(1.0, bar.get_y() + bar.get_height() / 2), xycoords=("axes fraction", "data"),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=8, annotation_clip=False)
    ax.set_xlim(0, 1.0)
    # Room in inches for the trial names (left), the notes (right), title and axis label.
    label = max(len(n) for n in names) * 0.085 + 0.3
    fig.subplots_adjust(left=label / width, right=1 - 3.8 / width, bottom=0.6 / height, top=1 - 0.45 / height)
    ax.set_xlabel("validation accuracy")
    ax.set_title("Leaderboard (best at the top)")
    return _save(fig, out / "leaderboard.png", layout=False)


def plot_curves(folder: Path, rows: list[dict], out: Path) -> Path:
    cols = min(3, len(rows))
    nrows = math.ceil(len(rows) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    for ax, record in zip(axes.flat, rows):
        epochs = history(folder, record)
        x = [int(e["epoch"]) for e in epochs]
        for key, style in (("accuracy", "-o"), ("val_accuracy", "--s")):
            ax.plot(x, [float(e[key]) for e in epochs], style, label=key, markersize=3)
        ax.set_title(record["candidate"], fontsize=9)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    fig.suptitle("Training curves per trial")
    return _save(fig, out / "curves.png")


def plot_confusion(record: dict, classes: list[str], out: Path) -> Path | None:
    matrix = record.get("confusion_matrix")
    if not (isinstance(matrix, list) and 0 < len(matrix) <= 100 and all(
            isinstance(row, list) and len(row) == len(matrix) and all(isinstance(c, int) for c in row) for row in matrix)):
        return None
    fig, ax = plt.subplots(figsize=(1.2 * len(matrix) + 2.5, 1.0 * len(matrix) + 2))
    image = ax.imshow(matrix, cmap="Blues")
    labels = classes if len(classes) == len(matrix) else [str(i) for i in range(len(matrix))]
    ax.set_xticks(range(len(matrix)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(matrix)), labels)
    top = max(max(row) for row in matrix) or 1
    for i, row in enumerate(matrix):
        for j, count in enumerate(row):
            ax.text(j, i, str(count), ha="center", va="center", color="white" if count > top / 2 else "black")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"Confusion matrix: {record['candidate']}")
    fig.colorbar(image, ax=ax)
    return _save(fig, out / "confusion_matrix.png")


def _save(fig, path: Path, layout: bool = True) -> Path:
    if layout:
        fig.tight_layout()
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return path


def markdown(doc: dict, rows: list[dict], pictures: list[Path], hardware_lines: list[str] = ()) -> str:
    from launcher.telemetry.live import trial_columns
    hardware, figures = trial_columns(rows)      # GPU-hours, utilisation, energy, CPU-hours, when measured
    best = rows[0]
    lines = ["# tfcompose report", "",
             f"Best: **{best['candidate']}** with validation accuracy **{best['val_accuracy']:.4f}** "
             f"(loss {best['val_loss']:.4f}).", "",
             f"Mode {doc.get('mode', 'sync')}, {doc.get('workers', 1)} worker(s), {doc.get('replicas', 1)} replica(s), "
             f"restarts {doc.get('restarts', 0)}, {doc.get('images', {}).get('train', '?')} training and "
             f"{doc.get('images', {}).get('val', '?')} validation images; {doc.get('started', '?')} → "
             f"{doc.get('finished', '?')}, TensorFlow {doc.get('tensorflow', '?')}.", "",
             "| rank | trial | val_accuracy | val_loss | train s | img/s | params | epochs | "
             + "".join(f"{c} | " for c in hardware) + "host |",
             "|---:|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(hardware) + "---|"]
    for (i, r), more in zip(enumerate(rows, start=1), figures):
        epochs = f"{r.get('resumed_from_epoch', 0) + r.get('epochs_run', r['epochs'])}/{r['epochs']}"
        state = f" ({r['state']})" if r.get("state") not in (None, "complete") else ""
        lines.append(f"| {i} | {r['candidate']}{state} | {r['val_accuracy']:.4f} | {r['val_loss']:.4f} | "
                     f"{r['train_seconds']:.1f} | {r['images_per_second']:.0f} | {r['params']:,} | {epochs} | "
                     + "".join(f"{c} | " for c in more) + f"{r.get('host', '')} |")
    lines.append("")
    if "search" in doc:
        from launcher.results import search_report
        lines += search_report.markdown(doc)
    lines += list(hardware_lines)
    lines += [f"![{p.stem}]({p.name})" for p in pictures]
    return "\n".join(lines) + "\n"


def write_report(folder: str | Path) -> Report:
    folder = Path(folder)
    doc = load_results(folder)
    rows = ranked(doc)
    pictures = [plot_leaderboard(rows, folder), plot_curves(folder, rows, folder)]
    confusion = plot_confusion(rows[0], doc.get("class_names", []), folder)
    pictures += [confusion] if confusion else []
    if "search" in doc:
        from launcher.results import search_report
        pictures.append(search_report.plot_search(doc, folder, _save))
        effect = search_report.plot_parameters(doc, folder, _save)
        pictures += [effect] if effect else []
    from launcher.results import telemetry_report
    hardware_lines, hardware_pictures = telemetry_report.section(folder, doc, _save)   # telemetry/<host>.csv, if any
    pictures += hardware_pictures
    write_atomic(folder / "report.md", markdown(doc, rows, pictures, hardware_lines).encode())
    return Report(folder, [folder / "report.md", *pictures], rows, doc)
