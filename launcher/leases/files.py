"""The files in a host's lease folder, and what the host says about them: their one owner.

Three kinds of small JSON file, each written whole under a temporary name and renamed (by
host.sh), each readable by every user of the host (0644) in a folder every user can write
(root's, mode 1777, sticky: nobody can remove or replace another user's file; host.sh refuses
a folder anyone but root and the user could empty):

    <cluster>.<host>.<uid>.lease    a cluster holds GPUs and ports on this host
    <key>.<host>.ticket             an `up --queue` waits for them (key: when it asked, then a nonce)
    <lease id>.<uid>.broken         `up --break-lease` broke that (stale) lease of another user

and `<session>.session`, empty, locked by the launcher that holds or waits (see take.py).

Everything read back is hostile input: another user, a broken disk or a careless `echo >` may
have written it. A file is taken only if it is a document tfcompose writes: bounded, every field
type-checked, its name agreeing with its content and its owner's uid agreeing with its name (the
file system, not the file, says who owns it). Anything else is `Unreadable`, shown and ignored.
The host's answer to `look`, which lists them, is read by look.py.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional, Union

SCHEMA = 1
MAX_BYTES = 8192              # what the host sends of each file (host.sh's `head -c`): 1024 GPU ids fit
MAX_GPUS, MAX_PORTS = 1024, 16
NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")       # cluster and host names (fields.NAME_RE)
HEX16_RE = re.compile(r"^[0-9a-f]{16}$")                               # lease ids and session ids
RUN_RE = re.compile(r"^(?:\d{8}-\d{6}-[0-9a-f]{8}|[0-9a-f]{12}|local)?$")    # runs.RUN_ID_RE, or "" until known
KEY_RE = re.compile(r"^[0-9]{13}-[0-9a-f]{8}$")                        # ticket keys: ms since 1970, nonce
USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$")          # names as `stat -c %U` prints them
LAUNCHER_RE = re.compile(r"^[A-Za-z0-9_.@:-]{1,120}$")                 # user@machine the launcher ran on
FILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")            # names host.sh lists at all


@dataclass(frozen=True)
class Gpus:
    """A GPU set: every GPU (`all`), or these ids; empty on a CPU-only host (`gpus: 0`)."""

    every: bool = False
    ids: frozenset = frozenset()

    def overlaps(self, other: "Gpus") -> bool:
        if self.every or other.every:
            return bool((self.every or self.ids) and (other.every or other.ids))
        return bool(self.ids & other.ids)

    def common(self, other: "Gpus") -> str:
        """The GPUs both hold, as a person reads them: `0,1`, `all`."""
        if self.every and other.every:
            return "all"
        if self.every or other.every:
            return ",".join(map(str, sorted(other.ids if self.every else self.ids))) or "all"
        return ",".join(map(str, sorted(self.ids & other.ids)))

    def text(self) -> str:
        return "all" if self.every else (",".join(map(str, sorted(self.ids))) or "none")

    def doc(self):
        return "all" if self.every else sorted(self.ids)


def gpus_of(value) -> Gpus:
    """The inventory's `gpus` as a set: `all`; a count N is ids 0…N-1, the devices Docker's
    `count: N` gives a container (moby's countToDevices); a list is those ids; 0 is none."""
    if value == "all":
        return Gpus(every=True)
    if isinstance(value, list):
        return Gpus(ids=frozenset(value))
    return Gpus(ids=frozenset(range(int(value))))


@dataclass(frozen=True)
class Needs:
    """What one host of a cluster takes: its GPUs and the ports it listens on."""

    cluster: str
    host: str
    gpus: Gpus
    ports: frozenset


@dataclass(frozen=True)
class Entry:
    """A file of the lease folder as the host listed it: name, owner (uid and name), content."""

    name: str
    uid: int
    owner: str
    text: str


@dataclass(frozen=True)
class Lease:
    id: str
    cluster: str
    host: str
    run: str
    user: str
    launcher: str
    session: str
    since: int                # the host's clock, seconds since 1970
    gpus: Gpus
    ports: frozenset
    uid: int = -1             # who owns the file (from the file system)
    owner: str = ""
    file: str = ""
    text: str = ""            # the file as read: written back as it was when an `up` is undone

    def needs(self) -> Needs:
        return Needs(self.cluster, self.host, self.gpus, self.ports)


@dataclass(frozen=True)
class Ticket:
    key: str
    cluster: str
    host: str
    user: str
    launcher: str
    session: str
    since: int
    gpus: Gpus
    ports: frozenset
    uid: int = -1
    owner: str = ""
    file: str = ""

    def needs(self) -> Needs:
        return Needs(self.cluster, self.host, self.gpus, self.ports)


@dataclass(frozen=True)
class Tombstone:
    lease: str                # the id of the lease it broke
    by: str
    launcher: str
    at: int
    uid: int = -1
    file: str = ""


@dataclass(frozen=True)
class Unreadable:
    """A file that is not a document tfcompose writes: named, and ignored."""

    file: str
    owner: str
    why: str


Document = Union[Lease, Ticket, Tombstone, Unreadable]


# --- names -----------------------------------------------------------------------------------------
def lease_file(cluster: str, host: str, uid: int) -> str:
    return f"{cluster}.{host}.{uid}.lease"


def ticket_file(key: str, host: str) -> str:
    return f"{key}.{host}.ticket"


def tombstone_file(lease_id: str, uid: int) -> str:
    return f"{lease_id}.{uid}.broken"


def session_file(session: str) -> str:
    return f"{session}.session"


# --- writing -------------------------------------------------------------------------------------
def _dump(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def lease_text(lease: Lease) -> str:
    return _dump({"tfcompose": "lease", "schema": SCHEMA, "id": lease.id, "cluster": lease.cluster,
                  "host": lease.host, "run": lease.run, "user": lease.user, "launcher": lease.launcher,
                  "session": lease.session, "since": lease.since, "gpus": lease.gpus.doc(),
                  "ports": sorted(lease.ports)})


def ticket_text(ticket: Ticket) -> str:
    return _dump({"tfcompose": "ticket", "schema": SCHEMA, "key": ticket.key, "cluster": ticket.cluster,
                  "host": ticket.host, "user": ticket.user, "launcher": ticket.launcher, "session": ticket.session,
                  "since": ticket.since, "gpus": ticket.gpus.doc(), "ports": sorted(ticket.ports)})


def tombstone_text(stone: Tombstone) -> str:
    return _dump({"tfcompose": "broken", "schema": SCHEMA, "lease": stone.lease, "by": stone.by,
                  "launcher": stone.launcher, "at": stone.at})


# --- reading (hostile) -----------------------------------------------------------------------------
class _Bad(Exception):
    pass


def _field(doc: dict, name: str, kind, pattern: Optional[re.Pattern] = None):
    value = doc.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _Bad(f"{name}: not {'a number' if kind is int else 'text'}")
    if pattern is not None and not pattern.match(value):
        raise _Bad(f"{name}: not what tfcompose writes")
    return value


def _time(doc: dict, name: str) -> int:
    value = _field(doc, name, int)
    if not 0 <= value < 2 ** 40:
        raise _Bad(f"{name}: not a time")
    return value


def _gpus(doc: dict) -> Gpus:
    value = doc.get("gpus")
    if value == "all":
        return Gpus(every=True)
    if not isinstance(value, list) or len(value) > MAX_GPUS \
            or not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < MAX_GPUS for g in value):
        raise _Bad("gpus: not 'all' or a list of GPU ids")
    return Gpus(ids=frozenset(value))


def _ports(doc: dict) -> frozenset:
    value = doc.get("ports")
    if not isinstance(value, list) or len(value) > MAX_PORTS \
            or not all(isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535 for p in value):
        raise _Bad("ports: not a list of ports")
    return frozenset(value)


def _document(text: str, kind: str) -> dict:
    if len(text.encode()) >= MAX_BYTES:
        raise _Bad(f"longer than {MAX_BYTES - 1} bytes")
    try:
        doc = json.loads(text)
    except ValueError:
        raise _Bad("not JSON") from None
    if not isinstance(doc, dict) or doc.get("tfcompose") != kind or doc.get("schema") != SCHEMA:
        raise _Bad(f"not a tfcompose {kind} (schema {SCHEMA})")
    return doc


def parse_lease(entry: Entry) -> Lease:
    doc = _document(entry.text, "lease")
    lease = Lease(id=_field(doc, "id", str, HEX16_RE), cluster=_field(doc, "cluster", str, NAME_RE),
                  host=_field(doc, "host", str, NAME_RE), run=_field(doc, "run", str, RUN_RE),
                  user=_field(doc, "user", str, USER_RE), launcher=_field(doc, "launcher", str, LAUNCHER_RE),
                  session=_field(doc, "session", str, HEX16_RE), since=_time(doc, "since"), gpus=_gpus(doc),
                  ports=_ports(doc), uid=entry.uid, owner=entry.owner, file=entry.name, text=entry.text)
    if entry.name != lease_file(lease.cluster, lease.host, entry.uid):
        raise _Bad("its name does not match its cluster, host and owner")
    return lease


def parse_ticket(entry: Entry) -> Ticket:
    doc = _document(entry.text, "ticket")
    ticket = Ticket(key=_field(doc, "key", str, KEY_RE), cluster=_field(doc, "cluster", str, NAME_RE),
                    host=_field(doc, "host", str, NAME_RE), user=_field(doc, "user", str, USER_RE),
                    launcher=_field(doc, "launcher", str, LAUNCHER_RE), session=_field(doc, "session", str, HEX16_RE),
                    since=_time(doc, "since"), gpus=_gpus(doc), ports=_ports(doc), uid=entry.uid,
                    owner=entry.owner, file=entry.name)
    if entry.name != ticket_file(ticket.key, ticket.host):
        raise _Bad("its name does not match its key and host")
    return ticket


def parse_tombstone(entry: Entry) -> Tombstone:
    doc = _document(entry.text, "broken")
    stone = Tombstone(lease=_field(doc, "lease", str, HEX16_RE), by=_field(doc, "by", str, USER_RE),
                      launcher=_field(doc, "launcher", str, LAUNCHER_RE), at=_time(doc, "at"), uid=entry.uid,
                      file=entry.name)
    if entry.name != tombstone_file(stone.lease, entry.uid):
        raise _Bad("its name does not match the lease it breaks")
    return stone


PARSERS = {".lease": parse_lease, ".ticket": parse_ticket, ".broken": parse_tombstone}


def parse_entry(entry: Entry) -> Document:
    """The document a listed file holds, or Unreadable saying why not."""
    parser = next((p for suffix, p in PARSERS.items() if entry.name.endswith(suffix)), None)
    if parser is None:
        return Unreadable(entry.name, entry.owner, "not a lease, ticket or tombstone")
    try:
        return parser(entry)
    except _Bad as exc:
        return Unreadable(entry.name, entry.owner, str(exc))
