"""Start: each host's container, all or nothing: if any host fails to start, the containers that
did start are stopped again. Idempotent: a host already running this run is left alone; a host
whose container of this run has stopped (the run is resumed) gets a new one, with Docker's whole
restart budget again (a container started anew keeps the restarts it has used)."""
from __future__ import annotations

from launcher import docker_commands as dc
from launcher.stages.down import remove_containers
from launcher.errors import GroupError
from launcher.ssh.group import Group
from launcher.inventory.model import Host
from launcher.plan import Plan
from launcher.containers import containers, run_label

COMPOSE_UP_TIMEOUT_S = 300


def start(group: Group, plan: Plan) -> dict[str, str]:
    """What happened on each host: 'started' or 'already <state>'."""
    cluster = plan.cluster

    def one(host: Host, conn) -> str:
        group.reporter.stage(host.name, "start")
        return start_host(host, conn, cluster.name, plan.run_id)

    result = group.run("start", one)
    if result.failed:
        started = [h for h in cluster.hosts if result.succeeded.get(h.name) == "started"]
        if started:
            group.run("stop", lambda h, c: remove_containers(h, c, cluster.name), hosts=started)
        raise GroupError("start", result)
    return result.succeeded


def start_host(host: Host, conn, cluster: str, run: str) -> str:
    existing = [c for c in containers(conn, cluster, host.name) if run_label(c) == run]
    state = existing[0]["State"].get("Status", "unknown") if existing else ""
    if state in ("running", "restarting", "created", "paused"):
        return f"already {state}"
    conn.run(dc.compose_up(host.bundle_dir, cluster, recreate=bool(existing)), timeout=COMPOSE_UP_TIMEOUT_S)
    return "resumed" if existing else "started"
