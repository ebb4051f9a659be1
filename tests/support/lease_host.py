"""host.sh run here with sh as it runs on a host (launcher/leases/on_host.py's commands), for the
tests of the host's side and of the stage: its commands, a launcher's session, a lease."""
from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

from launcher.leases import files as lf, look, on_host

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


def looked(folder: Path, user: str | None = None) -> look.Folder:
    answer = host(folder, "look", user=user)
    assert answer.returncode == 0, answer.stderr
    return look.parse_look(answer.stdout)


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


def demo_lease(**kw) -> lf.Lease:
    """alice's lease of cluster demo on h1, as files.py reads it back (`kw`: what differs)."""
    values = dict(id="0123456789abcdef", cluster="demo", host="h1", run="3f2a1b2c3d4e", user="alice",
                  launcher="alice@laptop", session="fedcba9876543210", since=1_700_000_000, gpus=lf.Gpus(ids=frozenset({0, 1})),
                  ports=frozenset({2222}), uid=1000, owner="alice", file="demo.h1.1000.lease")
    values.update(kw)
    return lf.Lease(**values)
