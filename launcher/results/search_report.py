"""The report's part for a search a study drove (results.json has `search`): how every trial went
epoch by epoch, with the rungs where the pruner judged them and the pruned trials visibly cut
(search.png); what each searched value did to val_accuracy (parameters.png); and a paragraph."""
from __future__ import annotations

import math
from pathlib import Path

from launcher.text import label, one_line

STATE_STYLE = {"complete": ("-", 1.6, 1.0), "pruned": ("-", 1.0, 0.55), "retried": (":", 1.0, 0.5),
               "failed": (":", 1.0, 0.5), "running": ("--", 1.0, 0.5), "waiting": ("--", 1.0, 0.5)}


def finite(values) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def plot_search(doc: dict, out: Path, save) -> Path:
    """val_accuracy by epoch, one line per trial; rungs dotted; a pruned trial ends in an ×."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    fig, ax = plt.subplots(figsize=(10, 5.5))
    best = doc["best"]["candidate"]
    for record in doc["candidates"]:
        curve = record.get("curve") or []
        if not curve:
            continue
        style, width, alpha = STATE_STYLE.get(record.get("state", "complete"), ("-", 1.0, 0.6))
        epochs = list(range(1, len(curve) + 1))
        line, = ax.plot(epochs, curve, style, linewidth=3 if record["candidate"] == best else width,
                        alpha=1.0 if record["candidate"] == best else alpha)
        if record.get("state") == "pruned":
            ax.plot(epochs[-1:], curve[-1:], "x", color=line.get_color(), markersize=9, mew=2)
    for rung in doc["search"].get("rungs", []):
        ax.axvline(rung, linestyle=":", color="grey", linewidth=1)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy")
    ax.set_ylim(0, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    counts = states(doc)
    ax.set_title(f"Search ({label(doc['search'].get('sampler'), 20)}, pruner {label(doc['search'].get('pruner'), 20)}): "
                 + ", ".join(f"{n} {label(s, 20)}" for s, n in counts.items())
                 + "; rungs dotted, pruned trials end in ×, the best drawn thick", fontsize=9)
    return save(fig, out / "search.png")


def plot_parameters(doc: dict, out: Path, save) -> Path | None:
    """val_accuracy against each searched value, one panel per value, colour by candidate."""
    import matplotlib.pyplot as plt
    records = [r for r in doc["candidates"] if isinstance(r.get("hyperparameters"), dict)]
    names = sorted({k for r in records for k in r["hyperparameters"]}, key=lambda k: (k not in _SHARED, k))
    if not records or not names:
        return None
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.4 * rows), squeeze=False)
    candidates = sorted({r.get("architecture") or r["candidate"] for r in records})
    colours = {c: f"C{i % 10}" for i, c in enumerate(candidates)}
    for ax, name in zip(axes.flat, names):
        _panel(ax, name, [r for r in records if name in r["hyperparameters"]], colours)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[c], label=label(c)) for c in candidates]
    fig.legend(handles=handles, loc="lower right", fontsize=8)
    fig.suptitle("What each searched value did (hollow: pruned, stopped early)")
    return save(fig, out / "parameters.png")


_SHARED = ("learning_rate", "batch_per_replica")


def _panel(ax, name: str, records: list[dict], colours: dict) -> None:
    xs = [r["hyperparameters"][name] for r in records]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    labels = xs if numeric else [label(x, 30) for x in xs]
    for record, x in zip(records, labels):
        acc = record["val_accuracy"]
        if not (isinstance(acc, (int, float)) and math.isfinite(acc)):
            continue
        pruned = record.get("state") == "pruned"
        colour = colours[record.get("architecture") or record["candidate"]]
        ax.plot([x], [acc], "o", markerfacecolor="none" if pruned else colour, markeredgecolor=colour)
    positive = finite(xs) if numeric else []
    if positive and min(positive) > 0 and max(positive) / min(positive) >= 10:
        ax.set_xscale("log")
    ax.set_title(label(name, 40), fontsize=9)
    ax.set_ylabel("val_accuracy")
    ax.set_ylim(0, 1.02)


def states(doc: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in doc["candidates"]:
        counts[record.get("state", "complete")] = counts.get(record.get("state", "complete"), 0) + 1
    return counts


def markdown(doc: dict) -> list[str]:
    """The report's paragraph on the search: sampler, pruner, what became of the trials, lost hosts."""
    search = {k: (one_line(v, 100) if isinstance(v, str) else v) for k, v in doc["search"].items()}
    lines = ["## Search", "",
             f"Sampler {search.get('sampler')}, {search.get('trials')} trial(s); pruner {search.get('pruner')}"
             + (f" (judged at epochs {', '.join(map(str, search.get('rungs', [])))}, the top "
                f"1/{search.get('reduction_factor')} going on)" if search.get("pruner") != "none" else "")
             + ". Trials: " + ", ".join(f"{n} {s}" for s, n in states(doc).items()) + "."]
    for host, retries in (search.get("lost") or {}).items():
        lines.append(f"Host {one_line(host, 64)} was lost; its trial was retried on another host as "
                     f"{', '.join(one_line(r, 200) for r in retries)}.")
    return lines + [""]
