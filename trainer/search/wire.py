"""What crosses the network in a parallel search, in one place: the calls a host makes to the
chief's trial queue and the chief's answers as typed messages (JSON becomes a message here and
nowhere else), and the proof that a call comes from the host it names.

The proof: each run has a secret that only the launcher's files carry (`queue.key` in the run's
folder on each host, never in a rendered file or a log). The chief holds the run's key; every
other host holds only its own key, derived from it (`host_key`), so a host can speak for itself
and for no other. A call is signed with the caller's key over its verb, host, time, a fresh
nonce and its body; the chief refuses a call it cannot verify, one more than REPLAY_WINDOW_S old
or new, and a nonce it has seen; its answer is signed over the call's nonce, so a host takes no
answer the chief did not give to that very call.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Union

from trainer.spec.keys import host_key, run_key  # noqa: F401  (the keys' owner; the calls are signed here)
from trainer.spec.trials import Trial

VERBS = ("next", "report", "beat", "finish", "fail")
REPLAY_WINDOW_S = 300.0          # a call's clock may be this far from the chief's (preflight warns past 1 s)
MAX_WHY = 300


# --- the calls ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ask:
    """`next`: the host is free; what it says of itself (its replicas, its restarts)."""
    replicas: int = 1
    restarts: int = 0


@dataclass(frozen=True)
class Report:
    number: int
    epoch: int
    val_accuracy: float
    val_loss: float = math.nan


@dataclass(frozen=True)
class Beat:
    number: int


@dataclass(frozen=True)
class Finish:
    number: int
    figures: dict                  # checked by results_check.host_figures on the chief


@dataclass(frozen=True)
class Fail:
    number: int
    why: str
    build: bool = False            # its builder refused the values: it would fail on any host


Call = Union[Ask, Report, Beat, Finish, Fail]


# --- the answers ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Offer:
    trial: Trial


@dataclass(frozen=True)
class Wait:
    seconds: float


@dataclass(frozen=True)
class Done:
    why: str = ""


@dataclass(frozen=True)
class Verdict:
    prune: bool = False
    lost: bool = False             # the trial went to another host meanwhile: drop it


Answer = Union[Offer, Wait, Done, Verdict]


class WireError(ValueError):
    """A call or an answer that is not what the wire carries (the chief answers it with 400)."""


def encode_call(call: Call) -> tuple[str, dict]:
    verb = {Ask: "next", Report: "report", Beat: "beat", Finish: "finish", Fail: "fail"}[type(call)]
    return verb, asdict(call)


def decode_call(verb: str, body) -> Call:
    """A call as a host sent it, checked field by field (a WireError names the first wrong one)."""
    if verb not in VERBS:
        raise WireError(f"unknown call {printable(verb)[:40]!r}")
    if not isinstance(body, dict):
        raise WireError("Expected a JSON object")
    if verb == "next":
        return Ask(_int(body, "replicas", 1, 1_000_000, default=1), _int(body, "restarts", 0, 1_000_000, default=0))
    number = _int(body, "number", 0, 10**9)
    if verb == "report":
        return Report(number, _int(body, "epoch", 1, 100_000), _figure(body, "val_accuracy", 0.0, 1.0),
                      _figure(body, "val_loss", 0.0, 1e12, optional=True))
    if verb == "beat":
        return Beat(number)
    if verb == "finish":
        if not isinstance(body.get("figures"), dict):
            raise WireError("figures: Expected a trial's figures")
        return Finish(number, body["figures"])
    why = body.get("why", "")
    if not isinstance(why, str) or not isinstance(body.get("build", False), bool):
        raise WireError("why: Expected text; build: true or false")
    return Fail(number, printable(why)[:MAX_WHY], body.get("build", False))


def encode_answer(answer: Answer) -> dict:
    if isinstance(answer, Offer):
        return {"trial": asdict(answer.trial)}
    if isinstance(answer, Wait):
        return {"wait": answer.seconds}
    if isinstance(answer, Done):
        return {"done": True, "why": answer.why}
    return {"prune": answer.prune, "lost": answer.lost}


def decode_answer(verb: str, doc) -> Answer:
    """The chief's answer (already proven to be the chief's), as a message."""
    if not isinstance(doc, dict):
        raise WireError("Expected a JSON object")
    if verb == "next":
        if doc.get("done") is True:
            return Done(printable(str(doc.get("why", "")))[:MAX_WHY])
        if isinstance(doc.get("trial"), dict):
            return Offer(trial_from(doc["trial"]))
        seconds = doc.get("wait")
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 < seconds <= 60:
            return Wait(float(seconds))
        raise WireError("Expected a trial, a wait or done")
    return Verdict(doc.get("prune") is True, doc.get("lost") is True)


def trial_from(doc: dict) -> Trial:
    try:
        trial = Trial(**doc)
    except TypeError as exc:
        raise WireError(f"trial: {exc}") from None
    if not isinstance(trial.name, str) or not isinstance(trial.number, int):
        raise WireError("trial: Expected a name and a number")
    return trial


def _int(body: dict, key: str, low: int, high: int, default: Optional[int] = None) -> int:
    value = body.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise WireError(f"{key}: Received {printable(repr(value))[:40]}. Expected a whole number {low}–{high}.")
    return value


def _figure(body: dict, key: str, low: float, high: float, optional: bool = False) -> float:
    """A figure a trainer could have written: in [low, high], or NaN (no figure that epoch)."""
    value = body.get(key, math.nan if optional else None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (math.isnan(value) or low <= value <= high):
        raise WireError(f"{key}: Received {printable(repr(value))[:40]}. Expected a number {low:g}–{high:g} (or NaN).")
    return float(value)


def printable(text: str) -> str:
    return "".join(c for c in text if c.isprintable())


# --- the proof ---------------------------------------------------------------------------------------
KEY_BYTES = 32


def read_key(path: Path) -> bytes:
    """A key file as the launcher writes it: 64 hex digits."""
    text = Path(path).read_text(encoding="ascii", errors="replace").strip()
    if len(text) != 2 * KEY_BYTES or any(c not in "0123456789abcdef" for c in text):
        raise WireError(f"{path}: Expected the {2 * KEY_BYTES} hex digits tfcompose writes")
    return bytes.fromhex(text)


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


@dataclass(frozen=True)
class Stamp:
    """What goes with a call besides its body: who, when, a nonce, and the proof."""
    host: str
    time: int
    nonce: str
    mac: str = ""

    HEADERS = ("X-Tfc-Host", "X-Tfc-Time", "X-Tfc-Nonce", "X-Tfc-Mac")

    def headers(self) -> dict[str, str]:
        return dict(zip(self.HEADERS, (self.host, str(self.time), self.nonce, self.mac)))

    @classmethod
    def from_headers(cls, headers) -> "Stamp":
        host, when, nonce, mac = (str(headers.get(h, "")) for h in cls.HEADERS)
        if not when.isdigit() or len(nonce) != 32 or len(mac) != 64 or not 0 < len(host) <= 64:
            raise WireError("Expected a signed call (tfcompose's own hosts sign every call)")
        return cls(host, int(when), nonce, mac)


def _mac(key: bytes, *parts: str, body: bytes) -> str:
    return hmac.new(key, "\n".join(parts).encode() + b"\n" + body, hashlib.sha256).hexdigest()


def sign_call(key: bytes, verb: str, host: str, body: bytes) -> Stamp:
    stamp = Stamp(host, int(time.time()), secrets.token_hex(16))
    return Stamp(host, stamp.time, stamp.nonce, _mac(key, verb, host, str(stamp.time), stamp.nonce, body=body))


def sign_answer(key: bytes, stamp: Stamp, status: int, body: bytes) -> str:
    return _mac(key, "answer", stamp.nonce, str(status), body=body)


def answer_is_genuine(key: bytes, stamp: Stamp, status: int, body: bytes, mac: str) -> bool:
    return hmac.compare_digest(sign_answer(key, stamp, status, body), mac or "")


@dataclass
class Gate:
    """The chief's check of every call: the host is one of the cluster's, the call comes from that
    host's address, carries its key's proof, is fresh, and was never seen before."""

    run_key: bytes
    hosts: Optional[dict[str, frozenset]] = None       # name → its addresses (an empty set: any address)
    seen: dict = field(default_factory=dict)            # nonce → when (pruned past the window)

    def key_for(self, host: str) -> bytes:
        return host_key(self.run_key, host)

    def check(self, verb: str, stamp: Stamp, body: bytes, address: str) -> None:
        """Raises Refused (with the reason) unless the call is the named host's own, fresh one."""
        if self.hosts is not None and stamp.host not in self.hosts:
            raise Refused(f"Received host {printable(repr(stamp.host))[:80]}. Expected one of the cluster's hosts.")
        allowed = self.hosts.get(stamp.host) if self.hosts is not None else None
        if allowed and plain_address(address) not in allowed:
            raise Refused(f"a call naming {stamp.host} came from {printable(address)[:60]}, not from {stamp.host}")
        if not hmac.compare_digest(_mac(self.key_for(stamp.host), verb, stamp.host, str(stamp.time), stamp.nonce,
                                        body=body), stamp.mac):
            raise Refused(f"a call naming {stamp.host} did not carry {stamp.host}'s proof (queue.key)")
        now = time.time()
        if abs(now - stamp.time) > REPLAY_WINDOW_S:
            raise Refused(f"{stamp.host}'s call is {now - stamp.time:+.0f} s off the chief's clock "
                          f"(at most {REPLAY_WINDOW_S:g} s; run NTP on the hosts)")
        if stamp.nonce in self.seen:
            raise Refused(f"{stamp.host}'s call was replayed")
        self.seen = {n: t for n, t in self.seen.items() if now - t <= 2 * REPLAY_WINDOW_S}
        self.seen[stamp.nonce] = now

    def knows(self, address: str) -> bool:
        """Whether a caller at `address` may be one of the cluster's hosts at all."""
        if self.hosts is None or any(not addresses for addresses in self.hosts.values()):
            return True
        return plain_address(address) in frozenset().union(*self.hosts.values())


class Refused(WireError):
    """A call that is not the named host's own (the chief answers it with 403)."""


def plain_address(address: str) -> str:
    """`::ffff:10.0.0.2` (an IPv4 caller on a dual-stack socket) as `10.0.0.2`."""
    return address[7:] if address.startswith("::ffff:") else address


def resolve(addresses: dict[str, str], log=lambda line: None) -> dict[str, frozenset]:
    """Each host's addresses as the chief sees them (a name resolved once); a name that does not
    resolve allows any address for that host (the proof still holds), said in the log."""
    import socket
    out = {}
    for host, address in addresses.items():
        try:
            out[host] = frozenset(plain_address(info[4][0]) for info in socket.getaddrinfo(address.strip("[]"), None))
        except OSError as exc:
            log(f"[queue] {host}'s address {address} does not resolve here ({exc}); its calls are checked by their proof only")
            out[host] = frozenset()
    return out


def dumps(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
