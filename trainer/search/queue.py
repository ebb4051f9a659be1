"""The trial queue's transport: HTTP on `search.port` of the chief, between the hosts' `Client`s and
the chief's Coordinator (coordinator.py, the policy). Messages and their proof are wire.py's.

The server (the standard library's, a thread per caller) is meant for the cluster's hosts only:
- it listens on the chief's own address (the inventory's), not on every address of the host;
- a caller whose address is none of the cluster's hosts' is closed at once, unread;
- a call must name a host, come from that host's address and carry that host's proof (wire.Gate);
- a caller gets REQUEST_S to send its whole request (a byte every few seconds does not hold a
  thread), and one address at most PER_ADDRESS callers at once, so a slow or hostile caller
  cannot lock the cluster's hosts out;
- a caller that hangs up before its answer is simply gone (no traceback in the chief's log).
A host that cannot reach the chief retries for twice lost_after_s before giving up; a host the
chief refuses (not one of the cluster's, or a record results.json could not hold) stops at once.
The hosts' side, and the chief's own loop's, is queue_client.py's.
"""
from __future__ import annotations

import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Optional

from trainer.spec import results
from trainer.search.coordinator import WAIT_S, Coordinator
from trainer.search.wire import (Done, Gate, Offer, Refused, Stamp, Wait, WireError, decode_call, dumps, encode_answer,
                                 printable, sign_answer)

MAX_BODY = 1 << 20
MAX_HEAD = 16384
CALL_TIMEOUT_S = 10.0
REQUEST_S = 5.0              # a caller's whole request must arrive within this
MAX_CALLERS = 256            # threads at once, all callers
PER_ADDRESS = 8              # callers at once from one address (hosts sharing one machine: that many each)


class _Handler(BaseHTTPRequestHandler):
    coordinator: Coordinator = None     # set on the subclass the server uses
    gate: Gate = None
    protocol_version = "HTTP/1.0"

    def setup(self):
        super().setup()
        self.rfile = io.BytesIO(read_request(self.connection, time.monotonic() + REQUEST_S))

    def handle(self):
        try:
            super().handle()
        except OSError:                 # the caller hung up, or never finished its request
            pass

    def do_POST(self):                  # noqa: N802 (the standard library's name)
        status, doc, stamp = self._answer(self.path.strip("/"))
        try:
            self._send(status, doc, stamp)
        except OSError:                 # the caller hung up before its answer: it is gone, nothing to say
            pass

    def _answer(self, verb: str) -> tuple[int, dict, Optional[Stamp]]:
        stamp = None
        try:
            size = int(self.headers.get("Content-Length", "0"))
            if not 0 < size <= MAX_BODY:
                raise WireError("body size")
            body = self.rfile.read(size)
            stamp = Stamp.from_headers(self.headers)
            self.gate.check(verb, stamp, body, self.client_address[0])
            call = decode_call(verb, json.loads(body))
            return 200, encode_answer(self.coordinator.handle(stamp.host, call)), stamp
        except Refused as exc:
            self.coordinator.log(f"[queue] refused a call: {exc}")
            return 403, {"error": str(exc)[:300]}, None
        except (ValueError, KeyError, TypeError, results.ResultsError) as exc:
            return 400, {"error": printable(str(exc))[:300]}, stamp
        except Exception as exc:  # noqa: BLE001  (the queue must answer; the chief's log says what broke)
            self.coordinator.log(f"[queue] {printable(self.path)[:80]}: {type(exc).__name__}: {printable(str(exc))[:200]}")
            return 500, {"error": f"{type(exc).__name__}"}, stamp

    def _send(self, status: int, doc: dict, stamp: Optional[Stamp]) -> None:
        data = dumps(doc)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if stamp is not None:      # an answer only the caller's key could have asked for
            self.send_header("X-Tfc-Mac", sign_answer(self.gate.key_for(stamp.host), stamp, status, data))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):       # a line per request would drown the training log
        pass


def read_request(conn: socket.socket, deadline: float) -> bytes:
    """The whole request — head and Content-Length's body — within `deadline`, bounded in size; what
    does not arrive in time ends the call (OSError)."""
    data = b""
    while True:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0 and len(data) >= head_end + 4 + _length(data[:head_end]):
            return data
        if len(data) > MAX_HEAD + MAX_BODY or (head_end < 0 and len(data) > MAX_HEAD):
            raise OSError("request too large")
        left = deadline - time.monotonic()
        if left <= 0:
            raise OSError("request too slow")
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return min(max(int(value.strip()), 0), MAX_BODY + 1)
            except ValueError:
                return 0
    return 0


class _Server(ThreadingHTTPServer):
    """A thread per caller, MAX_CALLERS at once and PER_ADDRESS from one address; a caller that is
    no host of the cluster is closed before anything is read."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128            # callers waiting to be accepted (the standard library's 5 drops them)

    def __init__(self, address, handler, gate: Gate):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)
        self.gate, self.slots = gate, threading.BoundedSemaphore(MAX_CALLERS)
        self.busy: dict[str, int] = {}
        self.busy_lock = threading.Lock()

    def verify_request(self, request, client_address) -> bool:
        return self.gate.knows(client_address[0])

    def process_request(self, request, client_address):
        address = client_address[0]
        with self.busy_lock:
            crowded = self.busy.get(address, 0) >= PER_ADDRESS
            if not crowded:
                self.busy[address] = self.busy.get(address, 0) + 1
        if crowded or not self.slots.acquire(blocking=False):
            if not crowded:
                self._release(address)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()
            self._release(client_address[0])

    def _release(self, address: str) -> None:
        with self.busy_lock:
            self.busy[address] -= 1
            if not self.busy[address]:
                del self.busy[address]

    def handle_error(self, request, client_address):    # a caller's own trouble: no traceback in the log
        pass


def serve(coordinator: Coordinator, gate: Gate, port: int, bind: str = "127.0.0.1") -> tuple[HTTPServer, threading.Event]:
    """The queue on `bind`:`port` (the chief's own address), and the coordinator's watch; stop with
    `stop()`. An address this host does not have (the inventory names it by a NAT's address, say)
    falls back to every address, which the log says: the proof still holds."""
    handler = type("Handler", (_Handler,), {"coordinator": coordinator, "gate": gate})
    try:
        server = _Server((bind.strip("[]"), port), handler, gate)
    except OSError as exc:
        if exc.errno not in (99, 49):       # EADDRNOTAVAIL (Linux, BSD): not one of this host's addresses
            raise
        coordinator.log(f"[queue] {bind} is not an address of this host ({exc.strerror}); listening on every address")
        server = _Server(("0.0.0.0", port), handler, gate)
    stop = threading.Event()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
                     name="tfcompose-queue").start()
    threading.Thread(target=coordinator.watch, args=(stop,), daemon=True, name="tfcompose-queue-watch").start()
    return server, stop


def stop(server: HTTPServer, stopped: threading.Event) -> None:
    stopped.set()
    server.shutdown()
    server.server_close()


def wait_for_done(coordinator: Coordinator, grace_s: float) -> None:
    """The chief, its own loop over: the server stays up until every host it has heard from was
    told the search is done, or is lost, or `grace_s` passed."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with coordinator.lock:
            waiting = set(coordinator.hosts) - coordinator.told_done - set(coordinator.lost) - coordinator.gone
        if not waiting:
            return
        time.sleep(0.5)


__all__ = ["serve", "stop", "wait_for_done", "WAIT_S", "Offer", "Wait", "Done"]
