"""What the report's pictures share: accuracy axes chosen from the data, an epoch axis that stays
an axis when a trial ran one epoch, what counts as a trained trial, and the legend kept outside
the data. Pure but for the matplotlib calls on an axis it is given."""
from __future__ import annotations

import math

from launcher.text import label

TRAINED = ("complete", "pruned")   # trials with figures of a model really trained (the others: lost, failed)


def trained(record: dict) -> bool:
    return record.get("state", "complete") in TRAINED


def finite(values) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def accuracy_limits(values, spare: float = 0.0) -> tuple[float, float]:
    """The y range for accuracies: from the data, not 0–1, so that trials at 0.95–1.0 are told
    apart. The bottom sits below the lowest value (with `spare` = 0.1, below the lowest tenth of
    them: a diverged trial at chance may leave the axis, it is no contender), on a round step;
    the top just above the highest value (1.0 itself stays visible)."""
    points = sorted(finite(values))
    if not points:
        return 0.0, 1.02
    low, high = points[int(spare * (len(points) - 1))], points[-1]
    bottom = max(0.0, low - 0.25 * max(high - low, 0.02))
    step = 0.05 if high - bottom > 0.15 else 0.01
    bottom = math.floor(bottom / step + 1e-9) * step
    top = min(1.0, high + 0.1 * (high - bottom)) + 0.03 * (high - bottom if high < 1.0 else 1.0 - bottom)
    return round(bottom, 4), top


def below(values, bottom: float) -> int:
    """How many of `values` lie under the axis (said in the picture: nothing is hidden silently)."""
    return sum(1 for v in finite(values) if v < bottom)


def epoch_axis(ax, last_epoch: int) -> None:
    """Epochs 1 … last_epoch as whole numbers, half an epoch of margin each side: a trial pruned
    at epoch 1 is a point on a real axis, not a dot on 0.945–1.050."""
    from matplotlib.ticker import MaxNLocator
    ax.set_xlim(0.5, max(last_epoch, 1) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")


def plain(text: str, limit: int = 120) -> str:
    """Text from a results file as matplotlib must show it: each of its lines printable and bounded
    (text.label), literally (a `$` would start mathtext, and a stray one would stop the drawing)."""
    return "\n".join(label(line, limit) for line in str(text).split("\n"))


def left_out(records: list[dict], why: str) -> str:
    """A picture's note on the trials it does not draw, by what became of them (`2 failed: a, b;
    4 retried: …`), wrapped to the figure: their reasons are in report.md's table."""
    import textwrap
    by_state: dict[str, list[str]] = {}
    for record in records:
        onward = record.get("retried_as") if isinstance(record.get("retried_as"), str) else ""
        by_state.setdefault(record.get("state", "complete"), []).append(
            str(record["candidate"]) + (f" → {onward}" if onward else ""))
    parts = [f"{len(names)} {state}: " + ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
             for state, names in by_state.items()]
    return plain(textwrap.fill(f"not drawn, {why}: " + "; ".join(parts), width=120)) if parts else ""
