"""Watching a run: each host's progress (trainer/progress.py) read at every poll of `up --wait`
and `tfcompose watch`, and how it reads as one line. `run:` programs write no progress file: they
show the time since the start and their last log line instead."""
from __future__ import annotations

from typing import Optional

from launcher import docker_commands as dc
from launcher.group import Group
from launcher.inventory import Host
from trainer.progress import Progress, parse


def read(group: Group) -> dict[str, Progress]:
    """The newest progress document of every host that has one (hosts that do not answer: none)."""
    def newest(host: Host, conn) -> Optional[Progress]:
        out = conn.run(dc.read_progress_files(f"{host.bundle_dir}/results"), check=False).stdout
        found = [p for p in (parse(line) for line in out.splitlines() if line.strip()) if p]
        return max(found, key=lambda p: p.updated) if found else None
    result = group.run("progress", newest)
    return {h: p for h, p in result.succeeded.items() if p is not None}


def clock(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def describe(p: Progress, restarts: int = 0) -> str:
    """One line: trial i/n, epoch j/m, images/s, the last metrics, the ETA (and restarts, if any)."""
    metrics = " ".join(f"{k} {v:.4f}" for k, v in (("loss", p.loss), ("acc", p.accuracy), ("val_acc", p.val_accuracy)))
    line = (f"trial {p.trial_index}/{p.trials} {p.trial} epoch {p.epoch}/{p.epochs} {p.images_per_second:.0f} img/s "
            f"{metrics} ETA {clock(p.eta_seconds())}")
    restarts = max(restarts, p.restarts)
    return line + (f" restarts {restarts}" if restarts else "") + (" (done)" if p.done else "")


def epoch_lines(p: Progress, after: tuple[int, int], restarts: int = 0) -> tuple[list[str], tuple[int, int]]:
    """One line per epoch finished since `after` (trial index, epoch), in order; the new mark."""
    lines, mark = [], after
    restarts = max(restarts, p.restarts)
    for trial_index, trial, epoch, epochs, loss, acc, _val_loss, val_acc, ips in p.recent:
        if (trial_index, epoch) <= after:
            continue
        lines.append(f"trial {trial_index}/{p.trials} {trial} epoch {epoch}/{epochs} {ips:.0f} img/s loss {loss:.4f} "
                     f"acc {acc:.4f} val_acc {val_acc:.4f} ETA {clock(p.eta_seconds(trial_index, epoch))}"
                     + (f" restarts {restarts}" if restarts else ""))
        mark = (trial_index, epoch)
    return lines, mark


def watch(cluster, reporter=None, poll_s: float = 2.0):
    """Attach to a running cluster: progress until the run ends; nothing is stopped or collected."""
    from launcher.plan import make
    from launcher.wait import wait_for_chief
    with Group(cluster, reporter) as group:
        return wait_for_chief(group, make(cluster), poll_s, act=False)
