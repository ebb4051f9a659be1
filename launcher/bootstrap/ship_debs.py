"""An offline bundle's .deb files sent to the host (was in offline.py), as an image's layers go
(image/ship.py): the host says what it holds, and only the rest is sent, file by file, each appended
to a part file renamed once whole and checked against its SHA-256 (a cut transfer resumes where it
stopped, to the byte); progress through the Reporter. Hosts are sent their files at once, each file
read from this machine's disk once for all of them (OneRead)."""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

from launcher.bootstrap import commands
from launcher.bootstrap.offline import Deb
from launcher.errors import RemoteError
from launcher.files import CHUNK


@dataclass(frozen=True)
class Shipped:
    files: int          # files sent (some perhaps in part)
    bytes: int          # bytes sent
    held: int           # files the host held already


def present(conn, stage: str, debs: Sequence[Deb]) -> tuple[set[str], dict[str, int]]:
    """The files the host holds whole (by SHA-256), and the part files a cut transfer left (by size)."""
    result = conn.run(commands.debs_present(stage, [d.name for d in debs]), limit=1 << 20)
    by_name = {d.name: d for d in debs}
    whole, parts = set(), {}
    for line in result.stdout.splitlines():
        words = line.split()
        if len(words) == 2 and words[1] in by_name and words[0] == by_name[words[1]].sha256:
            whole.add(words[1])
        elif len(words) == 3 and words[0] == "part" and words[1].isdigit() and words[2] in by_name \
                and int(words[1]) < by_name[words[2]].size:
            parts[words[2]] = int(words[1])
    return whole, parts


class OneRead:
    """The .deb files read from this machine's disk once for all the hosts they go to at once (a home
    folder on NFS, a laptop's slow disk): a chunk read for the host ahead is kept for the hosts behind
    until each has taken it or left the file. At most `cap` bytes are kept (past that, a host reads
    for itself), none once the bootstrap has ended. `takers`: each file once per host sent it."""

    def __init__(self, takers: Iterable[Path] = (), cap: int = 256 << 20):
        self._takers = Counter(takers)             # file -> hosts still to be sent it from its start
        self._kept: dict[tuple[Path, int], list] = {}     # (file, offset) -> [chunk, hosts still to take it]
        self._cap, self._lock = cap, threading.Lock()
        self.held = 0                              # bytes kept now
        self.disk_reads = 0                        # chunks read from the disk

    def chunks(self, path: Path, offset: int = 0) -> Iterator[bytes]:
        """The file from `offset` on; from the start, shared with the other hosts sent it. Close
        it when done (also when the transfer was cut short)."""
        if offset:
            self.leave(path)                       # a resumed part: this host reads its own rest
            return _chunks(path, offset)
        return _Shared(self, path)

    def leave(self, path: Path, offset: int = 0) -> None:
        """One host done with the file (sent it, holds it, or stopped at `offset`): it takes no
        chunk from there on."""
        with self._lock:
            self._takers[path] -= 1
            for key in [k for k in self._kept if k[0] == path and k[1] >= offset]:
                self._taken(key)

    def chunk_at(self, fh, path: Path, offset: int) -> bytes:
        with self._lock:                           # one host reads a chunk; the others wait for it
            if (path, offset) in self._kept:
                return self._taken((path, offset))
            fh.seek(offset)
            chunk = fh.read(CHUNK)
            self.disk_reads += bool(chunk)
            if chunk and self._takers[path] > 1 and self.held + len(chunk) <= self._cap:
                self._kept[(path, offset)] = [chunk, self._takers[path] - 1]
                self.held += len(chunk)
            return chunk

    def _taken(self, key: tuple[Path, int]) -> bytes:
        kept = self._kept[key]
        kept[1] -= 1
        if kept[1] <= 0:
            del self._kept[key]
            self.held -= len(kept[0])
        return kept[0]


class _Shared:
    """One host's pass through a file a OneRead shares; closed, the host leaves the file."""

    def __init__(self, reads: OneRead, path: Path):
        self.reads, self.path, self.offset, self.closed = reads, path, 0, False
        self.fh = None

    def __iter__(self) -> "_Shared":
        return self

    def __next__(self) -> bytes:
        if self.closed:
            raise StopIteration
        self.fh = self.fh or self.path.open("rb")
        chunk = self.reads.chunk_at(self.fh, self.path, self.offset)
        if not chunk:
            self.close()
            raise StopIteration
        self.offset += len(chunk)
        return chunk

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.reads.leave(self.path, self.offset)
            if self.fh:
                self.fh.close()


def ship(conn, stage: str, debs: Sequence[Deb], on_bytes: Callable[[int, int], None] = lambda done, total: None,
         reads: Optional[OneRead] = None) -> Shipped:
    """Send the files the host lacks (resuming part files); each is checked on the host. With
    `reads`, each file's bytes are those read once for every host sent it."""
    reads = reads or OneRead(d.path for d in debs)
    whole, parts = present(conn, stage, debs)
    todo = [d for d in debs if d.name not in whole]
    for deb in debs:
        if deb.name in whole:
            reads.leave(deb.path)
    total = sum(d.size - parts.get(d.name, 0) for d in todo)
    before = conn.bytes_sent

    def counted(chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            yield chunk
            on_bytes(conn.bytes_sent - before, total)
    for i, deb in enumerate(todo):
        try:
            _send(conn, stage, deb, parts.get(deb.name, 0), reads, counted)
        except BaseException:
            for later in todo[i + 1:]:
                reads.leave(later.path)         # the other hosts keep nothing more for this one
            raise
    return Shipped(len(todo), conn.bytes_sent - before, len(whole))


def _send(conn, stage: str, deb: Deb, offset: int, reads: OneRead, counted) -> None:
    chunks = reads.chunks(deb.path, offset)
    try:
        conn.stream(commands.receive_deb(stage, deb.name, deb.sha256, offset), on_output=lambda _: None,
                    stdin_chunks=counted(chunks))
    except RemoteError as exc:
        if not (exc.status in (3, 4) and offset):
            raise
        # the part was not what we thought: once more from the start
        conn.stream(commands.receive_deb(stage, deb.name, deb.sha256, 0), on_output=lambda _: None,
                    stdin_chunks=counted(_chunks(deb.path, 0)))
    finally:
        chunks.close()


def _chunks(path: Path, offset: int) -> Iterator[bytes]:
    with path.open("rb") as fh:
        fh.seek(offset)
        while chunk := fh.read(CHUNK):
            yield chunk
