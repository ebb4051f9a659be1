"""The trial queue of a parallel search: the chief serves the study, every host (the chief too)
pulls its next trial when it is free, reports each epoch and is told when its trial is pruned.

A host that stops answering (no report or heartbeat for `search.lost_after_s`) has its trial
failed and the same values queued for another host; a host that comes back gets its own trial
back if that had not happened yet (it resumes from its backup), else new ones. No host idles
while a trial waits.

The wire is JSON over HTTP on `search.port` of the chief (the standard library's server, a thread
per caller with a timeout, the study behind one lock; its client, never through a proxy). A host
that cannot reach the chief retries for twice lost_after_s before giving up; a host the chief
refuses (not one of the cluster's, or a record results.json could not hold) stops at once.
Like TensorFlow's port, it is meant for the cluster's hosts only (README: Security).
"""
from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Callable, Iterable, Optional

from trainer import results
from trainer.errors import ClusterError
from trainer.study import Study
from trainer.trials import Trial

MAX_BODY = 1 << 20
CALL_TIMEOUT_S = 10.0
WAIT_S = 2.0                 # what an idle host is told to wait before it asks again
MAX_CALLERS = 64             # connections served at once; more are closed at once
STALL_FACTOR = 4             # a trial silent about epochs for this × the slowest epoch seen is wedged
VERBS = ("next", "report", "beat", "finish", "fail")


