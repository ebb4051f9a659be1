"""Searched values as a person reads them: beside each trial (`lr 3.2e-3, bs 32, width 64`: the
terminal leaderboard, report.md, leaderboard.png) and the space a search will draw from (what
`tfcompose validate` understood). Pure: no file, no plotting.

A trial shows only the values that vary across its run's trials (a value every trial shares says
nothing about why one won), each with as few digits as keep its run's values apart. A grid trial
already carries its values in its name (`small_cnn@lr=0.01,bs=16`) and gets none again.
"""
from __future__ import annotations

import math

from launcher.text import printable

SHORT = {"learning_rate": "lr", "batch_per_replica": "bs"}
MAX_TEXT = 40          # a value that is text (a user builder's choice): at most this many characters


def _real(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value != 0


def exponent_form(values) -> bool:
    """Whether a set of values reads best as `3.2e-3`: any of them is tiny or huge (then all are
    written so: `1e-2, 1e-3`, not `0.01, 1e-3`)."""
    return any(_real(v) and (abs(v) < 1e-2 or abs(v) >= 1e5) for v in values)


def number(value, digits: int = 2, exponent: bool | None = None) -> str:
    """`3.2e-3`, `0.25`, `64`, `1.5e5`: `digits` significant digits (never fewer than a number's
    whole digits), exponents without padding (`exponent`: always or never; None: as the value
    needs); text as it is, printable and bounded."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = printable(str(value))
        return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"
    if not _real(value):
        return str(value) if isinstance(value, int) or value != 0 else "0"
    if exponent if exponent is not None else exponent_form([value]):
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    whole = len(str(int(abs(value)))) if abs(value) >= 1 else 0
    return f"{value:.{max(digits, whole)}g}"


def _values(record: dict) -> dict:
    values = record.get("hyperparameters")
    return values if isinstance(values, dict) else {}


def varying(records: list[dict]) -> list[str]:
    """The searched names whose values differ across the trials, in the order trials list them."""
    seen: dict[str, set] = {}
    for record in records:
        for name, value in _values(record).items():
            seen.setdefault(name, set()).add(repr(value))
    return [name for name, values in seen.items() if len(values) > 1]


def _digits(values: list) -> int:
    """The fewest significant digits (2 to 6) at which these values still read as different."""
    distinct, exponent = {repr(v) for v in values}, exponent_form(values)
    for digits in range(2, 7):
        if len({number(v, digits, exponent) for v in values}) == len(distinct):
            return digits
    return 6


def same_form(values: list) -> list[str]:
    """Values of one name, each as `number` writes it, all alike and told apart."""
    digits, exponent = _digits(values), exponent_form(values)
    return [number(v, digits, exponent) for v in values]


def texts(records: list[dict]) -> list[str]:
    """Each trial's varying values, `lr 3.2e-3, bs 32, width 64` ('' for a grid's trial, whose name
    holds them, or a trial without values), in the order of `records`."""
    names = varying(records)
    shown: list[dict[str, str]] = [{} for _ in records]
    for name in names:
        having = [i for i, r in enumerate(records) if name in _values(r)]
        for i, text in zip(having, same_form([_values(records[i])[name] for i in having])):
            shown[i][name] = text
    return ["" if "@" in str(record.get("candidate", "")) else
            ", ".join(f"{SHORT.get(n, n)} {shown[i][n]}" for n in names if n in shown[i])
            for i, record in enumerate(records)]


def space_lines(train) -> list[str]:
    """What a search will do, as `tfcompose validate` understood it (a trainer config)."""
    from trainer.spec import space
    search = train.search
    seed = search.seed if search.seed is not None else train.seed
    if search.sampler == "grid":
        count = search.trials or space.grid_size(train)
        how = f"grid: {count} trial(s), every combination in order" + (" (the first ones)" if search.trials else "")
    else:
        how = f"sampler {search.sampler}: {search.trials} trial(s), seed {seed}"
    lines = [f"search ({search.mode}: " + ("each host trains trials alone, from a queue on the chief, port "
                                           f"{search.port}" if search.mode == "parallel" else
                                           "every host trains each trial together") + f"): {how}",
             f"  candidates {', '.join(train.candidates)}; {space.max_epochs(train)} epoch(s) at most"
             + (f"; early stopping after {search.patience} epoch(s) without a better val_accuracy" if search.patience else ""),
             "  pruner " + (f"{search.pruner}: judged at epoch(s) {', '.join(map(str, space.rungs(train)))}, the top "
                            f"1/{search.reduction_factor} going on" if search.pruner != "none" else "none: every trial trains to the end")]
    shared = space.dimensions(train, train.candidates[0])[:2]
    lines.append("  every candidate: " + "; ".join(f"{d.name} {spec_text(d.spec)}" for d in shared))
    for candidate in train.candidates:
        own = space.dimensions(train, candidate)[2:]
        if own:
            lines.append(f"  {candidate}: " + "; ".join(f"{d.name} {spec_text(d.spec)}" for d in own))
    return lines


def spec_text(spec) -> str:
    """A range (`log_uniform 1e-4 … 0.1`) or a choice (`one of 16, 32, 64`; a single value: `64`)."""
    if isinstance(spec, list):
        shown = same_form(spec)
        return shown[0] if len(shown) == 1 else "one of " + ", ".join(shown)
    low, high = spec.bounds
    return f"{spec.kind} " + " … ".join(same_form([low, high]))


def state_text(record: dict, limit: int = 80) -> str:
    """What became of a trial, one way for the terminal, report.md and `compare` alike: `complete`,
    `pruned at 3`, `retried as …~r1`, `failed: <why's first line>` ("" when the record says no state:
    a plain grid's trial)."""
    state = record.get("state", "")
    if state == "pruned" and isinstance(record.get("pruned_at_epoch"), int):
        return f"pruned at {record['pruned_at_epoch']}"
    if state == "retried" and isinstance(record.get("retried_as"), str):
        return printable(f"retried as {record['retried_as']}")
    if state == "failed" and isinstance(record.get("why"), str):
        why = record["why"].splitlines()[0] if record["why"] else ""
        return printable(f"failed: {why[:limit]}" + ("…" if len(why) > limit else ""))
    return state if isinstance(state, str) else ""
