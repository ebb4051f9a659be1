"""The report's part for a search a study drove (results.json has `search`): how every trial went
epoch by epoch, with the rungs where the pruner judged them and the pruned trials visibly cut
(search.png); what each searched value did to val_accuracy (parameters.png); and a paragraph."""
from __future__ import annotations

import math
from pathlib import Path

from launcher.report import axes, values
from launcher.text import label, one_line

STATE_STYLE = {"complete": ("-", 1.6, 1.0), "pruned": ("-", 1.0, 0.55), "retried": (":", 1.0, 0.5),
               "failed": (":", 1.0, 0.5), "running": ("--", 1.0, 0.5), "waiting": ("--", 1.0, 0.5)}


def finite(values) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def plot_search(doc: dict, out: Path, save) -> Path:
    """val_accuracy by epoch, one line per trial, coloured by architecture; rungs dotted; a pruned
    trial ends in an ×, the best is drawn thick; a legend says so. The accuracy axis is chosen
    from the data (the contenders at 0.95–1.0 are told apart); a trial below it is marked ▼ on
    its bottom edge and counted, never silently dropped."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 5.8), layout="constrained")
    best = doc["best"]["candidate"]
    curves = [(r, axes.finite(r.get("curve") or [])) for r in doc["candidates"]]
    curves = [(r, c) for r, c in curves if c]
    architectures = sorted({_architecture(r) for r, _ in curves})
    colours = {a: f"C{i % 10}" for i, a in enumerate(architectures)}
    bottom, top = axes.accuracy_limits([v for _, c in curves for v in c], spare=0.1)
    under = _draw_curves(ax, curves, colours, best, bottom)
    rungs = doc["search"].get("rungs", [])
    for rung in rungs:
        ax.axvline(rung, linestyle=":", color="grey", linewidth=1)
    axes.epoch_axis(ax, max([doc["search"].get("max_epochs") or 0] + [len(c) for _, c in curves] + [1]))
    ax.set_ylim(bottom, top)
    ax.set_ylabel("validation accuracy")
    if under:
        ax.set_xlabel(axes.plain(f"epoch\n▼ below the axis: {', '.join(under[:5])}" + (" …" if len(under) > 5 else "")))
    counts = states(doc)
    fig.legend(handles=_legend(curves, colours, best, counts, bool(rungs)), loc="outside right upper", fontsize=8,
               frameon=False)
    # Every word of it from a results file: printable, bounded, `$` literal (axes.plain).
    ax.set_title(axes.plain(f"Search: sampler {one_line(str(doc['search'].get('sampler')), 20)}, pruner "
                            f"{one_line(str(doc['search'].get('pruner')), 20)}; "
                            + ", ".join(f"{n} {one_line(str(s), 20)}" for s, n in counts.items()), 200), fontsize=10)
    return save(fig, out / "search.png", layout=False)


def _draw_curves(ax, curves: list, colours: dict, best: str, bottom: float) -> list[str]:
    """Each trial's curve in its architecture's colour (the best thick, a pruned one ending in ×);
    the trials that fall below the axis, each marked ▼ on its bottom edge."""
    under = []
    for record, curve in curves:
        style, width, alpha = STATE_STYLE.get(record.get("state", "complete"), ("-", 1.0, 0.6))
        is_best = record["candidate"] == best
        epochs = list(range(1, len(curve) + 1))
        colour = colours[_architecture(record)]
        ax.plot(epochs, curve, style, color=colour, linewidth=3 if is_best else width, alpha=1.0 if is_best else alpha,
                marker="o" if len(curve) == 1 else None, markersize=3)
        if record.get("state") == "pruned":
            ax.plot(epochs[-1:], curve[-1:], "x", color=colour, markersize=9, mew=2)
        if min(curve) < bottom:
            under.append(record["candidate"])
            low = [e for e, v in zip(epochs, curve) if v < bottom]
            ax.plot(low, [bottom] * len(low), "v", color=colour, markersize=7, clip_on=False)
    return under


def _legend(curves: list, colours: dict, best: str, counts: dict, rungs: bool) -> list:
    """The legend's entries: each architecture's colour, the best, how each state is drawn, the rungs."""
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=colour, linewidth=2, label=axes.plain(a)) for a, colour in colours.items()]
    handles += [Line2D([], [], color="black", linewidth=3, label=axes.plain(f"best: {best}")),
                Line2D([], [], color="black", linewidth=1.6, label="trained to the end"),
                *([Line2D([], [], color="black", linewidth=1.0, alpha=0.55, marker="x", markersize=8, mew=2,
                          label="pruned (× where it stopped)")] if counts.get("pruned") else [])]
    for state in sorted({r.get("state") for r, _ in curves} - {"complete", "pruned", None}):
        style, width, alpha = STATE_STYLE.get(state, ("-", 1.0, 0.6))
        handles.append(Line2D([], [], color="black", linestyle=style, linewidth=width, alpha=alpha,
                              label=axes.plain(f"{state} (its epochs so far)", 60)))
    handles += [Line2D([], [], color="grey", linestyle=":", label="rung: the pruner judges here")] if rungs else []
    return handles


def _architecture(record: dict) -> str:
    """The model a trial trained (`deep_cnn` of `deep_cnn#006`)."""
    name = record.get("architecture") or str(record["candidate"])
    return name.split("#")[0].split("@")[0].split("~")[0] if not record.get("architecture") else name


def plot_parameters(doc: dict, out: Path, save) -> Path | None:
    """val_accuracy against each value the trials differ in, one panel per value, colour by
    architecture, hollow when pruned; trained trials only (a lost or failed one has no model's
    figure); the accuracy axis from the data, as in search.png; the legend beside the panels."""
    import matplotlib.pyplot as plt
    records = [r for r in doc["candidates"] if isinstance(r.get("hyperparameters"), dict) and axes.trained(r)
               and axes.finite([r["val_accuracy"]])]
    names = sorted(values.varying(records), key=lambda k: (k not in _SHARED, k))
    if not records or not names:
        return None
    cols = 2 if len(names) == 4 else min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(4.3 * cols + 1.6, 3.3 * rows + 0.6), squeeze=False,
                             layout="constrained")
    architectures = sorted({_architecture(r) for r in records})
    colours = {c: f"C{i % 10}" for i, c in enumerate(architectures)}
    bottom, top = axes.accuracy_limits([r["val_accuracy"] for r in records], spare=0.1)
    for ax, name in zip(grid.flat, names):
        _panel(ax, name, [r for r in records if name in r["hyperparameters"]], colours, bottom)
        ax.set_ylim(bottom, top)
    for ax in list(grid.flat)[len(names):]:
        ax.axis("off")
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[c], label=axes.plain(c)) for c in architectures]
    handles += [plt.Line2D([], [], marker="o", linestyle="", markerfacecolor="none", color="black",
                           label="pruned (figure at the epoch it stopped)")] \
        if any(r.get("state") == "pruned" for r in records) else []
    below = axes.below([r["val_accuracy"] for r in records], bottom)
    handles += [plt.Line2D([], [], marker="v", linestyle="", color="black", label=f"below {bottom:g} ({below})")] if below else []
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
    fig.suptitle("What each searched value did to val_accuracy")
    return save(fig, out / "parameters.png", layout=False)


_SHARED = ("learning_rate", "batch_per_replica")


def _panel(ax, name: str, records: list[dict], colours: dict, bottom: float) -> None:
    xs = [r["hyperparameters"][name] for r in records]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    labels = xs if numeric else [axes.plain(x) for x in xs]
    for record, x in zip(records, labels):
        acc = record["val_accuracy"]
        pruned = record.get("state") == "pruned"
        colour = colours[_architecture(record)]
        ax.plot([x], [max(acc, bottom)], "v" if acc < bottom else "o", markerfacecolor="none" if pruned else colour,
                markeredgecolor=colour, clip_on=False)
    positive = axes.finite(xs) if numeric else []
    if positive and min(positive) > 0 and max(positive) / min(positive) >= 10:
        ax.set_xscale("log")
    ax.set_title(label(name, 40), fontsize=9)
    ax.set_ylabel("val_accuracy")


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
