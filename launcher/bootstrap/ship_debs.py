"""An offline bundle's .deb files sent to the host (was in offline.py), as an image's layers go
(image/ship.py): the host says what it holds, and only the rest is sent, file by file, each appended
to a part file renamed once whole and checked against its SHA-256 (a cut transfer resumes where it
stopped, to the byte); progress through the Reporter."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

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


def ship(conn, stage: str, debs: Sequence[Deb], on_bytes: Callable[[int, int], None] = lambda done, total: None) -> Shipped:
    """Send the files the host lacks (resuming part files); each is checked on the host."""
    whole, parts = present(conn, stage, debs)
    todo = [d for d in debs if d.name not in whole]
    total = sum(d.size - parts.get(d.name, 0) for d in todo)
    before = conn.bytes_sent
    for deb in todo:
        offset = parts.get(deb.name, 0)
        try:
            conn.stream(commands.receive_deb(stage, deb.name, deb.sha256, offset), on_output=lambda _: None,
                        stdin_chunks=_counted(conn, _chunks(deb.path, offset), before, total, on_bytes))
        except RemoteError as exc:
            if exc.status in (3, 4) and offset:     # the part was not what we thought: once more from the start
                conn.stream(commands.receive_deb(stage, deb.name, deb.sha256, 0), on_output=lambda _: None,
                            stdin_chunks=_counted(conn, _chunks(deb.path, 0), before, total, on_bytes))
            else:
                raise
    return Shipped(len(todo), conn.bytes_sent - before, len(whole))


def _chunks(path: Path, offset: int) -> Iterator[bytes]:
    with path.open("rb") as fh:
        fh.seek(offset)
        while chunk := fh.read(CHUNK):
            yield chunk


def _counted(conn, chunks: Iterator[bytes], before: int, total: int, on_bytes) -> Iterator[bytes]:
    for chunk in chunks:
        yield chunk
        on_bytes(conn.bytes_sent - before, total)
