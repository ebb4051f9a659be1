"""A cluster's containers on a host, as Docker tells them: found by label, checked before they are
believed (a host's `docker inspect` is an answer to check, not a fact), the newest, its run. Read
by the commands that attach to a running cluster (status, logs, watch, collect, tensorboard) and by
the steps that start and stop containers (start, down).
"""
from __future__ import annotations

import json
import re
from typing import Optional

from launcher import docker_commands as dc
from launcher.errors import BadAnswer, RemoteError
from launcher.inventory.model import Host
from launcher.plan import Plan, named
from launcher.runs import RUN_FILE, RUN_ID_RE
from launcher.ssh.group import Group


def containers(conn, cluster: str, host: str, timeout: Optional[float] = None) -> list[dict]:
    """`docker inspect` of this host's containers of the cluster (any run, any state), checked;
    within `timeout` s (default: the connection's command timeout)."""
    out = conn.run(dc.inspect_cluster_containers(cluster, host), **timeout_kw(timeout)).stdout
    try:
        found = json.loads(out or "[]")
    except ValueError:
        raise BadAnswer(host, reason="`docker inspect` did not answer with JSON") from None
    if not isinstance(found, list) or not all(_looks_like_container(c) for c in found):
        raise BadAnswer(host, reason="`docker inspect` answered JSON that is not a list of containers")
    return found


def _looks_like_container(c) -> bool:
    return (isinstance(c, dict) and isinstance(c.get("Id"), str) and re.fullmatch(r"[0-9a-f]{12,64}", c["Id"]) is not None
            and isinstance(c.get("State"), dict) and isinstance(c.get("Config"), dict)
            and isinstance(c["Config"].get("Labels") or {}, dict) and isinstance(c.get("Created"), str))


def newest(found: list[dict]) -> dict:
    return max(found, key=lambda c: c["Created"])


def newest_container(conn, cluster: str, host: str) -> dict:
    """This host's newest container of the cluster; RemoteError when there is none."""
    found = containers(conn, cluster, host)
    if not found:
        raise RemoteError(host, reason=f"no container of cluster {cluster} on this host (run `tfcompose up` first)")
    return newest(found)


def current_run(conn, host: Host) -> str:
    """The run a host's bundle names (launcher/runs.py), or "" when it names none tfcompose writes."""
    text = conn.run(["sh", "-c", 'head -c 512 "$1" 2>/dev/null; true', "sh", f"{host.bundle_dir}/{RUN_FILE}"],
                    check=False).stdout
    run = next((line[4:].strip() for line in text.splitlines() if line.startswith("run=")), "")
    return run if RUN_ID_RE.match(run) else ""


def attach(group: Group, plan: Plan) -> Plan:
    """The plan of the run the cluster is on now, for commands that attach to it (watch, collect,
    status, tensorboard): the run the chief's bundle names, else its newest container's, else (a
    cluster started before runs had ids of their own) the configuration's."""
    chief = plan.cluster.chief
    conn = group.conn(chief)
    run = current_run(conn, chief)
    if not run:
        found = containers(conn, plan.cluster.name, chief.name)
        run = run_label(newest(found)) if found else ""
        if found and not run:
            group.reporter.warn(chief.name, "the container's tfcompose.run label is not a run id tfcompose writes; "
                                            f"taking run {plan.run} instead")
    return named(plan, run) if run else plan


def run_label(container: dict) -> str:
    """The container's run id, as tfcompose writes it; anything else is refused."""
    value = (container["Config"].get("Labels") or {}).get(dc.LABEL_RUN, "")
    return value if isinstance(value, str) and RUN_ID_RE.match(value) else ""


def timeout_kw(timeout: Optional[float]) -> dict:
    return {} if timeout is None else {"timeout": timeout}
