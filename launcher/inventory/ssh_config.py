"""What ~/.ssh/config says of a host alias (HostName, User, Port, IdentityFile, ProxyJump,
ProxyCommand), read safely.

Validating an inventory contacts nothing and runs nothing: `Match exec` blocks (which would run
a command while the file is read) are left out, and what the file says is checked like the
inventory's own fields, since it reaches TF_CONFIG and the hosts' environment.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.errors import InventoryError
from launcher.inventory import jumps
from launcher.inventory.fields import JUMP, USER_RE
from launcher.inventory.patterns import HOSTNAME_RE

MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Alias:
    hostname: Optional[str] = None
    user: Optional[str] = None
    port: Optional[int] = None
    identity_file: Optional[str] = None
    proxy_jump: Optional[str] = None      # as written (jumps.py reads it); `none` included
    proxy_command: Optional[str] = None   # run by the launcher (ssh/proxy.py) to reach this name


class SshConfig:
    def __init__(self, path: Optional[Path] = None):
        self.path, self._config = path, None
        if path is not None and path.is_file():
            self._config = _parse(path)

    def lookup(self, name: str) -> Alias:
        if self._config is None:
            return Alias()
        try:
            found = self._config.lookup(name)
        except Exception as exc:  # paramiko raises several kinds for odd configs; none may escape
            raise InventoryError(f"{self.path}: cannot look up {name!r} ({type(exc).__name__}: {exc}). "
                                 "Expected an OpenSSH client config.") from None
        return _checked(self.path, name, found)


def _parse(path: Path):
    import paramiko  # only when there is a config to read: paramiko is slow to import
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"{path}: cannot read the ssh config ({getattr(exc, 'strerror', None) or exc}). "
                             "Expected a UTF-8 OpenSSH client config.") from None
    if len(text) > MAX_BYTES:
        raise InventoryError(f"{path}: Received more than 1 MiB. Expected an OpenSSH client config.")
    try:
        return paramiko.SSHConfig.from_text(without_match_exec(text))
    except Exception as exc:
        raise InventoryError(f"{path}: cannot parse the ssh config ({type(exc).__name__}: {exc}). "
                             "Expected an OpenSSH client config.") from None


def without_match_exec(text: str) -> str:
    """The config without `Match … exec …` blocks: reading them would run their command."""
    kept, skipping = [], False
    for line in text.splitlines():
        words = line.strip().lower().split()
        if words and re.fullmatch(r"(host|match)(=.*)?", words[0]):
            skipping = words[0].startswith("match") and any(w.lstrip("!").startswith("exec") for w in words)
        if not skipping:
            kept.append(line)
    return "\n".join(kept) + "\n"


def _checked(path: Path, name: str, found: dict) -> Alias:
    hostname, user, port = found.get("hostname"), found.get("user"), found.get("port")
    where = f"{path}: Host {name}"
    if hostname is not None and hostname != name and not _is_address(hostname):
        raise InventoryError(f"{where}: HostName: Received {hostname!r}. Expected an IP address or host name.")
    if user is not None and not re.fullmatch(USER_RE, user):
        raise InventoryError(f"{where}: User: Received {user!r}. Expected a user name of lowercase letters, digits, _ and -.")
    if port is not None and not (str(port).isdigit() and 1 <= int(port) <= 65535):
        raise InventoryError(f"{where}: Port: Received {port!r}. Expected an integer 1–65535.")
    identity = next(iter(found.get("identityfile", [])), None)
    jump, command = _proxies(where, found)
    return Alias(hostname, user, int(port) if port is not None else None, identity, jump, command)


def _proxies(where: str, found: dict) -> tuple[Optional[str], Optional[str]]:
    """ProxyJump (checked like the inventory's proxy_jump) and ProxyCommand; never both."""
    jump, command = found.get("proxyjump"), found.get("proxycommand")
    if jump is not None:
        try:
            jumps.parse(jump)
        except ValueError as exc:
            raise InventoryError(f"{where}: ProxyJump: Received {jump!r} ({exc}). Expected {JUMP}.") from None
    if command is not None and (len(command) > 4096 or not command.isprintable()):
        raise InventoryError(f"{where}: ProxyCommand: Received {command[:60]!r}…. Expected a command of at most "
                             "4096 printable characters.")
    if jump is not None and command is not None:
        raise InventoryError(f"{where}: ProxyJump: Received {jump!r} and a ProxyCommand too. Expected one of them "
                             "(OpenSSH takes whichever comes first in the file, which cannot be told here).")
    return jump, command


def _is_address(value: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return bool(HOSTNAME_RE.match(value))
