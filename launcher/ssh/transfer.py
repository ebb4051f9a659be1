"""File transfers over a Connection's SFTP channel (after fabric's transfer.py).

Uploads land under a temporary name and are renamed, so a host never sees half a file under its
final name. Downloads are hostile input: only regular files and folders are copied, each name is
checked, depth and count are bounded, and each file is written as launcher/runfiles.py writes a
run folder's files (a fresh name made exclusively in its folder, then renamed; no folder on the
way a link): nothing is ever written outside the destination, nor through a link in it.

Every SFTP call is bounded: the channel is opened and the subsystem started under the connect
timeout, and each read waits at most the command timeout (Connection.sftp), so a host whose SFTP
server never answers, or stops midway, fails its step instead of holding it for ever.
"""
from __future__ import annotations

import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from launcher import runfiles
from launcher.errors import RemoteError

MAX_DEPTH = 32
MAX_FILES = 100_000


def put_text(conn, text: str, remote: str, mode: int = 0o600) -> int:
    """Write a file atomically (temp name, then rename); private by default: it may hold env values."""
    data = text.encode()
    tmp = f"{remote}.tfc-tmp"
    try:
        with conn.sftp.open(tmp, "wb") as fh:
            fh.chmod(mode)
            fh.write(data)
        conn.sftp.posix_rename(tmp, remote)
    except (socket.timeout, TimeoutError) as exc:
        raise conn.sftp_lost(f"writing {remote}") from exc
    conn.bytes_sent += len(data)
    return len(data)


def safe_name(name: str) -> bool:
    """A single path component that cannot climb out, hide control characters or be empty."""
    return (0 < len(name) <= 255 and name not in (".", "..") and "/" not in name and "\\" not in name
            and not any(ord(c) < 32 or ord(c) == 127 for c in name))


@dataclass
class TreeCopy:
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # why each entry was left behind


def get_tree(conn, remote: str, local: Path, root: Optional[Path] = None) -> TreeCopy:
    """Copy a remote folder into `local` (made, a real folder); `root`: the folder above it from
    which no link is followed (the run folder; default `local` itself)."""
    copy = TreeCopy()
    root = Path(local) if root is None else Path(root)
    _copy_dir(conn, remote, root, Path(local).relative_to(root), 0, copy)
    return copy


def _copy_dir(conn, remote: str, root: Path, rel: Path, depth: int, copy: TreeCopy) -> None:
    if depth > MAX_DEPTH:
        copy.skipped.append(f"{remote}: nested deeper than {MAX_DEPTH} folders")
        return
    try:
        entries = _listing(conn, remote, copy)
    except (socket.timeout, TimeoutError) as exc:
        raise conn.sftp_lost(f"listing {remote}") from exc
    except OSError as exc:
        raise RemoteError(conn.host.name, reason=f"cannot list {remote} ({exc.strerror or exc})") from None
    runfiles.make_folder(root, rel)             # a link in place of the folder: refused (RunFileError)
    for entry in sorted(entries, key=lambda e: e.filename):
        if len(copy.files) >= MAX_FILES:
            copy.skipped.append(f"{remote}: more than {MAX_FILES} files")
            return
        src = f"{remote}/{entry.filename}"
        try:
            if not safe_name(entry.filename):
                copy.skipped.append(f"{src!r}: not a plain file name")
            elif stat.S_ISDIR(entry.st_mode or 0):
                _copy_dir(conn, src, root, rel / entry.filename, depth + 1, copy)
            elif stat.S_ISREG(entry.st_mode or 0):
                copy.files.append(_get_file(conn, src, root, rel / entry.filename))
            else:
                copy.skipped.append(f"{src}: not a regular file (a link, FIFO or device)")
        except runfiles.RunFileError as exc:        # what is here already is not ours to replace
            copy.skipped.append(f"{src}: not copied: {exc.line}")


def _listing(conn, remote: str, copy: TreeCopy) -> list:
    """The folder's entries. SFTP gives none at all when one name is not UTF-8: then the folder is
    listed by name, and only the names that are not text are left behind (each said)."""
    try:
        return conn.sftp.listdir_attr(remote)
    except UnicodeDecodeError:
        pass
    names = conn.run(["ls", "-A1", "--", remote]).stdout.splitlines()
    entries = []
    for name in names:
        if "\ufffd" in name:
            copy.skipped.append(f"{remote}/{name.encode('ascii', 'backslashreplace').decode()}: a file name that "
                                "is not UTF-8")
            continue
        attr = conn.sftp.lstat(f"{remote}/{name}")
        attr.filename = name
        entries.append(attr)
    return entries


def _get_file(conn, remote: str, root: Path, rel: Path) -> Path:
    """One file, written under a fresh name beside its final one and renamed (runfiles.writer); a
    large file stops when its work is called off."""
    try:
        with runfiles.writer(root, rel) as out:
            conn.sftp.getfo(remote, out, callback=conn.check_cancel)
    except (socket.timeout, TimeoutError) as exc:
        raise conn.sftp_lost(f"reading {remote}") from exc
    return root / rel


def get_file(conn, remote: str, local: Path) -> Path:
    """One file into `local` (its folder the user's: a link there is followed, a link at `local`
    itself replaced)."""
    local = Path(local)
    local.parent.mkdir(parents=True, exist_ok=True)
    return _get_file(conn, remote, local.parent, Path(local.name))


def counted(conn, chunks: Iterator[bytes], total: int, on_bytes: Callable[[int, int], None]) -> Iterator[bytes]:
    """The chunks, telling `on_bytes(done, total)` what has gone over `conn` since the first."""
    before = conn.bytes_sent
    for chunk in chunks:
        yield chunk
        on_bytes(conn.bytes_sent - before, total)
