"""Down: stop and remove the cluster's containers (and its TensorBoards) everywhere; `--purge` also
removes the cluster's folder on each host, but only a folder that carries tfcompose's marker
(push.MARKER_FILE)."""
from __future__ import annotations

from typing import Optional

from launcher import docker_commands as dc
from launcher.containers import containers, newest, run_label
from launcher.errors import RemoteError
from launcher.image import relay
from launcher.inventory.model import Cluster, Host
from launcher.leases.on_host import release_host
from launcher.ssh.fanout import GroupResult
from launcher.ssh.group import Group
from launcher.stages.push import HASH_FILE, MARKER_FILE


def remove_containers(host: Host, conn, cluster: str, keep: bool = False) -> int:
    """Kill and remove this host's containers of the cluster (keep=True: kill, keep for the logs)."""
    out = conn.run(dc.remove_cluster_containers(cluster, host.name, keep)).stdout.strip()
    return int(out) if out.isdigit() else 0


def stop_all(group: Group, hosts=None) -> GroupResult[int]:
    """Kill every container of the cluster, keeping them for their logs; a host that does not
    answer is left as it is (reported in the result)."""
    return group.run("stop", lambda h, c: remove_containers(h, c, group.cluster.name, keep=True), hosts)


def purge(host: Host, conn) -> None:
    folder = host.bundle_dir
    marked = conn.run(["sh", "-c", '[ -f "$1/$2" ] || [ -f "$1/$3" ]', "sh", folder, MARKER_FILE, HASH_FILE],
                      check=False)
    if not marked.ok:
        raise RemoteError(host.name, reason=f"not purging {folder}: it does not carry tfcompose's marker "
                                            f"({MARKER_FILE}), so tfcompose did not make it")
    conn.run(["rm", "-rf", "--", folder])


def mark_if_finished(host: Host, conn, cluster: str) -> None:
    """The chief's container of its run exited 0: the run is marked finished before the container
    (and what Docker knew of it) goes, so the next `up` starts a new run instead of resuming it."""
    found = containers(conn, cluster, host.name)
    if found:
        top = newest(found)
        run = run_label(top)
        if run and top["State"].get("Status") == "exited" and top["State"].get("ExitCode") == 0:
            conn.run(dc.mark_finished(f"{host.bundle_dir}/runs/{run}"), check=False)


def down_host(host: Host, conn, cluster: str, with_purge: bool) -> str:
    if host.chief:
        mark_if_finished(host, conn, cluster)
    removed = remove_containers(host, conn, cluster)
    # A `tfcompose tensorboard` still serving this cluster ends with it (its keeper sees it gone).
    boards = conn.run(dc.remove_tensorboards(cluster, host.name)).stdout.strip()
    conn.run(dc.remove_project_networks(cluster))
    # An `up` cut off mid-relay (killed, power cut) can leave its temporary keys: they go now.
    relay.revoke(conn, host, cluster)
    lease = release_host(host, conn, cluster)      # once its containers are gone, not before
    if with_purge:
        purge(host, conn)
    return (f"removed {removed} container(s)" + (f" and {boards} TensorBoard" if boards.isdigit() and boards != "0" else "")
            + f", {lease}" + (f", purged {host.bundle_dir}" if with_purge else ""))


def down(cluster: Cluster, with_purge: bool = False, reporter=None, parallel: Optional[int] = None) -> GroupResult[str]:
    """Stop and remove everywhere; an unreachable host is reported in `.failed`, not fatal."""
    with Group(cluster, reporter, parallel) as group:
        return group.run("down", lambda h, c: down_host(h, c, cluster.name, with_purge))
