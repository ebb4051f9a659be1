"""`tfcompose report RUN_DIR`: report.md plus pictures from a run's results.json and history.

- leaderboard.png: validation accuracy per trial, annotated with loss, time, images/s, parameters
- curves.png: accuracy and validation accuracy per epoch, one panel per trial
- confusion_matrix.png: the best trial on the validation set
- telemetry.png, with a run's telemetry: how busy each host's hardware was (report/telemetry.py)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from launcher import runfiles  # noqa: E402
from launcher.report import axes, outcome, search as search_report, telemetry as telemetry_report, values  # noqa: E402
from launcher.report import elastic as elastic_report  # noqa: E402
from launcher.report.values import state_text  # noqa: E402
from launcher.report.epochs import history, read_history  # noqa: E402
from launcher.telemetry.live import trial_columns  # noqa: E402
from launcher.text import one_line  # noqa: E402
from trainer.spec import results  # noqa: E402  (the results.json owner)


@dataclass
class Report:
    folder: Path
    files: list[Path]
    ranked: list[dict]
    doc: dict


def ranked(doc: dict) -> list[dict]:
    """The trials best first, by the results format's one rule (trainer/spec/results.py)."""
    return results.ranked(doc["candidates"])


COMPLETE, BEST, PRUNED = "#8ab17d", "#2a9d8f", "#c9c9c9"


def plot_leaderboard(rows: list[dict], out: Path) -> Path:
    """The trained trials as bars, ranked as the leaderboard ranks them (trained to the end first,
    best at the top, then pruned ones, marked); lost and failed trials, whose figures are not a
    model's, are named under the axis instead of drawn as empty bars."""
    from matplotlib.patches import Patch
    drawn = [(i, r, text) for i, (r, text) in enumerate(zip(rows, values.texts(rows)), start=1) if axes.trained(r)]
    pruned = any(r.get("state") == "pruned" for _, r, _ in drawn)
    fig, ax = plt.subplots(figsize=(12.0, 0.55 * max(len(drawn), 1) + 2.2), layout="constrained")
    labels = [axes.plain(f"{i}. {r['candidate']}" + (f"\n{text}" if text else "")) for i, r, text in drawn][::-1]
    colours = [PRUNED if r.get("state") == "pruned" else BEST if i == 1 else COMPLETE for i, r, _ in drawn][::-1]
    bars = ax.barh(range(len(drawn)), [r["val_accuracy"] for _, r, _ in drawn][::-1], color=colours,
                   hatch=[("//" if c == PRUNED else None) for c in colours], edgecolor="white")
    ax.set_yticks(range(len(drawn)), labels, fontsize=8)
    for bar, (_, r, _) in zip(bars, drawn[::-1]):
        # The figures stand right of the axis, which ends at 1.0 (accuracy's own end).
        ax.annotate(f"{r['val_accuracy']:.3f}  loss {r['val_loss']:.3f}  {r['train_seconds']:.0f} s  "
                    f"{r['images_per_second']:.0f} img/s  {r['params'] / 1e6:.2f} M params"
                    + (f"  (pruned at epoch {r['pruned_at_epoch']})" if isinstance(r.get("pruned_at_epoch"), int)
                       and r.get("state") == "pruned" else ""),
                    xy=(1.0, bar.get_y() + bar.get_height() / 2), xycoords=("axes fraction", "data"),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=8, annotation_clip=False)
    ax.set_xlim(0, 1.0)
    ax.set_ylim(-0.6, max(len(drawn), 1) - 0.4)
    ax.set_xlabel("validation accuracy" + _not_drawn(rows))
    ax.set_title("Leaderboard: " + ("trials trained to the end first, best at the top; then the pruned ones"
                                    if pruned else "best at the top"))
    if pruned:
        fig.legend(handles=[Patch(color=COMPLETE, label="trained to the end"),
                            Patch(facecolor=PRUNED, hatch="//", edgecolor="white", label="pruned (stopped early)")],
                   loc="outside upper center", ncols=2, fontsize=8, frameon=False)
    return _save(fig, out / "leaderboard.png", layout=False)


def _not_drawn(rows: list[dict]) -> str:
    """The xlabel's note on trials without a trained model's figures: what became of them."""
    note = axes.left_out([r for r in rows if not axes.trained(r)], "no trained model")
    return "\n" + note if note else ""


