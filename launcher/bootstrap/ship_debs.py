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
    folder on NFS, a laptop's slow disk): a chunk read by the host furthest on in a file is kept for
    the hosts behind until each has taken it or left the file. At most `cap` bytes are kept (past
    that, a host reads for itself). Each host takes part through its Taker, which leaves every file
    it has not left yet when closed, so nothing is kept for a host that failed or is done."""

    def __init__(self, cap: int = 256 << 20):
        self._takers: Counter = Counter()          # file -> hosts still to be sent it from its start
        self._kept: dict[tuple[Path, int], list] = {}     # (file, offset) -> [chunk, hosts still to take it]
        self._front: dict[Path, int] = {}          # file -> the furthest offset read from the disk
        self._files: dict[Path, threading.Lock] = {}      # one read of a file at a time, each file apart
        self._cap, self._lock = cap, threading.Lock()
        self.held = 0                              # bytes kept now
        self.disk_reads = 0                        # chunks read from the disk for hosts sent a file whole

    def taker(self, paths: Iterable[Path]) -> "Taker":
        """One host's part: the files it may be sent (once each)."""
        paths = set(paths)
        with self._lock:
            self._takers.update(paths)
            for path in paths:
                self._files.setdefault(path, threading.Lock())
        return Taker(self, paths)

    def _leave(self, path: Path, offset: int) -> None:
        with self._lock:
            self._takers[path] -= 1
            for key in [k for k in self._kept if k[0] == path and k[1] >= offset]:
                self._taken(key)

    def chunk_at(self, fh, path: Path, offset: int) -> bytes:
        """The chunk at `offset`: kept by a host ahead, else read here (and kept for those behind)."""
        with self._files[path]:                    # a host behind waits for the read of the host ahead
            with self._lock:
                if (path, offset) in self._kept:
                    return self._taken((path, offset))
            fh.seek(offset)
            chunk = fh.read(CHUNK)
            with self._lock:
                self.disk_reads += bool(chunk)
                ahead = offset >= self._front.get(path, 0)      # no other host is past it: all are behind
                self._front[path] = max(self._front.get(path, 0), offset + len(chunk))
                if chunk and ahead and self._takers[path] > 1 and self.held + len(chunk) <= self._cap:
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


class Taker:
    """One host's part in a OneRead: each of its files left once (sent, held already, resumed from a
    part, or cut short); `close` leaves the rest."""

    def __init__(self, reads: OneRead, paths: set[Path]):
        self.reads, self._open = reads, set(paths)

    def __enter__(self) -> "Taker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def chunks(self, path: Path, offset: int = 0) -> Iterator[bytes]:
        """The file from `offset` on; from the start, shared with the other hosts sent it. Close
        the iterator when done (also when the transfer was cut short)."""
        if offset or path not in self._open:
            self.leave(path)                       # a resumed part: this host reads its own rest
            return _chunks(path, offset)
        return _Shared(self, path)

    def leave(self, path: Path, offset: int = 0) -> None:
        """Done with the file, having taken it up to `offset`: nothing is kept for it from there on."""
        if path in self._open:
            self._open.discard(path)
            self.reads._leave(path, offset)

    def close(self) -> None:
        for path in list(self._open):
            self.leave(path)


def takers(files: dict[str, Iterable[Path]], cap: int = 256 << 20) -> dict[str, Taker]:
    """Each host's part in one OneRead (host name → the files it may be sent), all made before any
    host starts, so a chunk read first is kept for every host behind."""
    reads = OneRead(cap)
    return {name: reads.taker(paths) for name, paths in files.items()}


class _Shared:
    """One host's pass through a file a OneRead shares; closed, the host leaves the file."""

    def __init__(self, taker: Taker, path: Path):
        self.taker, self.path, self.offset, self.closed = taker, path, 0, False
        self.fh = None

    def __iter__(self) -> "_Shared":
        return self

    def __next__(self) -> bytes:
        if self.closed:
            raise StopIteration
        self.fh = self.fh or self.path.open("rb")
        chunk = self.taker.reads.chunk_at(self.fh, self.path, self.offset)
        if not chunk:
            self.close()
            raise StopIteration
        self.offset += len(chunk)
        return chunk

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.taker.leave(self.path, self.offset)
            if self.fh:
                self.fh.close()


def ship(conn, stage: str, debs: Sequence[Deb], on_bytes: Callable[[int, int], None] = lambda done, total: None,
         taker: Optional[Taker] = None) -> Shipped:
    """Send the files the host lacks (resuming part files); each is checked on the host. With a
    `taker`, each file's bytes are those read once for every host sent it."""
    with taker or OneRead().taker(d.path for d in debs) as taker:
        whole, parts = present(conn, stage, debs)
        todo = [d for d in debs if d.name not in whole]
        for deb in debs:
            if deb.name in whole:
                taker.leave(deb.path)
        total = sum(d.size - parts.get(d.name, 0) for d in todo)
        before = conn.bytes_sent

        def counted(chunks: Iterator[bytes]) -> Iterator[bytes]:
            for chunk in chunks:
                yield chunk
                on_bytes(conn.bytes_sent - before, total)
        for deb in todo:
            _send(conn, stage, deb, parts.get(deb.name, 0), taker, counted)
        return Shipped(len(todo), conn.bytes_sent - before, len(whole))


def _send(conn, stage: str, deb: Deb, offset: int, taker: Taker, counted) -> None:
    chunks = taker.chunks(deb.path, offset)
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
