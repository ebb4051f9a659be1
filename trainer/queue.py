"""The trial queue of a parallel search: the chief serves the study, every host (the chief too)
pulls its next trial when it is free, reports each epoch and is told when its trial is pruned.

A host that stops answering (no report or heartbeat for `search.lost_after_s`) has its trial
failed and the same values queued for another host; a host that comes back gets its own trial
back if that had not happened yet (it resumes from its backup), else new ones. No host idles
while a trial waits.

The wire is JSON over HTTP on `search.port` of the chief (the standard library's server and
client, one request at a time, so the study sees one caller at a time; every call has a
timeout, and a host that cannot reach the chief retries for `lost_after_s` before giving up).
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
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Callable

from trainer import results
from trainer.errors import ClusterError
from trainer.study import Study
from trainer.trials import Trial

MAX_BODY = 1 << 20
CALL_TIMEOUT_S = 10.0
WAIT_S = 2.0                 # what an idle host is told to wait before it asks again


class Coordinator:
    """The study as the hosts see it: next / report / beat / finish; lost hosts' trials retried."""

    def __init__(self, study: Study, lost_after_s: float, log: Callable[[str], None] = print):
        self.study, self.lost_after_s, self.log = study, lost_after_s, log
        self.seen: dict[int, float] = {}          # trial number → when its host last spoke
        self.lost: dict[str, list[str]] = {}      # host → trials it lost (their retries' names)
        self.told_done: set[str] = set()
        self.hosts: set[str] = set()
        self.lock = threading.RLock()

    def call(self, what: str, body: dict) -> dict:
        with self.lock:
            host = str(body.get("host", ""))[:64]
            self.hosts.add(host)
            if what == "next":
                return self.next(host)
            number = int(body["number"])
            if self._lost(number, host):        # handed to another host meanwhile: drop it
                return {"lost": True, "prune": False}
            self.seen[number] = time.monotonic()
            if what == "report":
                return {"prune": self.study.report(number, int(body["epoch"]), float(body["val_accuracy"]),
                                                    float(body.get("val_loss", math.nan))),
                        "lost": False}
            if what == "beat":
                return {"lost": False}
            if what == "finish":
                record = {**body["record"], "host": host}
                results.check_record(record, f"{host}'s trial {number}")     # what results.json will hold
                self.study.finish(number, record)
                self.seen.pop(number, None)
                return {}
            raise ValueError(f"unknown call {what!r}")

    def next(self, host: str) -> dict:
        trial = self.study.resume_or_next(host)
        if trial is not None:
            self.seen[trial.number] = time.monotonic()
            return {"trial": asdict(trial)}
        if self.study.done():
            self.told_done.add(host)
            return {"done": True}
        return {"wait": WAIT_S}

    def _lost(self, number: int, host: str) -> bool:
        """Whether `host`'s trial was handed to another host meanwhile (it must drop it)."""
        return self.study.running_hosts().get(number) != host

    def watch(self, stop: threading.Event) -> None:
        """Hand the trials of hosts silent for lost_after_s to the others, until `stop`."""
        while not stop.wait(1.0):
            with self.lock:
                now = time.monotonic()
                for number, host in self.study.running_hosts().items():
                    since = self.seen.setdefault(number, now)
                    if now - since > self.lost_after_s:
                        retry = self.study.lose(number, f"{host} stopped answering for {self.lost_after_s:g} s")
                        self.seen.pop(number, None)
                        if retry:
                            self.lost.setdefault(host, []).append(retry)
                            self.log(f"[queue] {host} stopped answering: its trial {number} goes to another host as {retry}")


class _Handler(BaseHTTPRequestHandler):
    coordinator: Coordinator = None     # set on the subclass the server uses

    def do_POST(self):                  # noqa: N802 (the standard library's name)
        try:
            size = int(self.headers.get("Content-Length", "0"))
            if not 0 < size <= MAX_BODY:
                raise ValueError("body size")
            answer = self.coordinator.call(self.path.strip("/"), json.loads(self.rfile.read(size)))
            self._send(200, answer)
        except (ValueError, KeyError, TypeError, results.ResultsError) as exc:
            self._send(400, {"error": str(exc)[:200]})
        except Exception as exc:  # noqa: BLE001  (the queue must answer; the chief's log says what broke)
            self.coordinator.log(f"[queue] {self.path}: {type(exc).__name__}: {exc}")
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


def serve(coordinator: Coordinator, port: int) -> tuple[HTTPServer, threading.Event]:
    """The queue on every address of this host at `port`, and its watchdog; stop with `stop()`."""
    handler = type("Handler", (_Handler,), {"coordinator": coordinator})
    server = HTTPServer(("0.0.0.0", port), handler)
    server.timeout = CALL_TIMEOUT_S
    stop = threading.Event()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
                     name="tfcompose-queue").start()
    threading.Thread(target=coordinator.watch, args=(stop,), daemon=True, name="tfcompose-queue-watch").start()
    return server, stop


def stop(server: HTTPServer, stopped: threading.Event) -> None:
    stopped.set()
    server.shutdown()
    server.server_close()


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
                with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as answer:
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
            waiting = coordinator.hosts - coordinator.told_done - set(coordinator.lost)
        if not waiting:
            return
        time.sleep(0.5)