def plot_curves(folder: Path, rows: list[dict], out: Path, doc: Optional[dict] = None) -> Path:
    """Accuracy and validation accuracy per epoch, one panel per trial in leaderboard order, all on
    one epoch axis (a trial pruned at epoch 1 is a point at 1 of the epochs it could have had) and
    one accuracy axis chosen from the data; the title and the legend above the panels."""
    found = [(r, history(folder, r), text) for r, text in zip(rows, values.texts(rows))]
    drawn = [(r, epochs, text) for r, epochs, text in found if epochs]
    marks = [(x, (r["candidate"], label)) for r, _, _ in drawn
             for x, label in elastic_report.marks(doc or {}, r["candidate"])]
    cols = min(3, max(len(drawn), 1))
    nrows = math.ceil(max(len(drawn), 1) / cols)
    fig, grid = plt.subplots(nrows, cols, figsize=(4.2 * cols, 2.9 * nrows + 0.9), squeeze=False, layout="constrained")
    last = max([r["epochs"] for r, _, _ in drawn if isinstance(r.get("epochs"), int)]
               + [int(e["epoch"]) for _, epochs, _ in drawn for e in epochs] + [1])
    for ax, (record, epochs, text) in zip(grid.flat, drawn):
        x = [int(e["epoch"]) for e in epochs]
        for key, style in (("accuracy", "-o"), ("val_accuracy", "--s")):
            ax.plot(x, [float(e[key]) for e in epochs], style, label=key, markersize=4)
        state = f" ({state_text(record)})" if record.get("state") not in (None, "complete") else ""
        ax.set_title(axes.plain(record["candidate"] + state + (f"\n{text}" if text else "")), fontsize=8)
        for x, label in marks:                          # where the cluster changed (elastic)
            if record["candidate"] == label[0]:
                ax.axvline(x, color="0.4", linestyle=":", linewidth=1)
                ax.annotate(label[1], (x, 0.02), xycoords=("data", "axes fraction"), fontsize=7, color="0.3",
                            rotation=90, ha="right", va="bottom")
        axes.epoch_axis(ax, last)
        # Each trial on its own accuracy scale, every point of it shown (comparing trials: search.png).
        ax.set_ylim(*axes.accuracy_limits([float(e[k]) for e in epochs for k in ("accuracy", "val_accuracy")]))
    for ax in list(grid.flat)[len(drawn):]:
        ax.axis("off")
    handles, labels = grid.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)
    fig.suptitle("Training curves per trial, each on its own accuracy scale")
    missing = axes.left_out([r for r, epochs, _ in found if not epochs], "no epochs recorded")
    if missing:
        fig.supxlabel(missing, fontsize=8)
    return _save(fig, out / "curves.png", layout=False)


def plot_confusion(record: dict, classes: list[str], out: Path, searched: str = "") -> Path | None:
    matrix = record.get("confusion_matrix")
    if not (isinstance(matrix, list) and 0 < len(matrix) <= 100 and all(
            isinstance(row, list) and len(row) == len(matrix) and all(isinstance(c, int) for c in row) for row in matrix)):
        return None
    fig, ax = plt.subplots(figsize=(1.2 * len(matrix) + 2.5, 1.0 * len(matrix) + 2))
    image = ax.imshow(matrix, cmap="Blues")
    labels = [axes.plain(c) for c in classes] if len(classes) == len(matrix) else [str(i) for i in range(len(matrix))]
    ax.set_xticks(range(len(matrix)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(matrix)), labels)
    top = max(max(row) for row in matrix) or 1
    for i, row in enumerate(matrix):
        for j, count in enumerate(row):
            ax.text(j, i, str(count), ha="center", va="center", color="white" if count > top / 2 else "black")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(axes.plain(f"Confusion matrix: {record['candidate']}" + (f" ({searched})" if searched else "")))
    fig.colorbar(image, ax=ax)
    return _save(fig, out / "confusion_matrix.png")


