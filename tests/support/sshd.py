"""Real OpenSSH `sshd` processes on 127.0.0.1 for the launcher's tests.

Each "host" is an sshd on its own free port with its own host key and workdir; all share this
machine's Docker engine. One user key (ed25519) logs in as the current user.
"""
from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def keygen(path: Path, passphrase: str = "") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "tfcompose-test", "-f", str(path)],
                   check=True, capture_output=True)
    return path


@dataclass
class SshdHost:
    name: str
    port: int
    tf_port: int
    workdir: Path
    host_key: Path
    proc: subprocess.Popen
    address: str = "127.0.0.1"

    def public_host_key(self) -> str:
        return self.host_key.with_suffix(".pub").read_text().split()[:2]

    def known_hosts_line(self) -> str:
        kind, b64 = self.public_host_key()
        name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"  # as OpenSSH writes it
        return f"{name} {kind} {b64}\n"

    def freeze(self) -> None:
        """The host stops answering over SSH (as behind a pulled cable): its sshd and every session
        and command under it stopped (SIGSTOP); its container, which Docker runs, goes on."""
        for _ in range(2):              # a child forked while its parent was being stopped
            for pid in process_tree(self.proc.pid):
                _signal(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in process_tree(self.proc.pid):
            _signal(pid, signal.SIGCONT)


def children_map() -> dict[int, list[int]]:
    """Each process's children, from /proc's parent ids (a process gone mid-read is skipped)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    return children


def process_tree(root: int) -> list[int]:
    """`root` and every process beneath it (from /proc's parent ids)."""
    children = children_map()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class SshdFarm:
    def __init__(self, root: Path):
        self.root = root
        self.user = getpass.getuser()
        self.user_key = keygen(root / "id_user")
        (root / "authorized_keys").write_text(self.user_key.with_suffix(".pub").read_text())
        self.hosts: list[SshdHost] = []

    def authorize(self, public_key_file: Path) -> None:
        with (self.root / "authorized_keys").open("a") as fh:
            fh.write(public_key_file.read_text())

    def start(self, name: str, port: int, tf_port: int, env: dict[str, str] | None = None,
              address: str = "127.0.0.1", netns: str | None = None, sftp: str = "internal-sftp") -> SshdHost:
        """An sshd on address:port; in network namespace `netns` when given (a host of its own);
        `sftp`: its SFTP subsystem's command (a hostile host's: one that never answers)."""
        folder = self.root / name
        folder.mkdir()
        host_key = keygen(folder / "host_key")
        workdir = folder / "work"
        workdir.mkdir()
        config = folder / "sshd_config"
        lines = [f"Port {port}", f"ListenAddress {address}", f"HostKey {host_key}", f"PidFile {folder}/sshd.pid",
                 f"AuthorizedKeysFile {self.root}/authorized_keys", "PasswordAuthentication no",
                 "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "StrictModes no",
                 "UsePAM no", f"Subsystem sftp {sftp}", "LogLevel ERROR"]
        # One SetEnv line: sshd_config keeps the first value of a keyword and ignores the rest.
        variables = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
        lines.append("SetEnv " + " ".join(f"{k}={v}" for k, v in variables.items()))
        config.write_text("\n".join(lines) + "\n")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation dir
        log = open(folder / "sshd.log", "w")
        prefix = ["ip", "netns", "exec", netns] if netns else []
        proc = subprocess.Popen([*prefix, SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        wait_for_port(port, proc, folder / "sshd.log", address)
        host = SshdHost(name, port, tf_port, workdir, host_key, proc, address)
        self.hosts.append(host)
        return host

    def known_hosts(self, hosts: list[SshdHost] | None = None) -> Path:
        path = self.root / "known_hosts"
        path.write_text("".join(h.known_hosts_line() for h in (hosts if hosts is not None else self.hosts)))
        return path

    def stop(self) -> None:
        for host in self.hosts:
            host.thaw()             # a frozen session would hold its connection's processes for ever
            try:
                os.killpg(host.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            host.proc.wait()


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, address: str = "127.0.0.1", timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"sshd on port {port} did not come up: {log.read_text()[-2000:]}")


def write_inventory(farm: SshdFarm, path: Path, cluster: str, hosts: list[SshdHost], *, known_hosts: Path | None = None,
                    policy: str = "strict", train: dict | None = None, image: str = "tfcompose-trainer:test",
                    base_image: str | None = None, extra_hosts: list[dict] | None = None,
                    identity_file: Path | None = None, ssh: dict | None = None, **top) -> Path:
    """An inventory whose hosts are this farm's sshd processes on 127.0.0.1."""
    import yaml
    from support.common import base_image as base_image_of_the_tests
    doc = {
        "cluster": cluster, "image": image, "base_image": base_image or base_image_of_the_tests(), "image_mode": "ship",
        "ssh": {"user": farm.user, "identity_file": str(identity_file or farm.user_key), "host_key_policy": policy,
                "known_hosts": str(known_hosts or farm.root / "known_hosts"), "config_file": str(farm.root / "no-config"),
                "connect_timeout_s": 5, **(ssh or {})},
        # The farm's hosts share this machine, so one lease folder: the farm's own, never /var/tmp's
        # (a test's `defaults` are laid over these).
        "defaults": {"gpus": 0, "shm_size": "256m", "restart_retries": 0, "lease_dir": str(farm.root / "leases"),
                     **top.pop("defaults", {})},
        **({} if "run" in top else {"train": train or {}}),
        "hosts": [{"name": h.name, "address": h.address, "ssh_port": h.port, "tf_port": h.tf_port,
                   "workdir": str(h.workdir)} for h in hosts] + (extra_hosts or []),
        **top,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
