"""The live part: while `up --wait` or `watch` polls the hosts, each epoch the progress files list
goes to the tracker, from a thread of its own, so a tracker that is down or slow never holds the
poll up (nor, then, the fail-fast that the poll drives).

The wait loop is not changed for it: `live(group, …)` puts a relay in front of the group's
reporter for the length of the wait, which hands every progress document it shows to the outbox
as well. The outbox keeps the epochs it has not sent (in memory: the run folder's history files
hold them all anyway, and collect sends what is missing), tries again every RETRY_S while the
tracker does not answer, and says so once: a warning line, and an `MLflow` row in the live view.

Each trial is one child run whatever the number of hosts: in sync mode the chief's progress alone
is read (every worker lists the same epochs), in parallel mode each host's (each trains its own
trials), and runs are found by their tags before one is made (client.py).
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator, Optional

from launcher.tracking import mapping
from launcher.tracking.client import Tracker, TrackerError
from launcher.tracking.secrets import shown

ROW = "MLflow"            # the live view's row (no host can be named so: host names are lowercase)
RETRY_S = 15.0            # a tracker that did not answer is tried again after this
SEND_EVERY_S = 1.0
MAX_KEPT = 100_000        # epochs kept while the tracker is down (beyond, collect sends them from the files)


class Relay:
    """The group's reporter, with every progress document also handed to the outbox."""

    def __init__(self, inner, outbox: "Outbox"):
        self._inner, self._outbox = inner, outbox

    def progress(self, host: str, progress, restarts: int = 0) -> None:
        self._inner.progress(host, progress, restarts)
        self._outbox.offer(host, progress)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class Outbox:
    def __init__(self, settings, cluster: str, run_id: str, hosts: list[str], reader: Optional[str],
                 params: dict[str, str], tags: dict[str, str], reporter, connect=Tracker):
        self.connect = connect               # settings → a Tracker (tests: a stand-in for the tracker)
        self.settings, self.cluster, self.run_id, self.hosts = settings, cluster, run_id, hosts
        self.reader = reader                 # the one host whose progress counts (sync), or None: every host
        self.params, self.tags, self.reporter = params, tags, reporter
        self.kept: dict[tuple[str, int], mapping.Epoch] = {}
        self.sent: dict[str, set[int]] = {}  # trial → the epochs the tracker holds
        self.runs: dict[str, str] = {}       # trial → its run id
        self.parent: Optional[str] = None
        self.tracker: Optional[Tracker] = None
        self.down: Optional[str] = None      # why the tracker did not answer, while it does not
        self.retry_at = 0.0
        self.sent_count = 0
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="tfcompose-tracking", daemon=True)

    # --- the wait loop's side: never blocks on the tracker -------------------------------------

    def offer(self, host: str, progress) -> None:
        if self.reader is not None and host != self.reader:
            return
        with self._lock:
            for epoch in mapping.progress_epochs(progress, host):
                key = (epoch.trial, epoch.step)
                if epoch.step not in self.sent.get(epoch.trial, ()) and key not in self.kept \
                        and len(self.kept) < MAX_KEPT:
                    self.kept[key] = epoch

    def start(self) -> None:
        self.reporter.stage(ROW, "tracking", f"MLflow at {self._where()}, experiment {self.settings.experiment!r}")
        self._thread.start()

    def stop(self, wait_s: float) -> None:
        """Stop sending; what is still kept is collect's (it reads the history files)."""
        self._stop.set()
        self._thread.join(wait_s)

    # --- the thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(SEND_EVERY_S):     # the search's run at once, then epochs as they come
            if (self.kept or self.parent is None) and time.monotonic() >= self.retry_at:
                self.send_kept()

    def send_kept(self) -> None:
        try:
            self._send()
        except TrackerError as exc:
            self.retry_at = time.monotonic() + RETRY_S
            if self.down is None:
                self.reporter.warn(None, f"tracking: {exc}; training goes on: the epochs are kept and sent when it "
                                         "answers, and collect sends what is missing")
                self.reporter.stage(ROW, "not answering", f"{len(self.kept)} epoch(s) kept; tried again every "
                                                          f"{RETRY_S:g} s")
            self.down = str(exc)
            return
        if self.down is not None:
            self.down = None
            self.reporter.stage(ROW, "tracking", f"MLflow at {self._where()} answers again; every epoch kept was sent")

    def _send(self) -> None:
        if self.tracker is None:
            self.tracker = self.connect(self.settings)
        tracker = self.tracker
        if self.parent is None:
            self.parent = self._parent(tracker)
        with self._lock:
            by_trial: dict[str, list[mapping.Epoch]] = {}
            for epoch in self.kept.values():
                by_trial.setdefault(epoch.trial, []).append(epoch)
        for trial, epochs in by_trial.items():
            if self._stop.is_set():
                return
            run = self._trial_run(tracker, trial, epochs[0].host,
                                  min((e.started for e in epochs if e.started is not None), default=None))
            self.sent[trial] |= tracker.steps(run)      # what another sender (a `watch` beside `up --wait`) sent
            new = sorted((e for e in epochs if e.step not in self.sent[trial]), key=lambda e: e.step)
            tracker.log(run, epochs=new)
            with self._lock:
                self.sent[trial].update(e.step for e in epochs)
                for e in epochs:
                    self.kept.pop((trial, e.step), None)
            self.sent_count += len(new)

    def _parent(self, tracker: Tracker) -> str:
        found = tracker.search(self.cluster, self.run_id)
        if found is not None:
            missing = {k: v for k, v in self.params.items() if k not in found.data.params}
            tracker.log(found.info.run_id, params=missing)
            return found.info.run_id
        run = tracker.create_search(self.cluster, self.run_id, self.tags)
        tracker.log(run.info.run_id, params=self.params)
        return run.info.run_id

    def _trial_run(self, tracker: Tracker, trial: str, host: str, started=None) -> str:
        """The trial's run, found or made (started when the trial started, as its host said)."""
        if trial not in self.runs:
            self.runs.update({name: run.info.run_id for name, run in tracker.trials(self.parent).items()})
        if trial not in self.runs:
            tags = {f"{mapping.PREFIX}state": "running", f"{mapping.PREFIX}host": host or ",".join(self.hosts)}
            self.runs[trial] = tracker.create_trial(self.parent, trial, tags, started).info.run_id
            self.sent[trial] = set()
        elif trial not in self.sent:
            self.sent[trial] = tracker.steps(self.runs[trial])
        return self.runs[trial]

    def _where(self) -> str:
        return shown(self.settings.uri)


@contextlib.contextmanager
def live(group, plan, run_id: str) -> Iterator[Optional[Outbox]]:
    """Around a wait loop over `group`: the epochs it reads go to the tracker as they come.
    Without `tracking:` in the inventory, nothing."""
    settings = plan.cluster.tracking
    if settings is None:
        yield None
        return
    cluster = plan.cluster
    hosts = [h.name for h in cluster.hosts]
    outbox = Outbox(settings, cluster.name, run_id, hosts, None if plan.parallel else cluster.chief.name,
                    mapping.search_params(cluster.spec.train_or_defaults.model_dump(mode="json"), hosts,
                                          "parallel" if plan.parallel else "sync"),
                    mapping.search_tags(cluster.name, run_id, hosts, cluster.spec.image), group.reporter)
    inner = group.reporter
    group.reporter = Relay(inner, outbox)
    outbox.start()
    try:
        yield outbox
    finally:
        group.reporter = inner
        outbox.stop(settings.timeout_s + 1)
