"""The trial queue as a host calls it (was in queue.py): `Channel`, the typed calls every source of
trials makes (ask, report, beat, finish, fail), over HTTP to the chief (`Client`, each call signed
with the host's key and each answer checked for the chief's, retried while the chief cannot be
reached) or straight to the chief's own Coordinator (`Local`); and `Beating`, a trial's heartbeat."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

from trainer.search.coordinator import Coordinator
from trainer.search.queue import CALL_TIMEOUT_S, MAX_BODY
from trainer.search.wire import (Ask, Beat, Fail, Finish, Report, Stamp, Verdict, WireError, answer_is_genuine,
                                 decode_answer, decode_call, dumps, encode_answer, encode_call, printable, sign_call)
from trainer.spec import results
from trainer.spec.errors import ClusterError

# The chief is on the cluster's LAN: never through an http_proxy the container may have been given.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Channel:
    """A host's calls, typed: `ask`, `report`, `beat`, `finish`, `fail` (the Client over HTTP, Local
    straight to the chief's own Coordinator)."""

    def ask(self, replicas: int, restarts: int):
        return self.call(Ask(replicas, restarts))

    def report(self, number: int, epoch: int, val_accuracy: float, val_loss: float) -> Verdict:
        return self.call(Report(number, epoch, val_accuracy, val_loss))

    def beat(self, number: int) -> Verdict:
        return self.call(Beat(number))

    def finish(self, number: int, figures: dict) -> Verdict:
        return self.call(Finish(number, figures))

    def fail(self, number: int, why: str, build: bool) -> Verdict:
        return self.call(Fail(number, why, build))

    def call(self, message):
        raise NotImplementedError


class Client(Channel):
    """A host's side over HTTP, each call signed with its key; retries while the chief cannot be
    reached (its container restarting) for up to `patience_s` — or, before the chief has answered
    once, `first_patience_s` (the chief may still be importing TensorFlow: the join timeout's while)."""

    def __init__(self, address: str, host: str, key: bytes, patience_s: float, first_patience_s: float = 0.0):
        self.url, self.host, self.key, self.patience_s = f"http://{address}", host, key, patience_s
        self.first_patience_s, self.answered = max(first_patience_s, patience_s), False

    def call(self, message):
        verb, doc = encode_call(message)
        data = dumps(doc)
        patience = self.patience_s if self.answered else self.first_patience_s
        deadline = time.monotonic() + patience
        while True:
            stamp = sign_call(self.key, verb, self.host, data)
            try:
                answer = decode_answer(verb, self._post(verb, data, stamp))
                self.answered = True
                return answer
            except urllib.error.HTTPError as exc:       # the chief answered, and refused: no retry helps
                raise ClusterError(f"the chief's trial queue refused `{verb}`: {refusal(exc)}") from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise ClusterError(f"the chief's trial queue at {self.url} did not answer for "
                                       f"{patience:g} s ({exc}); giving up") from None
                time.sleep(1.0)

    def _post(self, verb: str, data: bytes, stamp: Stamp):
        request = urllib.request.Request(f"{self.url}/{verb}", data=data, method="POST",
                                         headers={"Content-Type": "application/json", **stamp.headers()})
        with DIRECT.open(request, timeout=CALL_TIMEOUT_S) as answer:
            body = answer.read(MAX_BODY)
            if not answer_is_genuine(self.key, stamp, answer.status, body, answer.headers.get("X-Tfc-Mac", "")):
                raise WireError("an answer the chief did not sign")
            return json.loads(body)


def refusal(error: urllib.error.HTTPError) -> str:
    """The chief's reason, as its queue wrote it (bounded; printable)."""
    try:
        reason = json.loads(error.read(4096)).get("error", "")
    except (OSError, ValueError, AttributeError):
        reason = ""
    return printable(str(reason)[:200]) or f"HTTP {error.code}"


class Local(Channel):
    """The chief's own loop: the same calls, straight to the Coordinator (through the same JSON, so
    it gets exactly what a host would)."""

    def __init__(self, coordinator: Coordinator, host: str):
        self.coordinator, self.host = coordinator, host

    def call(self, message):
        verb, doc = encode_call(message)
        call = decode_call(verb, json.loads(dumps(doc)))
        try:
            answer = self.coordinator.handle(self.host, call)
        except results.ResultsError as exc:
            raise ClusterError(f"the chief's trial queue refused `{verb}`: {exc}") from None
        return decode_answer(verb, json.loads(dumps(encode_answer(answer))))


class Beating:
    """While a trial trains, a heartbeat every few seconds (an epoch may take far longer than
    lost_after_s); `lost` is set once the chief has handed the trial to another host."""

    def __init__(self, channel: Channel, number: int, every_s: float):
        self.channel, self.number, self.every_s = channel, number, every_s
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
                if self.channel.beat(self.number).lost:
                    self.lost.set()
            except ClusterError:
                return
