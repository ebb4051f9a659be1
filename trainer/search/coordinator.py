"""The chief's side of a parallel search: the study as the hosts see it. Every host (the chief too)
asks for a trial when it is free, reports each epoch and is told when its trial is pruned.

Its policy, over typed calls (wire.py) and with no network of its own (queue.py serves it):
- a trial goes to the host that asks; a retry first, but not to a host that already lost it while
  another host is there;
- a host that stops answering for `lost_after_s` (or whose trial reports no epoch for far longer
  than any epoch took: a wedged GPU), or that the launcher saw exit for good (a file in
  `signals/`), has its trial handed on, its name kept, its number counting nothing;
- a trial that fails on its host (out of memory) is handed on like a lost one, once per host; a
  host that fails QUARANTINE_AFTER trials in a row gets no more (it would burn the budget in
  seconds); if no host is left to train, the search stops, saying why;
- what a host says is checked: its figures (results_check.host_figures), its epoch's figures (accuracy
  in [0, 1], a loss ≥ 0); the rest of a trial's record is the chief's own.
Every few seconds it writes where the search is (progress.SearchProgress), whatever the chief's own
training is doing, for the launcher's live view.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from trainer.spec import results_check, space, trial_record
from trainer.spec.progress import SearchProgress, write_search
from trainer.search.study import Study
from trainer.search.wire import Ask, Done, Fail, Finish, Offer, Report, Verdict, Wait, printable

WAIT_S = 2.0                 # what an idle host is told to wait before it asks again
STALL_FACTOR = 4             # a trial silent about epochs for this × the slowest epoch seen is wedged
QUARANTINE_AFTER = 3         # trials failed in a row on one host before it gets no more
PROGRESS_EVERY_S = 2.0
SIGNALS = "signals"          # in the backup folder: `<host>.lost`, written by the launcher


class Coordinator:
    def __init__(self, study: Study, lost_after_s: float, log: Callable[[str], None] = print,
                 hosts: Optional[Iterable[str]] = None, classes: int = 0, folder: Optional[Path] = None,
                 progress: Optional[Path] = None, own: str = ""):
        self.study, self.lost_after_s, self.log, self.classes = study, lost_after_s, log, classes
        self.own = own                            # the chief's own host: its loop is this process, never silent
        self.known = set(hosts) if hosts else None    # None: the chief alone, without a launcher
        self.signals = Path(folder) / SIGNALS if folder else None
        self.progress_path = progress
        self.seen: dict[int, float] = {}          # trial number → when its host last spoke
        self.progressed: dict[int, float] = {}    # trial number → when it was handed out or last reported an epoch
        self.slowest: dict[int, float] = {}       # trial number → its longest wait for an epoch so far (s)
        self.lost: dict[str, list[str]] = {}      # host → trials it lost (their retries' names)
        self.told_done: set[str] = set()
        self.hosts: dict[str, dict] = {}          # host → what it announced (replicas, restarts)
        self.trained: dict[str, list[str]] = {}   # host → the trials it finished
        self.heard: dict[str, float] = {}         # host → when it last called
        self.gone: set[str] = set()               # hosts lost (until they call again)
        self.ended: set[str] = set()              # hosts the launcher saw end for good (until they call again)
        self.started = time.monotonic()
        self.failures: dict[str, int] = {}        # host → trials failed in a row
        self.quarantined: set[str] = set()
        self.pace: dict[str, list[float]] = {}    # host → its last epochs' seconds
        self.current: dict[str, tuple] = {}       # host → (trial name, epochs done, its epochs)
        self.stopped = ""                         # why the search stopped early, if it did
        self.lock = threading.RLock()

    # --- the calls -----------------------------------------------------------------------------
    def handle(self, host: str, call):
        """A host's call (already proven to be that host's) → the answer."""
        with self.lock:
            self.heard[host] = time.monotonic()
            self.gone.discard(host)
            self.ended.discard(host)
            if isinstance(call, Ask):
                self.hosts[host] = {"replicas": call.replicas, "restarts": call.restarts}
                return self.next(host)
            if self._lost(call.number, host):        # handed to another host meanwhile: drop it
                return Verdict(lost=True)
            self.seen[call.number] = time.monotonic()
            if isinstance(call, Report):
                return Verdict(prune=self.report(host, call))
            if isinstance(call, Finish):
                self.finish(call.number, host, call.figures)
            elif isinstance(call, Fail):
                self.failed(call.number, host, call)
            return Verdict()

    def next(self, host: str):
        if self.study.done() or self.stopped:
            self.told_done.add(host)
            return Done(self.stopped or ("the search's space is used up" if self.study.exhausted else ""))
        if host in self.quarantined:
            return Wait(WAIT_S)
        trial = self.study.resume_or_next(host, others=frozenset(self._others(host)))
        if trial is None:
            return Wait(WAIT_S)
        self.seen[trial.number] = self.progressed[trial.number] = time.monotonic()
        self.current[host] = (trial.name, 0, space.max_epochs(self.study.cfg))
        return Offer(trial)

    def _others(self, host: str) -> list[str]:
        """The other hosts that can still train: heard from lately, neither lost nor quarantined."""
        now = time.monotonic()
        return [h for h, at in self.heard.items() if h != host and h not in self.gone and h not in self.quarantined
                and now - at <= self.lost_after_s]

    def report(self, host: str, call: Report) -> bool:
        now = time.monotonic()
        took = now - self.progressed.get(call.number, now)
        self.slowest[call.number] = max(self.slowest.get(call.number, 0.0), took)
        self.progressed[call.number] = now
        self.pace[host] = (self.pace.get(host, []) + [took])[-20:]
        name, _, epochs = self.current.get(host, ("", 0, space.max_epochs(self.study.cfg)))
        self.current[host] = (name, call.epoch, epochs)
        return self.study.report(call.number, call.epoch, call.val_accuracy, call.val_loss)

    def finish(self, number: int, host: str, sent) -> None:
        """The trial's record: the chief's own knowledge, and the host's figures, checked."""
        trial, where = self.study.trial(number), f"{host}'s trial {number}"
        figures = results_check.host_figures(sent, self.classes, where)
        self.study.finish(number, trial_record.of_host(trial, figures, host, where))   # checked as results.json will hold it
        self.trained.setdefault(host, []).append(trial.name)
        self.failures[host] = 0
        self.seen.pop(number, None)
        self.current.pop(host, None)

    def failed(self, number: int, host: str, call: Fail) -> None:
        """A trial failed on its host: for good when its builder refused its values (any host would);
        otherwise handed on, and the host quarantined once it has failed too many in a row."""
        self.current.pop(host, None)
        if call.build:
            self.study.fail(number, f"on {host}: {call.why}")
            return
        self._hand_on(number, host, f"it failed on {host} ({call.why})")
        self.failures[host] = self.failures.get(host, 0) + 1
        if self.failures[host] >= QUARANTINE_AFTER and host not in self.quarantined:
            self.quarantined.add(host)
            self.log(f"[queue] {host} failed {self.failures[host]} trials in a row; it gets no more trials "
                     f"(its trials went to other hosts). Last: {call.why}")
            self._stop_if_nobody_left()

    def _stop_if_nobody_left(self) -> None:
        """No host is left that could train and none trains: the search stops, saying why, rather
        than wait for ever (checked on each failure and each second: the last able host may go)."""
        if self.stopped or not self.quarantined:
            return
        hosts = set(self.hosts) | (self.known or set())
        if self._able(hosts, time.monotonic()) or self.study.running_hosts() or self.study.done():
            return
        failed = ", ".join(f"{h} failed {QUARANTINE_AFTER} trials in a row" for h in sorted(self.quarantined))
        lost = ", ".join(f"{h} lost" for h in sorted(hosts - self.quarantined))
        self.stopped = f"no host is left to train: {failed}" + (f"; {lost}" if lost else "") + "; the search stopped"
        self.study.stop(self.stopped)
        self.log(f"[queue] {self.stopped}")

    def _able(self, hosts: set[str], now: float) -> list[str]:
        """The hosts that may still train: not quarantined, not seen to end by the launcher, and
        heard from within twice lost_after_s (a host of the cluster that has not asked yet: since
        the queue started). A host silent that long has given up on the queue itself (its client's
        patience); one silent for less may be back after a blip. The chief's own loop is this process."""
        patience = 2 * self.lost_after_s
        return [h for h in hosts if h not in self.quarantined and h not in self.ended
                and (h == self.own or now - self.heard.get(h, self.started) <= patience)]

    def _lost(self, number: int, host: str) -> bool:
        """Whether `host`'s trial was handed to another host meanwhile (it must drop it)."""
        return self.study.running_hosts().get(number) != host

    # --- the watch -------------------------------------------------------------------------------
    def watch(self, stop: threading.Event) -> None:
        """Until `stop`: hand on the trials of hosts the launcher saw go, of hosts silent for
        lost_after_s, and of trials that report no epoch for far longer than any epoch took (alive,
        but wedged); write where the search is every few seconds."""
        written, said = 0.0, set()
        while not stop.wait(1.0):
            try:
                written = self._watch_round(written)
            except Exception as exc:    # noqa: BLE001 - a watch that died once left a search 'running' for ever
                text = printable(f"{type(exc).__name__}: {exc}")[:300]
                if text not in said:
                    said.add(text)
                    self.log(f"[queue] the watch met an error, and goes on: {text}")

    def _watch_round(self, written: float) -> float:
        """One look of the watch; when the search's progress was last written."""
        with self.lock:
            self._read_signals()
            now = time.monotonic()
            for number, host in self.study.running_hosts().items():
                why = self._why_lost(number, host, now)
                if why:
                    self._hand_on(number, host, why)
                    self.gone.add(host)
            self._stop_if_nobody_left()         # the last host able to train may just have gone
            if now - written >= PROGRESS_EVERY_S:
                self.write_progress()
                return now
            return written

    def _read_signals(self) -> None:
        """`<host>.lost` from the launcher, which saw the host's container end for good or the host
        stop answering: its trial goes on at once, not after lost_after_s."""
        if self.signals is None or not self.signals.is_dir():
            return
        for path in sorted(self.signals.glob("*.lost"))[:64]:
            host = path.name[:-len(".lost")]
            try:
                why = printable(path.read_text(errors="replace")[:200]).strip()
                path.unlink()
            except OSError:
                continue
            if self.known is not None and host not in self.known:
                continue
            self.gone.add(host)
            self.ended.add(host)
            self.current.pop(host, None)
            for number, runner in self.study.running_hosts().items():
                if runner == host:
                    self._hand_on(number, host, f"the launcher saw {host} {why or 'end'}")

    def _why_lost(self, number: int, host: str, now: float) -> str:
        if host in self.ended:                  # the launcher's word, not yet acted on (its look failed)
            return f"the launcher saw {host} end"
        silent = now - self.seen.setdefault(number, now)
        if silent > self.lost_after_s and host != self.own:     # a busy chief's own loop is slow, not lost
            return f"{host} stopped answering for {self.lost_after_s:g} s"
        # Wedged: silent about epochs for far longer than this very trial's slowest epoch (another
        # trial's epochs say nothing: a deep model's first epoch may take minutes where a small one's
        # took seconds); before its first epoch, only the heartbeat judges it.
        slowest = self.slowest.get(number, 0.0)
        stalled, limit = now - self.progressed.setdefault(number, now), max(self.lost_after_s, STALL_FACTOR * slowest)
        if slowest and stalled > limit:
            return f"{host} reported no epoch for {stalled:.0f} s (its slowest epoch so far took {slowest:.1f} s)"
        return ""

    def _hand_on(self, number: int, host: str, why: str) -> None:
        retry = self.study.lose(number, why)
        self.seen.pop(number, None)
        self.progressed.pop(number, None)
        self.slowest.pop(number, None)
        if retry:
            self.lost.setdefault(host, []).append(retry)
            self.log(f"[queue] {why}: its trial {number} goes to another host as {retry}")
        elif retry == "":
            self.log(f"[queue] {why}: its trial {number} failed for good (lost too often)")

    # --- where the search is ---------------------------------------------------------------------------
    def search_progress(self, finished: bool = False) -> SearchProgress:
        with self.lock:
            counts = self.study.counts()
            now = time.monotonic()
            hosts = {}
            for host in sorted(set(self.hosts) | set(self.heard)):
                pace = self.pace.get(host, [])
                name, epoch, epochs = self.current.get(host, ("", 0, 0))
                state = ("quarantined" if host in self.quarantined else "lost" if host in self.gone
                         else "done" if host in self.told_done else "training" if name else "waiting")
                hosts[host] = {"trial": name, "epoch": epoch, "epochs": epochs, "state": state,
                               "seconds_per_epoch": round(sum(pace) / len(pace), 3) if pace else 0.0,
                               "trials": len(self.trained.get(host, [])), "silent_s": round(now - self.heard.get(host, now), 1)}
            return SearchProgress.of(counts, budget=self.study.budget, max_epochs=space.max_epochs(self.study.cfg),
                                     expected_epochs=expected_epochs(self.study.cfg, counts), hosts=hosts,
                                     finished=finished or self.study.done(), note=self.stopped
                                     or ("the space is used up" if self.study.exhausted else ""))

    def write_progress(self, finished: bool = False) -> None:
        if self.progress_path is not None:
            write_search(self.progress_path, self.search_progress(finished))

    def summary(self) -> dict:
        """What results.json says of the hosts: {hosts: {host: the retries of the trials it lost},
        replicas, restarts, placement, quarantined}."""
        with self.lock:
            said = self.hosts
            return {"hosts": {h: self.lost.get(h, []) for h in sorted(said)},
                    "replicas": sum(h.get("replicas", 1) for h in said.values()),
                    "restarts": max((h.get("restarts", 0) for h in said.values()), default=0),
                    "placement": {h: list(self.trained.get(h, [])) for h in sorted(said)},
                    "quarantined": sorted(self.quarantined)}


def expected_epochs(cfg, counts: dict) -> float:
    """The epochs a trial still to come is expected to train: the mean of the trials that ended
    once three have, else what successive halving keeps on average (every trial reaches the first
    rung, 1/η of them the next, …), else every epoch."""
    if counts.get("epochs_per_trial") and counts.get("done", 0) + counts.get("pruned", 0) >= 3:
        return float(counts["epochs_per_trial"])
    return halving_epochs(space.rungs(cfg), space.max_epochs(cfg), cfg.search.reduction_factor)


def halving_epochs(rungs: list[int], max_epochs: int, eta: int) -> float:
    """The mean epochs of a trial under successive halving at `rungs`: a fraction η^-k goes past rung k."""
    if not rungs:
        return float(max_epochs)
    stops = rungs + [max_epochs]
    share, total = 1.0, 0.0
    for k, epoch in enumerate(stops):
        survive_to_next = 1.0 / eta if k < len(rungs) else 0.0
        total += share * (1 - survive_to_next) * epoch
        share *= survive_to_next
    return round(total, 2)
