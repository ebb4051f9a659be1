"""Training progress (trainer/spec/progress.py's documents) said in one line (was in view.py): a
trial and its epoch, images/s, the last metrics and the ETA; each epoch finished since the last
look; a study-driven search's tally. Plain text, for the live view and for lines off a terminal."""
from __future__ import annotations

from launcher.text import clock


def trial_words(p, trial_index: int, trial: str) -> str:
    """`trial 3/16 small_cnn#003` (every worker trains every trial), or in a parallel search, where
    a host counts only its own, `small_cnn#007 (its 3rd trial)`."""
    if p.scope == "host":
        return f"{trial} (its {ordinal(trial_index)} trial)"
    return f"trial {trial_index}/{p.trials} {trial}"


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def describe(p, restarts: int = 0, eta=None) -> str:
    """One line: the trial, epoch j/m, images/s, the last metrics, the ETA (and restarts, if any).
    `eta`: a parallel search's ETA for this host (the search's, from the chief's queue)."""
    metrics = " ".join(f"{k} {v:.4f}" for k, v in (("loss", p.loss), ("acc", p.accuracy), ("val_acc", p.val_accuracy)))
    eta = p.eta_seconds() if p.scope != "host" else eta
    line = (f"{trial_words(p, p.trial_index, p.trial)} epoch {p.epoch}/{p.epochs} {p.images_per_second:.0f} img/s "
            f"{metrics} ETA {clock(eta)}")
    restarts = max(restarts, p.restarts)
    return line + (f" restarts {restarts}" if restarts else "") + (" (done)" if p.done else "")


def search_summary(search: dict) -> str:
    """`3 done, 1 pruned, 2 running, 4 left; best small_cnn#003 (val_acc 0.9750)`."""
    failed = f", {search['failed']} failed" if search.get("failed") else ""
    text = f"{search['done']} done, {search['pruned']} pruned{failed}, {search['running']} running, {search['left']} left"
    return text + (f"; best {search['best']} (val_acc {search['best_val_accuracy']:.4f})" if search["best"] else "")


def epoch_lines(p, after: tuple, restarts: int = 0, eta=None) -> tuple[list[str], tuple]:
    """One line per epoch finished since `after` (trial index, epoch), in order; the new mark.
    `eta`: a parallel search's ETA for this host now (its earlier epochs' ETAs are not known)."""
    lines, mark = [], after
    restarts = max(restarts, p.restarts)
    for trial_index, trial, epoch, epochs, loss, acc, _val_loss, val_acc, ips in p.recent:
        if (trial_index, epoch) <= after[:2]:
            continue
        when = p.eta_seconds(trial_index, epoch) if p.scope != "host" else eta
        lines.append(f"{trial_words(p, trial_index, trial)} epoch {epoch}/{epochs} {ips:.0f} img/s loss {loss:.4f} "
                     f"acc {acc:.4f} val_acc {val_acc:.4f} ETA {clock(when)}" + (f" restarts {restarts}" if restarts else ""))
        mark = (trial_index, epoch)
    return lines, mark
