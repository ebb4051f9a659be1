"""Jump hosts: a `proxy_jump` (or ProxyJump) value parsed, and the bastions a host is reached
through resolved as OpenSSH resolves them, then checked for loops. Pure: the ssh config is read
through the `lookup` it is given (ssh_config.py), nothing is contacted.

OpenSSH's rules, followed here: `-J a,b` reaches `a` first, then `b` through `a`, then the host
through `b`. Each hop's user, port and key come from `[user@]host[:port]`, else from the ssh
config's entry for that name (HostName, User, Port, IdentityFile), else the defaults. Only the
first hop's own ProxyJump (or ProxyCommand) in the config is followed: every later hop is reached
through the hops before it.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

from launcher.inventory.patterns import HOSTNAME_RE


@dataclass(frozen=True)
class Bastion:
    """A jump host on the way to a host (ProxyJump), resolved like OpenSSH does: user and port
    from `[user@]host[:port]`, else the ssh config's entry for that name, else defaults."""

    name: str             # as written in proxy_jump or a ProxyJump line (a name, an address or a Host alias)
    address: str
    user: str
    port: int
    identity_file: Optional[Path] = None
    proxy_command: Optional[str] = None   # the ssh config's ProxyCommand for it (the first hop only)

    @property
    def target(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.user}@{host}:{self.port}"


MAX_HOPS = 8
NONE = "none"          # in proxy_jump (or ProxyJump): connect directly
# A bastion's login name reaches nothing but the SSH handshake (no shell, no file, no TF_CONFIG),
# so it may hold what bastion accounts often do (j.doe) that a host's user may not.
USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
_HOST_PORT = re.compile(r"(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]]*))(?::(?P<port>[0-9]{1,6}))?")


@dataclass(frozen=True)
class Jump:
    """One hop as written: `[user@]host[:port]` (host: a name, an address or a Host alias)."""

    host: str
    user: Optional[str] = None
    port: Optional[int] = None


class Alias(Protocol):
    """What the ssh config says of a name (ssh_config.Alias)."""

    hostname: Optional[str]
    user: Optional[str]
    port: Optional[int]
    identity_file: Optional[str]
    proxy_jump: Optional[str]
    proxy_command: Optional[str]


class Loop(ValueError):
    """A chain that comes back to where it has been: `path` names the hops in order."""

    def __init__(self, path: tuple[str, ...]):
        self.path = path
        super().__init__(" → ".join(path))


def parse(text: str) -> tuple[Jump, ...]:
    """The hops of `[user@]host[:port][,…]`, first hop first; () for `none`. ValueError says what is wrong."""
    if text.strip().lower() == NONE:
        return ()
    parts = text.split(",")
    if len(parts) > MAX_HOPS:
        raise ValueError(f"{len(parts)} jump hosts (at most {MAX_HOPS})")
    return tuple(_one(part.strip()) for part in parts)


def _one(text: str) -> Jump:
    bare = text.removeprefix("ssh://")
    user, _, rest = bare.rpartition("@") if "@" in bare else (None, "", bare)
    if rest.count(":") > 1 and not rest.startswith("["):      # a bare IPv6 address: no port
        host, port = rest, None
    else:
        match = _HOST_PORT.fullmatch(rest)
        if match is None:
            raise ValueError(f"{text!r} is not [user@]host[:port]")
        host, port = match["v6"] if match["v6"] is not None else match["host"], match["port"]
    if user is not None and not USER_RE.match(user):
        raise ValueError(f"{text!r}: the user {user!r} is not a user name")
    if not is_host(host):
        raise ValueError(f"{text!r}: {host!r} is not a host name or address")
    if port is not None and not 1 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: the port {port} is not 1–65535")
    return Jump(host, user, int(port) if port is not None else None)


def is_host(value: str) -> bool:
    try:
        return "%" not in value and bool(ipaddress.ip_address(value))
    except ValueError:
        return bool(HOSTNAME_RE.match(value))


def resolve(text: str, lookup: Callable[[str], Alias], user: str, identity: Optional[str],
            path_of: Callable[[str], Path], through: tuple[str, ...] = ()) -> tuple[Bastion, ...]:
    """The bastions `text` names, first hop first, with the first hop's own chain from the ssh
    config before them. `user` and `identity`: what a hop gets when neither it nor the config
    says; `through`: the config names followed so far (a name met again is a Loop)."""
    jumps = parse(text)
    if not jumps:
        return ()
    first = lookup(jumps[0].host)
    before: tuple[Bastion, ...] = ()
    if first.proxy_jump and first.proxy_jump.strip().lower() != NONE:
        if jumps[0].host in through:
            raise Loop(through + (jumps[0].host,))
        before = resolve(first.proxy_jump, lookup, user, identity, path_of, through + (jumps[0].host,))
    command = first.proxy_command if not before else None
    bastions = before + tuple(_bastion(j, lookup(j.host), user, identity, path_of, command if i == 0 else None)
                              for i, j in enumerate(jumps))
    if len(bastions) > MAX_HOPS:
        raise ValueError(f"{len(bastions)} jump hosts once the ssh config's ProxyJump lines are followed "
                         f"(at most {MAX_HOPS})")
    return bastions


def _bastion(jump: Jump, alias: Alias, user: str, identity: Optional[str], path_of: Callable[[str], Path],
             command: Optional[str]) -> Bastion:
    key = alias.identity_file or identity
    return Bastion(name=jump.host, address=alias.hostname or jump.host, user=jump.user or alias.user or user,
                   port=jump.port or alias.port or 22, identity_file=path_of(key) if key else None,
                   proxy_command=command)


def loop(name: str, address: str, port: int, bastions: tuple[Bastion, ...]) -> Optional[str]:
    """Why the way to host `name` (at address:port) goes round in a circle, or None: the host is
    one of its own bastions, or a bastion comes twice."""
    seen: dict[tuple[str, int], str] = {}
    for bastion in bastions:
        key = (bastion.address.lower(), bastion.port)
        if key in seen:
            return f"it passes through {bastion.target} twice ({' → '.join(b.name for b in bastions)})"
        seen[key] = bastion.name
    if (address.lower(), port) in seen:
        return f"{name} ({address}:{port}) would be its own bastion ({' → '.join(b.name for b in bastions)} → {name})"
    return None
