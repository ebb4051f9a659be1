"""host.sh run here with sh as it runs on a host (launcher/leases/on_host.py's commands), for the
tests of the host's side and of the stage: its commands, a launcher's session, a lease."""
from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

from launcher.leases import files as lf, on_host

UID = os.getuid()


def host(folder: Path, what: str, *args: str, stdin: str = "", user: str | None = None) -> subprocess.CompletedProcess:
    command = on_host.host_command(what, str(folder), *args)
    if user:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)


def writes(*files: tuple[str, str]) -> str:
    return "".join(f"write {name} {base64.b64encode(text.encode()).decode()}\n" for name, text in files)


def a_lease(uid: int = UID, cluster: str = "demo", session: str = "0" * 16) -> lf.Lease:
    return lf.Lease("1" * 16, cluster, "h0", "", "alice", "alice@laptop", session, 1_700_000_000,
                    lf.gpus_of([0]), frozenset({2222}), uid=uid)


def looked(folder: Path, user: str | None = None) -> lf.Folder:
    answer = host(folder, "look", user=user)
    assert answer.returncode == 0, answer.stderr
    return lf.parse_look(answer.stdout)


class Session:
    """A launcher's session on the host: alive while its stdin (the SSH channel) stays open."""

    def __init__(self, folder: Path, sid: str, user: str | None = None, silence_s: int | None = None):
        command = on_host.host_command("session", str(folder), sid)
        if user:
            command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
        env = {**os.environ, **({"TFC_SESSION_SILENCE_S": str(silence_s)} if silence_s else {})}
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, env=env)
        self.said = self.proc.stdout.readline().decode().strip()

    def end(self) -> None:
        self.proc.stdin.close()          # what closing the SSH connection does to it
        self.proc.wait(10)
