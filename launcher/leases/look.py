"""The host's answer to `look` (host.sh), read (was in files.py): the folder's owner and the
host's clock, which sessions are alive, a folder too crowded to list, and each file listed, its
content parsed by files.py (what cannot be read is `Unreadable`); and the fingerprint of what was
listed, which `change` checks on the host before it writes anything."""
from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field

from launcher.leases.files import (FILE_RE, HEX16_RE, USER_RE, Entry, Lease, Ticket, Tombstone, Unreadable,
                                   parse_entry)


@dataclass
class Folder:
    """One host's lease folder as `look` found it."""

    exists: bool = True
    uid: int = -1                  # the SSH user on that host
    user: str = ""
    now: int = 0                   # the host's clock
    clock_ms: int = 0              # the host's clock in ms (now × 1000 where `date` has no %N)
    crowded: list = field(default_factory=list)     # (kind, how many, whose most, how many of theirs)
    lines: list = field(default_factory=list)      # the entry lines as listed: what `fingerprint` covers
    leases: list = field(default_factory=list)
    tickets: list = field(default_factory=list)
    tombstones: list = field(default_factory=list)
    unreadable: list = field(default_factory=list)
    sessions: dict = field(default_factory=dict)    # session id → alive

    def alive(self, session: str) -> bool:
        return self.sessions.get(session, False)


MAX_LINES = 2048


def parse_look(text: str) -> Folder:
    """`look`'s lines into a Folder; a line that is not one `look` prints is skipped."""
    folder = Folder()
    for line in text.split("\n")[:MAX_LINES]:   # ASCII lines: no other line breaks to split on
        word, _, rest = line.partition(" ")
        if word == "dir" and rest == "absent":
            folder.exists = False
        elif word == "user":
            _user(folder, rest)
        elif word == "now" and rest.isdigit() and len(rest) < 13:
            folder.now = int(rest)
            folder.clock_ms = folder.clock_ms or folder.now * 1000
        elif word == "clock" and rest.isdigit() and len(rest) == 13:
            folder.clock_ms = int(rest)
        elif word == "crowded":
            _crowded(folder, rest)
        elif word == "session":
            sid, _, state = rest.partition(" ")
            if HEX16_RE.match(sid) and state in ("alive", "dead"):
                folder.sessions[sid] = state == "alive"
        elif word == "entry":
            folder.lines.append(line)
            _entry(folder, rest)
    return folder


def fingerprint(folder: Folder, skip: set[str]) -> str:
    """SHA-256 of the listed files but those named in `skip`, as host.sh's `printed`
    computes it: `change` applies nothing unless the host's files still give the same."""
    kept = [line for line in folder.lines if line.split(" ")[1:2] != [] and line.split(" ")[1] not in skip]
    return hashlib.sha256("".join(line + "\n" for line in kept).encode()).hexdigest()


def _crowded(folder: Folder, rest: str) -> None:
    """`crowded KIND COUNT [OWNER_COUNT OWNER]`: more files than `look` lists; it listed none."""
    parts = rest.split()
    if len(parts) >= 2 and parts[0] in ("lease", "session") and parts[1].isdigit():
        top = parts[2] if len(parts) > 2 and parts[2].isdigit() else "0"
        owner = parts[3] if len(parts) > 3 and USER_RE.match(parts[3]) else "?"
        folder.crowded.append((parts[0], int(parts[1][:9]), owner, int(top[:9])))


def _user(folder: Folder, rest: str) -> None:
    uid, _, name = rest.partition(" ")
    if uid.isdigit() and len(uid) < 11:
        folder.uid, folder.user = int(uid), name if USER_RE.match(name) else uid


def _entry(folder: Folder, rest: str) -> None:
    parts = rest.split(" ")
    if len(parts) not in (3, 4) or not FILE_RE.match(parts[0]) or not parts[1].isdigit() or len(parts[1]) > 10:
        return
    name, uid = parts[0], int(parts[1])
    owner = parts[2] if USER_RE.match(parts[2]) else f"uid {uid}"
    try:
        raw = base64.b64decode(parts[3] if len(parts) == 4 else "", validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        folder.unreadable.append(Unreadable(name, owner, "not UTF-8 text"))
        return
    doc = parse_entry(Entry(name, uid, owner, text))
    kind = {Lease: folder.leases, Ticket: folder.tickets, Tombstone: folder.tombstones, Unreadable: folder.unreadable}
    kind[type(doc)].append(doc)
