"""host.sh's commands on one host (was in take.py): the lease folder made and a session held there
for as long as the connection lives, the folder looked at (its files and sessions, and the host's
tfcompose containers when some lease's session is over), changes applied under the folder's lock
only if its files are still what was looked at, a cluster's lease released; and what a folder too
crowded to list says."""
from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import Optional

from launcher import docker_commands as dc
from launcher.errors import RemoteError
from launcher.inventory.model import Host
from launcher.leases import rules as rules
from launcher.leases.look import Folder, parse_look

HOST_SCRIPT = Path(__file__).with_name("host.sh")
LOOK_LIMIT = 8 << 20  # 512 files of 8 KB in base64 (5.5 MB), and the sessions
MAX_FILES = 512       # host.sh's: more leases (or sessions) than this and `look` lists none
CHANGED = 4           # host.sh's status when the files changed since `look`


def host_command(what: str, folder: str, *args: str) -> list[str]:
    """One of host.sh's commands (session, look, change, release), the script sent as text."""
    return ["sh", "-c", HOST_SCRIPT.read_text(), "sh", what, folder, *args]


def open_session(host: Host, conn, reporter) -> str:
    """Make the lease folder if needed and hold a session there while the connection lives. The
    first contact with the host in `up`: SSH problems are reported as such."""
    reporter.stage(host.name, "connect")
    conn.client  # noqa: B018
    reporter.stage(host.name, "lease")
    session = secrets.token_hex(8)
    conn.hold(host_command("session", host.lease_dir, session), ready="held")
    return session


def look(host: Host, conn, with_containers: bool = True) -> tuple[Folder, Optional[dict]]:
    """The folder's files and sessions; and the host's tfcompose containers when some lease's
    session is over (its liveness is then its containers'); None when Docker did not answer."""
    folder = parse_look(conn.run(host_command("look", host.lease_dir), limit=LOOK_LIMIT).stdout)
    if not with_containers or all(folder.alive(lease.session) for lease in folder.leases):
        return folder, {}
    answer = conn.run(dc.tfcompose_containers(), check=False, limit=1 << 20)
    return folder, rules.parse_containers(answer.stdout) if answer.ok else None


def change(host: Host, conn, changes: list[tuple[str, str, str]], fingerprint: str = "-",
           skip: tuple[str, ...] = ()) -> bool:
    """Apply the changes under the folder's lock if its files but `skip` still give `fingerprint`
    (`-`: whatever they are); False when they changed."""
    lines = "".join(f"{op} {name} {base64.b64encode(text.encode()).decode()}\n" for op, name, text in changes)
    command = host_command("change", host.lease_dir, fingerprint, *skip)
    result = conn.run(command, stdin=lines.encode(), check=False)
    if result.status == CHANGED and fingerprint != "-":
        return False
    if not result.ok:
        raise RemoteError(host.name, command, result.status, result.stderr)
    return True


def release_host(host: Host, conn, cluster: str) -> str:
    out = conn.run(host_command("release", host.lease_dir, cluster, host.name)).stdout
    return "gave back its lease" if "released 1" in out else "held no lease"


def crowded_lines(host: Host, folder: Folder) -> list[str]:
    lines = []
    for kind, count, owner, theirs in folder.crowded:
        whose = f": {theirs:,} of them belong to {owner}" if owner != "?" and theirs else ""
        lines.append(f"{host.name}: the lease folder {host.lease_dir} holds {count:,} {kind} files, more than the "
                     f"{MAX_FILES:,} tfcompose reads (one left out could be a lease in the way){whose}; only their "
                     "owners or root can remove them, or set lease_dir")
    return lines
