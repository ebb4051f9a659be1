"""Links: can every host reach every other host's TensorFlow port? Checked before anything trains.

A firewall that blocks the TF port between two hosts otherwise shows up as a run that hangs until
the join watchdog fires, unable to say which link is closed. Here every host listens briefly on
its `tf_port` (answering with its name, so a stray listener is told apart), every host connects
to every other host's, and the result is a matrix. A closed link stops `up` naming both hosts and
the port, with the firewall line that opens it for the cluster's hosts only.

The probes are small Python programs, run by the host's python3 or, without one, by python3 in
the trainer image (which `up` has just put there).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from launcher import docker_commands as dc
from launcher.errors import TfcError
from launcher.ssh.group import Group
from launcher.inventory.model import Host
from launcher.plan import Plan

LISTEN_S = 30          # a listener ends by itself after this, should the launcher vanish
CONNECT_TIMEOUT_S = 3

LISTEN = r"""
import socket, sys, time
port, seconds, token = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3].encode()
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
end = time.monotonic() + seconds
while time.monotonic() < end:
    s.settimeout(max(0.1, end - time.monotonic()))
    try:
        c, _ = s.accept()
    except OSError:
        continue
    try:
        c.sendall(token + b"\n")
    except OSError:
        pass
    c.close()
"""

CONNECT = r"""
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
timeout = float(sys.argv[1])
def probe(arg):
    name, host, port = arg.split("|")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as c:
            c.settimeout(timeout)
            answer = c.recv(64).strip().decode("utf-8", "replace")
        return name, "open" if answer == name else f"answered by something else ({answer[:20]!r})"
    except OSError as exc:
        return name, (exc.strerror or type(exc).__name__).lower() if not isinstance(exc, socket.timeout) else "timed out"
with ThreadPoolExecutor(16) as pool:
    print(json.dumps(dict(pool.map(probe, sys.argv[2:]))))
"""


class LinkClosed(TfcError):
    """A host cannot reach another host's TensorFlow port."""


@dataclass(frozen=True)
class Matrix:
    hosts: list[str]
    state: dict[str, dict[str, str]]    # from → to → "open" or why not

    @property
    def closed(self) -> list[tuple[str, str, str]]:
        return [(a, b, why) for a in self.hosts for b, why in self.state.get(a, {}).items() if why != "open"]

    def text(self) -> str:
        """Rows: the hosts that connected; columns: the hosts they tried (in parallel mode, the chief)."""
        sources = [a for a in self.hosts if a in self.state]
        targets = [b for b in self.hosts if any(b in self.state[a] for a in sources)] or sources
        first = max(len("from \\ to"), *(len(h) for h in sources)) + 2
        width = max(len("CLOSED"), *(len(h) for h in targets)) + 2
        rows = ["from \\ to".ljust(first) + "".join(h.ljust(width) for h in targets)]
        for a in sources:
            cells = ["-" if a == b else ("open" if self.state[a].get(b) == "open" else "CLOSED") for b in targets]
            rows.append(a.ljust(first) + "".join(c.ljust(width) for c in cells))
        return "\n".join(row.rstrip() for row in rows)


def needed(plan: Plan, facts: dict[str, dict]) -> bool:
    """Hosts that talk: sync, all of them on tf_port; parallel, every host to the chief's trial
    queue. A running cluster already holds the ports."""
    running = any(f.get("own_running", "0") not in ("", "0") for f in facts.values())
    return len(plan.cluster.hosts) > 1 and not running


def listeners(plan: Plan) -> list[Host]:
    return [h for h in plan.cluster.hosts if plan.listen_port(h)]


def check(group: Group, plan: Plan) -> Matrix:
    """The matrix; raises LinkClosed when any link is closed. Listeners are stopped in any case."""
    image = plan.container_image
    talkers = [h for h in plan.cluster.hosts if targets(plan, h)]
    try:
        group.staged("links", lambda h, c: c.run(dc.probe_listen(probe_name(plan, h), image, LISTEN,
                                                                  plan.listen_port(h), LISTEN_S)), listeners(plan))
        answers = group.staged("links", lambda h, c: json.loads(c.run(
            dc.probe_connect(image, CONNECT, CONNECT_TIMEOUT_S, targets(plan, h))).stdout or "{}"), talkers)
    finally:
        group.run("links", lambda h, c: c.run(dc.probe_stop(probe_name(plan, h)), check=False), listeners(plan))
    prefix = f"{plan.cluster.name}."
    matrix = Matrix([h.name for h in plan.cluster.hosts],
                    {a: {b.removeprefix(prefix): why for b, why in answers.succeeded[a].items()} for a in answers.succeeded})
    problems = judge(plan, matrix)
    if problems:
        what = "the chief's trial queue" if plan.parallel else "each other's TensorFlow port"
        raise LinkClosed(f"hosts cannot reach {what}:\n  " + "\n  ".join(problems) + "\n" + matrix.text())
    return matrix


def probe_name(plan: Plan, host: Host) -> str:
    """The listener's token and file name: cluster and host names are validated, so plain."""
    return f"{plan.cluster.name}.{host.name}"


def targets(plan: Plan, host: Host) -> list[str]:
    return [f"{probe_name(plan, h)}|{h.address}|{plan.listen_port(h)}" for h in listeners(plan) if h.name != host.name]


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
