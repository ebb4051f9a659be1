"""A second local account on this machine: the neighbour of a shared box (another user of the
hosts, who may read and write where every user may). Made for a test module and removed after it,
also after a crash (a leftover of the same name is removed first). Needs root (useradd, setpriv).
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Account:
    name: str
    uid: int

    def run(self, *argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """A command run as this account (its own uid and group, no other group), as it would run it."""
        return subprocess.run(["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", *argv],
                              capture_output=True, text=True, check=check, **kw)

    def sh(self, script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("sh", "-c", script, "sh", *args, check=check)


def available() -> tuple[bool, str]:
    if os.getuid() != 0:
        return False, "a second local account needs root (useradd, setpriv)"
    missing = [tool for tool in ("useradd", "userdel", "setpriv") if shutil.which(tool) is None]
    return (not missing, f"a second local account needs {', '.join(missing)}")


def account_name() -> str:
    """One per checkout (TFC_LAB_NET): two test runs on one machine never share an account."""
    lane = os.environ.get("PYTEST_XDIST_WORKER", "").replace("gw", "")     # two lanes, two neighbours
    return f"tfcn{os.environ.get('TFC_LAB_NET', '213').strip() or '213'}{lane}"[:32]


def create(name: str) -> Account:
    remove(name)
    if os.environ.get("TFC_TEST_RUN"):           # the run's ledger names it: a killed run's is removed
        from support import rigs
        rigs.note("account", name=name)
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                    "/usr/sbin/nologin", "--user-group", name], check=True, capture_output=True)
    return Account(name, pwd.getpwnam(name).pw_uid)


def remove(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    subprocess.run(["userdel", name], capture_output=True)


def owned_by(path: Path, account: Account) -> bool:
    return path.lstat().st_uid == account.uid