class Coordinator:
    """The study as the hosts see it: next / report / beat / finish / fail; lost hosts' trials
    retried. Only the cluster's hosts (`hosts`, the launcher's list) are answered; what a host
    says about its trial is checked (results.host_figures) and the rest of the trial's record is
    the chief's own knowledge."""

    def __init__(self, study: Study, lost_after_s: float, log: Callable[[str], None] = print,
                 hosts: Optional[Iterable[str]] = None, classes: int = 0):
        self.study, self.lost_after_s, self.log, self.classes = study, lost_after_s, log, classes
        self.known = set(hosts) if hosts else None    # None: the chief alone, without a launcher
        self.seen: dict[int, float] = {}          # trial number → when its host last spoke
        self.progressed: dict[int, float] = {}    # trial number → when it was handed out or last reported an epoch
        self.slowest = 0.0                        # the longest wait for an epoch seen so far (s)
        self.lost: dict[str, list[str]] = {}      # host → trials it lost (their retries' names)
        self.told_done: set[str] = set()
        self.hosts: dict[str, dict] = {}          # host → what it announced (replicas, restarts)
        self.trained: dict[str, list[str]] = {}   # host → the trials it finished
        self.lock = threading.RLock()

    def call(self, what: str, body: dict) -> dict:
        with self.lock:
            if what not in VERBS:
                raise ValueError(f"unknown call {what[:40]!r}")
            host = self._host(body.get("host"))
            if what == "next":
                self.hosts[host] = announced(body)
                return self.next(host)
            number = int(body["number"])
            if self._lost(number, host):        # handed to another host meanwhile: drop it
                return {"lost": True, "prune": False}
            self.seen[number] = time.monotonic()
            if what == "report":
                return {"prune": self.report(number, int(body["epoch"]), float(body["val_accuracy"]),
                                             float(body.get("val_loss", math.nan))), "lost": False}
            if what == "finish":
                self.finish(number, host, body.get("record"))
            elif what == "fail":
                self.study.fail(number, f"on {host}: " + printable(str(body.get("why", "")))[:300])
            return {"lost": False}

    def _host(self, host) -> str:
        if not isinstance(host, str) or not 0 < len(host) <= 64 or not host.isprintable() \
                or (self.known is not None and host not in self.known):
            raise ValueError(f"Received host {printable(repr(host))[:80]}. Expected one of the cluster's hosts.")
        return host

    def next(self, host: str) -> dict:
        trial = self.study.resume_or_next(host)
        if trial is not None:
            self.seen[trial.number] = self.progressed[trial.number] = time.monotonic()
            return {"trial": asdict(trial)}
        if self.study.done():
            self.told_done.add(host)
            return {"done": True}
        return {"wait": WAIT_S}

    def report(self, number: int, epoch: int, val_accuracy: float, val_loss: float) -> bool:
        now = time.monotonic()
        self.slowest = max(self.slowest, now - self.progressed.get(number, now))
        self.progressed[number] = now
        return self.study.report(number, epoch, val_accuracy, val_loss)

    def finish(self, number: int, host: str, sent) -> None:
        """The trial's record: the chief's own knowledge, and the host's figures, checked."""
        trial = self.study.trial(number)
        figures = results.host_figures(sent, self.classes, f"{host}'s trial {number}")
        record = {"candidate": trial.name, "architecture": trial.candidate, "learning_rate": trial.learning_rate,
                  "batch_per_replica": trial.batch_per_replica, **figures, "trial": number, "host": host,
                  "hyperparameters": {"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica,
                                      **trial.hyperparameters},
                  "history": f"history/{results.safe_name(trial.name)}.csv"}
        results.check_record(record, f"{host}'s trial {number}")      # what results.json will hold
        self.study.finish(number, record)
        self.trained.setdefault(host, []).append(trial.name)
        self.seen.pop(number, None)

    def _lost(self, number: int, host: str) -> bool:
        """Whether `host`'s trial was handed to another host meanwhile (it must drop it)."""
        return self.study.running_hosts().get(number) != host

    def watch(self, stop: threading.Event) -> None:
        """Hand on the trials of hosts silent for lost_after_s, or whose trial has reported no
        epoch for far longer than any epoch took so far (alive, but wedged), until `stop`."""
        while not stop.wait(1.0):
            with self.lock:
                now = time.monotonic()
                for number, host in self.study.running_hosts().items():
                    why = self._why_lost(number, host, now)
                    if why:
                        self._hand_on(number, host, why)

    def _why_lost(self, number: int, host: str, now: float) -> str:
        silent = now - self.seen.setdefault(number, now)
        if silent > self.lost_after_s:
            return f"{host} stopped answering for {self.lost_after_s:g} s"
        stalled, limit = now - self.progressed.setdefault(number, now), max(self.lost_after_s, STALL_FACTOR * self.slowest)
        if self.slowest and stalled > limit:
            return f"{host} reported no epoch for {stalled:.0f} s (the slowest epoch so far took {self.slowest:.1f} s)"
        return ""

    def _hand_on(self, number: int, host: str, why: str) -> None:
        retry = self.study.lose(number, why)
        self.seen.pop(number, None)
        self.progressed.pop(number, None)
        if retry:
            self.lost.setdefault(host, []).append(retry)
            self.log(f"[queue] {why}: its trial {number} goes to another host as {retry}")
        elif retry == "":
            self.log(f"[queue] {why}: its trial {number} failed for good (lost too often)")


def announced(body: dict) -> dict:
    """What a host says of itself when it asks for a trial: its replicas and restarts (bounded)."""
    out = {}
    for key, low in (("replicas", 1), ("restarts", 0)):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= 1_000_000:
            out[key] = value
    return out


def printable(text: str) -> str:
    return "".join(c for c in text if c.isprintable())


class _Handler(BaseHTTPRequestHandler):
    coordinator: Coordinator = None     # set on the subclass the server uses
    timeout = CALL_TIMEOUT_S            # a caller that stops sending mid-request is dropped, not waited for

    def do_POST(self):                  # noqa: N802 (the standard library's name)
        try:
            size = int(self.headers.get("Content-Length", "0"))
            if not 0 < size <= MAX_BODY:
                raise ValueError("body size")
            body = json.loads(self.rfile.read(size))
            if not isinstance(body, dict):
                raise ValueError("Expected a JSON object")
            self._send(200, self.coordinator.call(self.path.strip("/"), body))
        except (ValueError, KeyError, TypeError, results.ResultsError) as exc:
            self._send(400, {"error": str(exc)[:300]})
        except Exception as exc:  # noqa: BLE001  (the queue must answer; the chief's log says what broke)
            self.coordinator.log(f"[queue] {printable(self.path)[:80]}: {type(exc).__name__}: {exc}")
            self._send(500, {"error": f"{type(exc).__name__}"})

    def _send(self, status: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):       # a line per request would drown the training log
        pass


