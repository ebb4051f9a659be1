"""Telemetry for the life of `up --wait` and `watch`: one sampler per host (command.py) held over
the SSH connection the command already has (ssh/tunnel.py's Held: a thread each), their output
parsed as it comes (parse.py), and one judge thread that, every second, takes the samples from a
bounded queue, appends them to the run folder's spools (spools.py), shows each host's line in the
live view, and warns once per episode of what the rules find (rules.py).

`sampling(group, plan, run_dir)` wraps the wait loop. It stands in for the group's reporter for
that time (`Observer`): everything the loop reports goes on to the user's reporter unchanged, and
what it says of each host (its container's state, its progress) tells the rules whether the host
trains, and stamps each sample with the host's trial and epoch.

Bounded whatever a host does: its output is parsed under parse.py's bounds (a flood ends its
sampler for good, with a warning); the queue holds at most QUEUE_MAX samples (more are dropped,
counted, and said once per host); a sampler that stops talking for SILENT_S is ended and started again, at most
RESTARTS times (sampler.py); ending takes at most STOP_S; and a host's trouble never reaches the
wait loop. The wait loop's reporter meanwhile is observer.py's.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Optional

from launcher.errors import summary
from launcher.plan import Plan
from launcher.ssh.connection import new_tag
from launcher.ssh.tunnel import Held
from launcher.telemetry import command, csvfile, live, rules
from launcher.telemetry.observer import Observer
from launcher.telemetry.parse import HostStream
from launcher.telemetry.sampler import Sampler, why_ended
from launcher.telemetry.samples import Sample
from launcher.telemetry.spools import Spool, merge

HEARTBEAT_S = 5.0         # the sampler's stdin hears from us this often (it gives up after command.SILENCE_S)
LOOK_S = rules.LOOK_S     # the judge's pace (the report's replay keeps it too)
QUEUE_MAX = 4096
STOP_S = 3.0
FLUSH_S = 5.0
SESSIONS = itertools.count()


class Session:
    def __init__(self, group, plan: Plan, run_dir: Path, period_s: float, clock=time.monotonic,
                 span_s: float = rules.SPAN_S):
        self.group, self.plan, self.run_dir, self.period_s, self.clock = group, plan, Path(run_dir), period_s, clock
        self.span_s = span_s
        self.keep_s = max(span_s, rules.SWAP_SPAN_S) + 2 * rules.MAX_GAP_S    # what the rules need of each host
        self.observer = Observer(group.reporter, clock)
        self.sync = not plan.parallel
        self.run_program = plan.cluster.spec.run is not None
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_MAX)
        self.dropped: dict[str, int] = {}         # samples the full queue turned away, per host
        self._drops_lock = threading.Lock()
        self.samplers: dict[str, Sampler] = {}
        self.windows: dict[str, deque] = {h.name: deque() for h in plan.cluster.hosts}
        self.latest: dict[str, tuple[float, Sample]] = {}
        self.counts: dict[str, int] = {}          # samples taken per host (the first has no rates to show)
        self.episodes = rules.Episodes()
        self.spools: dict[str, Optional[Spool]] = {}     # None: it could not be written (said once)
        self.name = f"{os.getpid()}-{int(time.time())}-{next(SESSIONS)}"
        self._said: set = set()
        self._stop = threading.Event()
        self._closing = threading.Event()     # stop() has begun: what ends now is not restarted
        self._judge = threading.Thread(target=self._judge_loop, name="tfcompose-telemetry", daemon=True)

    # --- life ----------------------------------------------------------------------------------
    def start(self) -> None:
        try:
            csvfile.write_rules(self.run_dir, self.span_s)      # the report judges the samples as we do
        except OSError as exc:
            self._say_once(None, f"telemetry not recorded: cannot write {exc.filename or self.run_dir}: "
                                 f"{exc.strerror or exc}")
        for host in self.plan.cluster.hosts:
            self.samplers[host.name] = Sampler(host.name, self._stream(host))
            self._launch(self.samplers[host.name])
        self._judge.start()

    def stop(self) -> None:
        """End every sampler (their stdin closed; those that do not end within STOP_S are cut off),
        take what was left in the queue, and merge the spools into the CSVs."""
        self._closing.set()
        helds = [s.held for s in self.samplers.values() if s.held is not None]
        for held in helds:
            held.released.set()
        deadline = time.monotonic() + STOP_S
        enders = []
        for sampler in [s for s in self.samplers.values() if s.held is not None]:
            if not sampler.held.ended.wait(max(0.0, deadline - time.monotonic())):
                sampler.held.abort()
                enders.append(self._end_on_host(sampler))
        for ender in enders:
            ender.join(max(0.0, deadline + STOP_S - time.monotonic()))
        self._stop.set()
        self._judge.join(STOP_S + 2 * LOOK_S)
        for spool in self.spools.values():
            if spool is not None:
                spool.close()
        for host in self.spools:
            try:
                merge(self.run_dir, host)
            except OSError as exc:
                self.observer.warn(host, f"telemetry not written to {csvfile.csv_path(self.run_dir, host)}: {exc}")

    def leave(self, host: str, why: str) -> None:
        """A host the run went on without (an elastic re-form): its sampler ends and is not started
        again; what it sampled until then stays in its CSV."""
        sampler = self.samplers.get(host)
        if sampler is None or sampler.stopped:
            return
        sampler.stopped = why
        held = sampler.held
        if held is not None:
            held.abort()
            self._end_on_host(sampler)

    def _stream(self, host) -> HostStream:
        ids = command.gpu_ids(self.plan.gpus(host))
        known = None if ids in ("", "all") else frozenset(int(i) for i in ids.split(","))
        return HostStream(self.period_s, known, self.clock)

    def _launch(self, sampler: Sampler) -> None:
        host = self.plan.cluster.host(sampler.host)
        if sampler.held is None and sampler.restarts:      # a new process: what the last one left half-said goes
            garbage, first = sampler.stream.garbage, sampler.stream.first_garbage
            sampler.stream = self._stream(host)
            sampler.stream.garbage, sampler.stream.first_garbage = garbage, first
        sampler.tag = new_tag()
        argv = command.sampler(self.plan.cluster.name, host.name, gpus=command.gpu_ids(self.plan.gpus(host)),
                               nic=self.plan.nic(host) or "", peer=peer_of(self.plan, host), period_s=self.period_s,
                               tag=sampler.tag)

        sampler.last_heard, sampler.restart_at = self.clock(), None
        sampler.held = Held(self.group.conn(host), argv, HEARTBEAT_S, lambda chunk: self._heard(sampler, chunk)).start()

    def _heard(self, sampler: Sampler, chunk: bytes) -> None:
        """A sampler's output, on its Held's thread (a Flood ends it): its samples queued for the judge."""
        sampler.last_heard = self.clock()
        for sample in sampler.stream.feed(chunk):
            try:
                self.queue.put_nowait((sampler.host, sample))
            except queue.Full:
                with self._drops_lock:
                    self.dropped[sampler.host] = self.dropped.get(sampler.host, 0) + 1

    # --- the judge -----------------------------------------------------------------------------
    def _judge_loop(self) -> None:
        last_flush = self.clock()
        while True:
            stopping = self._stop.wait(LOOK_S)
            try:
                self._take()
                if stopping:
                    return
                self._tend()
                self._show()
                self._warn()
                if self.clock() - last_flush >= FLUSH_S:
                    for host, spool in self.spools.items():
                        self._write(host, lambda s=spool: s.flush())
                    last_flush = self.clock()
            except Exception as exc:   # telemetry is a courtesy: it must never end the wait it watches
                self._say_once(None, f"telemetry: {summary(exc)}")

    def _take(self) -> None:
        with self._drops_lock:
            behind = sorted(self.dropped)
        for host in behind:
            self._say_once(host, "telemetry: samples dropped: this machine fell behind taking them (the host's CSV "
                                 "has a gap)")
        while True:
            try:
                host, sample = self.queue.get_nowait()
            except queue.Empty:
                return
            training, trial, epoch = self.observer.doing(host, self.run_program)
            sample = replace(sample, training=training, trial=trial, epoch=epoch)
            self._write(host, lambda s=sample: self._spool(host).add(s))
            window = self.windows.setdefault(host, deque())
            window.append(sample)
            while window and window[0].time < sample.time - self.keep_s:
                window.popleft()
            self.latest[host] = (self.clock(), sample)
            self.counts[host] = self.counts.get(host, 0) + 1

    def _spool(self, host: str) -> Spool:
        if host not in self.spools:
            self.spools[host] = None            # until it is made: a folder that cannot be written is said once
            self.spools[host] = Spool(self.run_dir, host, self.name)
        return self.spools[host]

    def _write(self, host: str, write) -> None:
        """A spool write; one that fails (an unwritable folder, a full disk) stops that host's
        recording, said once: the live view and the warnings go on."""
        if host in self.spools and self.spools[host] is None:
            return
        try:
            write()
        except OSError as exc:
            spool = self.spools.get(host)
            if spool is not None:
                spool.close()
            self.spools[host] = None
            self._say_once(host, f"telemetry not recorded from here on: cannot write {exc.filename or self.run_dir}: "
                                 f"{exc.strerror or exc}")

    def _say_once(self, host, message: str) -> None:
        if (host, message) not in self._said:
            self._said.add((host, message))
            self.observer.warn(host, message)

    def _tend(self) -> None:
        """Notes to pass on; samplers that ended, flooded or fell silent: started again, or not."""
        now = self.clock()
        for sampler in self.samplers.values():
            sampler.pass_notes(self.observer.warn)
            if self._closing.is_set():
                continue
            held = sampler.held
            if sampler.stopped:
                continue
            if held is None:
                if sampler.restart_at is not None and now >= sampler.restart_at:
                    self._launch(sampler)
                continue
            if not held.ended.is_set() and now - sampler.last_heard > self.silent_after():
                held.abort()
                self._end_on_host(sampler)
                sampler.ended(f"it said nothing for {now - sampler.last_heard:.0f} s", self.clock, self.observer.warn)
            elif held.ended.is_set():
                sampler.ended(why_ended(held), self.clock, self.observer.warn)

    def _end_on_host(self, sampler: Sampler) -> threading.Thread:
        """End, on the host, what the command left there (best effort, bounded, on a thread of its own:
        the judge and `stop` never wait on a host that may not answer)."""
        conn = self.group.conn(self.plan.cluster.host(sampler.host))
        ender = threading.Thread(target=conn.end_command, args=(sampler.tag,), name="tfcompose-telemetry-end",
                                 daemon=True)
        ender.start()
        return ender

    def silent_after(self) -> float:
        return max(30.0, 10 * self.period_s)

    def _show(self) -> None:
        now = self.clock()
        for host in self.windows:
            sampler = self.samplers.get(host) or Sampler(host, HostStream(), last_heard=now)
            heard, sample = self.latest.get(host, (None, None))
            quiet = now - heard if heard is not None else None
            silent = quiet if quiet is not None and quiet > max(5.0, 3 * self.period_s) else None
            if sampler.stopped:
                line = "telemetry stopped"
            elif sample is None or self.counts.get(host, 0) < 2:
                if now - sampler.last_heard < 10:
                    continue                    # starting: nothing to show yet (rates need two samples)
                line = live.host_line(sample, now - sampler.last_heard)
            else:
                line = live.host_line(sample, silent)
            self.observer.telemetry(host, line)

    def _warn(self) -> None:
        fresh = {h: w for h, w in self.windows.items()
                 if h in self.latest and self.clock() - self.latest[h][0] <= rules.MAX_GAP_S}
        newest = max((w[-1].time for w in fresh.values() if w), default=None)
        if newest is None:
            return
        for finding in self.episodes.update(rules.judge(fresh, self.sync, self.span_s), newest):
            self.observer.warn(finding.host, finding.message)


def peer_of(plan: Plan, host) -> str:
    """The host this one talks to first: its route names the NIC the cluster's traffic uses."""
    others = [h for h in plan.cluster.hosts if h.name != host.name]
    return others[0].address if others else ""


def span_of(plan: Plan) -> float:
    """How long a condition lasts before the rules warn of it (telemetry.warn_after_s)."""
    settings = getattr(plan.cluster.spec, "telemetry", None)
    return settings.warn_after_s if settings is not None else rules.SPAN_S


def period_of(plan: Plan) -> Optional[float]:
    """The inventory's sampling period, or None when telemetry is off."""
    settings = getattr(plan.cluster.spec, "telemetry", None)
    if settings is None:
        return command.DEFAULT_PERIOD_S
    return settings.period_s if settings.enabled else None


@contextlib.contextmanager
def sampling(group, plan: Plan, run_dir: Path) -> Iterator[Optional[Session]]:
    """Telemetry of every host while the block runs (the wait loop): the group's reporter is the
    session's Observer meanwhile. Nothing when the inventory turns telemetry off."""
    period = period_of(plan)
    if period is None:
        yield None
        return
    session = Session(group, plan, run_dir, period, span_s=span_of(plan))
    group.reporter = session.observer
    try:
        session.start()
        yield session
    finally:
        group.reporter = session.observer.inner
        try:
            session.stop()
        except Exception as exc:   # a failure here must not hide how the run went
            group.reporter.warn(None, f"telemetry: {summary(exc)}")