def _save(fig, path: Path, layout: bool = True) -> Path:
    if layout:
        fig.tight_layout()
    with runfiles.writer(path.parent, path.name) as fh:
        # tight: the canvas grows to hold what stands outside the axes (the leaderboard's figures)
        fig.savefig(fh, format="png", dpi=110, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return path


def markdown(doc: dict, rows: list[dict], pictures: list[Path], hardware_lines: list[str] = (),
             notes: list[str] = ()) -> str:
    hardware, figures = trial_columns(rows)      # GPU-hours, utilisation, energy, CPU-hours, when measured
    best = rows[0]
    lines = ["# tfcompose report", "",
             f"Best: **{_cell(best['candidate'])}** with validation accuracy **{best['val_accuracy']:.4f}** "
             f"(loss {best['val_loss']:.4f}).", "",
             f"Mode {doc.get('mode', 'sync')}, {doc.get('workers', 1)} worker(s), {doc.get('replicas', 1)} replica(s), "
             f"restarts {doc.get('restarts', 0)}, {doc.get('images', {}).get('train', '?')} training and "
             f"{doc.get('images', {}).get('val', '?')} validation images; {doc.get('started', '?')} → "
             f"{doc.get('finished', '?')}, TensorFlow {doc.get('tensorflow', '?')}.", "",
             "| rank | trial | values | val_accuracy | val_loss | train s | img/s | params | epochs | "
             + "".join(f"{c} | " for c in hardware) + "host |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(hardware) + "---|"]
    for (i, (r, searched)), more in zip(enumerate(zip(rows, values.texts(rows)), start=1), figures):
        epochs = f"{r.get('resumed_from_epoch', 0) + r.get('epochs_run', r['epochs'])}/{r['epochs']}"
        state = f" ({state_text(r)})" if r.get("state") not in (None, "complete") else ""
        lines.append(f"| {i} | {_cell(str(r['candidate']) + state)} | {_cell(searched)} | {r['val_accuracy']:.4f} | {r['val_loss']:.4f} | "
                     f"{r['train_seconds']:.1f} | {r['images_per_second']:.0f} | {r['params']:,} | {epochs} | "
                     + "".join(f"{c} | " for c in more) + f"{_cell(r.get('host', ''))} |")
    lines.append("")
    if "search" in doc:
        lines += search_report.markdown(doc)
    lines += elastic_report.lines(doc)
    lines += list(hardware_lines)
    lines += (["## Notes", ""] + [f"- {_cell(n)}" for n in notes] + [""]) if notes else []
    lines += [f"![{p.stem}]({p.name})" for p in pictures]
    return "\n".join(lines) + "\n"


def _cell(text) -> str:
    """A name in report.md: printable, one line, and no `|` to break the table."""
    return one_line(str(text), 200).replace("|", "/")


def write_report(folder: str | Path) -> Report:
    folder = Path(folder)
    doc = runfiles.load_results(folder)
    rows = ranked(doc)
    pictures = [plot_leaderboard(rows, folder), plot_curves(folder, rows, folder, doc)]
    confusion = plot_confusion(rows[0], doc.get("class_names", []), folder, values.texts(rows)[0])
    pictures += [confusion] if confusion else []
    if "search" in doc:
        pictures.append(search_report.plot_search(doc, folder, _save))
        effect = search_report.plot_parameters(doc, folder, _save)
        pictures += [effect] if effect else []
    hardware_lines, hardware_pictures = telemetry_report.section(folder, doc, _save)   # telemetry/<host>.csv, if any
    pictures += hardware_pictures
    notes = [note for r in rows if (note := read_history(folder, r)[1])]     # history rows left out, and why
    text = markdown(doc, rows, pictures, hardware_lines, notes)
    made = outcome.read(folder)
    if made is not None and made.failed:        # results of an earlier attempt: the run itself failed since
        text = f"**This run failed:** {made.message}\n\n" + text
    runfiles.write_bytes(folder, "report.md", text.encode())
    return Report(folder, [folder / "report.md", *pictures], rows, doc)


@dataclass(frozen=True)
class ProgramFiles:
    """What a `run:` program left in its results folder on the chief (collect counts them)."""
    results_dir: str          # the folder inside the container: run.results_dir, given as TFC_RESULTS_DIR
    files: int


def nothing_written(program: ProgramFiles) -> str:
    """Where a script's files must go, said when it wrote none there."""
    return (f"your program wrote nothing to its results folder: only what the chief (TFC_IS_CHIEF=1) writes to "
            f"$TFC_RESULTS_DIR ({program.results_dir}, the inventory's run.results_dir) comes back; what it saves "
            "anywhere else in the container (a model under /tmp) is gone with the container")


def write_outcome_only(folder: str | Path, program: Optional[ProgramFiles] = None) -> Path:
    """report.md of a run that left no results.json: how it ended (outcome.json) and where its logs
    are; for a `run:` program, what it left and, when nothing, where its files must go."""
    folder = Path(folder)
    made = outcome.read(folder)
    state = made.state if made else "unknown"
    if program is not None and state != "running":
        said = (f"Your program wrote {program.files} file(s) to its results folder ({program.results_dir}); they "
                "are in this folder." if program.files else f"Note: {nothing_written(program)}.")
        head = f"**This run {'failed' if state == 'failed' else 'ran your program'}.**"
    else:
        said = ""
        head = f"**This run {'failed' if state == 'failed' else 'has no results yet' if state == 'running' else 'left no results'}.**"
    lines = [f"# Run {made.run if made else folder.name}", "", head + (f" {made.message}" if made and made.message else ""),
             "", *([said, ""] if said else []), "Every host's log is in `logs/`."]
    return runfiles.write_bytes(folder, "report.md", ("\n".join(lines) + "\n").encode())
