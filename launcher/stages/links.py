"""Links: can every host reach every other host's TensorFlow port? Checked before anything trains.

A firewall that blocks the TF port between two hosts otherwise shows up as a run that hangs until
the join watchdog fires, unable to say which link is closed. Here every host listens briefly on
its `tf_port` (answering with its name, so a stray listener is told apart), every host connects
to every other host's, and the result is a matrix. A closed link stops `up` naming both hosts and
the port, with the firewall line that opens it for the cluster's hosts only. Over each open link
a host then sends a few MB (bounded in bytes and seconds) and the peer counts them: the matrix
shows each link's throughput, and `allreduce: auto` trains by the slowest (plan.measured).

The probes are small Python programs, run by the host's python3 or, without one, by python3 in
the trainer image (which `up` has just put there).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from launcher import docker_commands as dc
from launcher.errors import TfcError
from launcher.host_facts import HostFacts
from launcher.ssh.group import Group
from launcher.inventory.model import Host
from launcher.plan import Plan
from launcher.text import one_line
from trainer.spec.config import LINK_MBIT_S

LISTEN_S = 30          # a listener ends by itself after this, should the launcher vanish
CONNECT_TIMEOUT_S = 3
SEND_S = 1.0           # throughput: each host sends to each peer for at most this long…
SEND_CAP = 16 << 20    # … or this many bytes, whichever comes first
READ_S = SEND_S + 5    # a listener counts what arrives for at most this long (the buffers drain)
MEASURE_BUDGET_S = 15  # a host stops measuring its peers after this (many hosts: the ring's first)

# Each connection: the token, then what the peer sends until it stops, counted; then the count.
LISTEN = r"""
import socket, sys, threading, time
port, seconds, token, read_s, cap = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3].encode(), float(sys.argv[4]), int(sys.argv[5])
try:
    s = socket.socket(socket.AF_INET6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", port))
except OSError:
    s = socket.socket(socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
s.listen(64)
print("bound", flush=True)
def serve(c):
    try:
        c.sendall(token + b"\n")
        c.settimeout(read_s)
        got, stop = 0, time.monotonic() + read_s
        while got < 2 * cap and time.monotonic() < stop:
            chunk = c.recv(1 << 16)
            if not chunk:
                break
            got += len(chunk)
        c.sendall(b"%d\n" % got)
    except OSError:
        pass
    finally:
        c.close()
end = time.monotonic() + seconds
while time.monotonic() < end:
    s.settimeout(max(0.1, end - time.monotonic()))
    try:
        c, _ = s.accept()
    except OSError:
        continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# Reachability of every peer at once; then throughput to each open one in turn, in the order
# given (the next host in the ring first: at any moment each host sends to one peer and
# receives from another, as in a ring all-reduce), timed until the peer has counted the bytes.
CONNECT = r"""
import json, socket, sys, time
from concurrent.futures import ThreadPoolExecutor
timeout, send_s, cap, budget = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
targets = [a.split("|") for a in sys.argv[5:]]
def hello(host, port):
    c = socket.create_connection((host, int(port)), timeout=timeout)
    c.settimeout(timeout)
    return c, c.recv(64).strip().decode("utf-8", "replace")
def probe(target):
    name, host, port = target
    try:
        c, answer = hello(host, port)
        c.close()
        return name, "open" if answer == name else f"answered by something else ({answer[:20]!r})"
    except OSError as exc:
        return name, (exc.strerror or type(exc).__name__).lower() if not isinstance(exc, socket.timeout) else "timed out"
def rate(host, port):
    try:
        c, _ = hello(host, port)
        with c:
            block, sent, start = bytes(1 << 16), 0, time.monotonic()
            c.settimeout(send_s + timeout)
            while sent < cap and time.monotonic() - start < send_s:
                c.sendall(block)
                sent += len(block)
            c.shutdown(socket.SHUT_WR)
            c.settimeout(send_s + 10)
            got = int(c.recv(64).split(b"\n")[0])
        return round(got * 8 / (time.monotonic() - start) / 1e6, 1)
    except (OSError, ValueError):
        return None
with ThreadPoolExecutor(16) as pool:
    reach = dict(pool.map(probe, targets))
mbit_s, stop = {}, time.monotonic() + budget
for name, host, port in targets:
    if reach[name] == "open" and time.monotonic() < stop:
        mbit_s[name] = rate(host, port)
print(json.dumps({"reach": reach, "mbit_s": mbit_s}))
"""


class LinkClosed(TfcError):
    """A host cannot reach another host's TensorFlow port."""


@dataclass(frozen=True)
class Matrix:
    hosts: list[str]
    state: dict[str, dict[str, str]]    # from → to → "open" or why not
    mbit_s: dict[str, dict[str, float]] = field(default_factory=dict)   # from → to → measured throughput
    port: str = "TF port"               # what was checked, for the matrix's title (parallel mode: the queue)

    @property
    def closed(self) -> list[tuple[str, str, str]]:
        return [(a, b, why) for a in self.hosts for b, why in self.state.get(a, {}).items() if why != "open"]

    @property
    def slowest_mbit_s(self) -> Optional[float]:
        """The slowest measured link: what a ring all-reduce, which crosses every link at once, goes at."""
        rates = [r for row in self.mbit_s.values() for r in row.values()]
        return min(rates) if rates else None

    def cell(self, a: str, b: str) -> str:
        if a == b:
            return "-"
        if self.state[a].get(b) != "open":
            return "CLOSED"
        rate = self.mbit_s.get(a, {}).get(b)
        return "open" if rate is None else f"{rate:,.0f} Mbit/s"

    def text(self) -> str:
        """Rows: the hosts that connected; columns: the hosts they tried (in parallel mode, the chief)."""
        sources = [a for a in self.hosts if a in self.state]
        targets = [b for b in self.hosts if any(b in self.state[a] for a in sources)] or sources
        first = max(len("from \\ to"), *(len(h) for h in sources)) + 2
        width = max(12, *(len(h) for h in targets)) + 2
        rows = ["from \\ to".ljust(first) + "".join(h.ljust(width) for h in targets)]
        for a in sources:
            rows.append(a.ljust(first) + "".join(self.cell(a, b).ljust(width) for b in targets))
        return "\n".join(row.rstrip() for row in rows)


def needed(plan: Plan, facts: dict[str, HostFacts]) -> bool:
    """Hosts that talk: sync, all of them on tf_port; parallel, every host to the chief's trial
    queue. A running cluster already holds the ports."""
    running = any(f.own_running for f in facts.values())
    return len(plan.cluster.hosts) > 1 and not running


def listeners(plan: Plan) -> list[Host]:
    return [h for h in plan.cluster.hosts if plan.listen_port(h)]


def check(group: Group, plan: Plan) -> Matrix:
    """The matrix, with each link's measured throughput; raises LinkClosed when any link is
    closed. Listeners are stopped in any case."""
    image = plan.container_image
    talkers = [h for h in plan.cluster.hosts if targets(plan, h)]
    try:
        group.staged("links", lambda h, c: c.run(dc.probe_listen(probe_name(plan, h), image, LISTEN, plan.listen_port(h),
                                                                 LISTEN_S, READ_S, SEND_CAP)), listeners(plan))
        # Parallel mode: each trial trains on one host, only the queue's small messages cross: no measuring.
        budget = 0 if plan.parallel else MEASURE_BUDGET_S
        answers = group.staged("links", lambda h, c: parse_answer(c.run(dc.probe_connect(
            image, CONNECT, CONNECT_TIMEOUT_S, targets(plan, h), SEND_S, SEND_CAP, budget)).stdout, plan, h), talkers)
    finally:
        group.run("links", lambda h, c: c.run(dc.probe_stop(probe_name(plan, h)), check=False), listeners(plan))
    got = answers.succeeded
    matrix = Matrix([h.name for h in plan.cluster.hosts], {a: reach for a, (reach, _) in got.items()},
                    {a: rates for a, (_, rates) in got.items()}, checked_port(plan))
    problems = judge(plan, matrix)
    if problems:
        what = "the chief's trial queue" if plan.parallel else "each other's TensorFlow port"
        raise LinkClosed(f"hosts cannot reach {what}:\n  " + "\n  ".join(problems) + "\n" + matrix.text())
    return matrix


def checked_port(plan: Plan) -> str:
    """What the matrix checked: TensorFlow's port, or in parallel mode the chief's trial queue."""
    return f"the chief's trial queue, port {plan.study_port}" if plan.parallel else "TF port"


def parse_answer(text: str, plan: Plan, host: Host) -> tuple[dict[str, str], dict[str, float]]:
    """A host's probe output, checked: only its peers, each a short printable reason (a link the
    host does not mention is "no answer") and a Mbit/s a link can carry (trainer.spec.config's
    LINK_MBIT_S, what `validate` allows too; others: not measured)."""
    try:
        doc = json.loads(text[:100_000] or "{}")
    except ValueError:
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    reach, rates = (doc.get(k) if isinstance(doc.get(k), dict) else {} for k in ("reach", "mbit_s"))
    peers = {probe_name(plan, h): h.name for h in listeners(plan) if h.name != host.name}   # what it was sent to
    state = {name: one_line(reach[key], 80) if isinstance(reach.get(key), str) else "no answer"
             for key, name in peers.items()}
    low, high = LINK_MBIT_S      # what a link can carry: a figure outside it is no measurement
    measured = {name: float(rates[key]) for key, name in peers.items()
                if isinstance(rates.get(key), (int, float)) and not isinstance(rates[key], bool)
                and low <= rates[key] <= high}
    return state, measured


def probe_name(plan: Plan, host: Host) -> str:
    """The listener's token and file name: cluster and host names are validated, so plain."""
    return f"{plan.cluster.name}.{host.name}"


def targets(plan: Plan, host: Host) -> list[str]:
    """The hosts it connects to (in parallel mode, the chief), the next one in the ring first (the
    chief's order, wrapping round)."""
    hosts = listeners(plan)
    at = next((i for i, h in enumerate(hosts) if h.name == host.name), -1)
    return [f"{probe_name(plan, h)}|{h.address}|{plan.listen_port(h)}" for h in hosts[at + 1:] + hosts[:max(at, 0)]]


def judge(plan: Plan, matrix: Matrix) -> list[str]:
    """One line per closed link, with the rule that opens it for this one source only."""
    hosts = {h.name: h for h in plan.cluster.hosts}
    lines = []
    for a, b, why in matrix.closed:
        src, dst = hosts[a], hosts[b]
        port = plan.listen_port(dst)
        lines.append(f"{a} cannot reach {b} at {dst.address}:{port} ({why}); on {b}, allow it from {a} only: "
                     f"sudo iptables -I INPUT -p tcp -s {src.address} --dport {port} -j ACCEPT "
                     f"(ufw: sudo ufw allow from {src.address} to any port {port} proto tcp)")
    return lines