class _Server(ThreadingHTTPServer):
    """A thread per caller (one caller that stalls holds only its own thread, for CALL_TIMEOUT_S),
    at most MAX_CALLERS at once; the Coordinator's lock lets the study see one call at a time."""
    daemon_threads = True

    def __init__(self, address, handler):
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CALLERS)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def serve(coordinator: Coordinator, port: int) -> tuple[HTTPServer, threading.Event]:
    """The queue on every address of this host at `port`, and its watchdog; stop with `stop()`."""
    handler = type("Handler", (_Handler,), {"coordinator": coordinator})
    server = _Server(("0.0.0.0", port), handler)
    stop = threading.Event()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
                     name="tfcompose-queue").start()
    threading.Thread(target=coordinator.watch, args=(stop,), daemon=True, name="tfcompose-queue-watch").start()
    return server, stop


def stop(server: HTTPServer, stopped: threading.Event) -> None:
    stopped.set()
    server.shutdown()
    server.server_close()


# The chief is on the cluster's LAN: never through an http_proxy the container may have been given.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Client:
    """A host's side: calls the chief's queue, retrying while it cannot be reached (its container
    restarting) for up to `patience_s`; the chief's own loop calls the Coordinator directly."""

    def __init__(self, address: str, host: str, patience_s: float):
        self.url, self.host, self.patience_s = f"http://{address}", host, patience_s

    def call(self, what: str, body: dict) -> dict:
        data = json.dumps({**body, "host": self.host}).encode()
        deadline = time.monotonic() + self.patience_s
        while True:
            try:
                request = urllib.request.Request(f"{self.url}/{what}", data=data, method="POST",
                                                 headers={"Content-Type": "application/json"})
                with DIRECT.open(request, timeout=CALL_TIMEOUT_S) as answer:
                    return json.loads(answer.read(MAX_BODY))
            except urllib.error.HTTPError as exc:       # the chief answered, and refused: no retry helps
                raise ClusterError(f"the chief's trial queue refused `{what}`: {refusal(exc)}") from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise ClusterError(f"the chief's trial queue at {self.url} did not answer for "
                                       f"{self.patience_s:g} s ({exc}); giving up") from None
                time.sleep(1.0)


def refusal(error: urllib.error.HTTPError) -> str:
    """The chief's reason, as its queue wrote it (bounded; printable)."""
    try:
        reason = json.loads(error.read(4096)).get("error", "")
    except (OSError, ValueError, AttributeError):
        reason = ""
    return "".join(c for c in str(reason)[:200] if c.isprintable()) or f"HTTP {error.code}"


class Local:
    """The chief's own loop: the same calls, straight to the Coordinator."""

    def __init__(self, coordinator: Coordinator, host: str):
        self.coordinator, self.host = coordinator, host

    def call(self, what: str, body: dict) -> dict:
        return json.loads(json.dumps(self.coordinator.call(what, {**body, "host": self.host})))


def trial_from(doc: dict) -> Trial:
    return Trial(**doc)


class Beating:
    """While a trial trains, a heartbeat every few seconds (an epoch may take far longer than
    lost_after_s); `lost` is set once the chief has handed the trial to another host."""

    def __init__(self, queue, number: int, every_s: float):
        self.queue, self.number, self.every_s = queue, number, every_s
        self.stop, self.lost = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="tfcompose-heartbeat")

    def __enter__(self) -> "Beating":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=CALL_TIMEOUT_S + 1)

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            try:
                if self.queue.call("beat", {"number": self.number}).get("lost"):
                    self.lost.set()
            except ClusterError:
                return


def wait_for_done(coordinator: Coordinator, grace_s: float) -> None:
    """The chief, its own loop over: the server stays up until every host it has heard from was
    told the search is done, or is lost, or `grace_s` passed."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with coordinator.lock:
            waiting = set(coordinator.hosts) - coordinator.told_done - set(coordinator.lost)
        if not waiting:
            return
        time.sleep(0.5)
