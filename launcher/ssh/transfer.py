"""File transfers over a Connection's SFTP channel (after fabric's transfer.py).

Uploads land under a temporary name and are renamed, so a host never sees half a file under its
final name. Downloads are hostile input: only regular files and folders are copied, each name is
checked, depth and count are bounded, and each file is written under a temporary name inside
the destination folder and renamed; nothing is ever written outside that folder.
"""
from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from launcher.errors import RemoteError
from launcher.files import PART

MAX_DEPTH = 32
MAX_FILES = 100_000


def put_text(conn, text: str, remote: str, mode: int = 0o600) -> int:
    """Write a file atomically (temp name, then rename); private by default: it may hold env values."""
    data = text.encode()
    tmp = f"{remote}.tfc-tmp"
    with conn.sftp.open(tmp, "wb") as fh:
        fh.chmod(mode)
        fh.write(data)
    conn.sftp.posix_rename(tmp, remote)
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


def get_tree(conn, remote: str, local: Path) -> TreeCopy:
    """Copy a remote folder into `local`, which must not exist as anything but a folder."""
    copy = TreeCopy()
    _copy_dir(conn, remote, Path(local), 0, copy)
    return copy


def _copy_dir(conn, remote: str, local: Path, depth: int, copy: TreeCopy) -> None:
    if depth > MAX_DEPTH:
        copy.skipped.append(f"{remote}: nested deeper than {MAX_DEPTH} folders")
        return
    try:
        entries = _listing(conn, remote, copy)
    except OSError as exc:
        raise RemoteError(conn.host.name, reason=f"cannot list {remote} ({exc.strerror or exc})") from None
    _ensure_dir(local)
    for entry in sorted(entries, key=lambda e: e.filename):
        if len(copy.files) >= MAX_FILES:
            copy.skipped.append(f"{remote}: more than {MAX_FILES} files")
            return
        src = f"{remote}/{entry.filename}"
        if not safe_name(entry.filename):
            copy.skipped.append(f"{src!r}: not a plain file name")
        elif stat.S_ISDIR(entry.st_mode or 0):
            _copy_dir(conn, src, local / entry.filename, depth + 1, copy)
        elif stat.S_ISREG(entry.st_mode or 0):
            copy.files.append(_get_file(conn, src, local / entry.filename))
        else:
            copy.skipped.append(f"{src}: not a regular file (a link, FIFO or device)")


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


def _ensure_dir(path: Path) -> None:
    """A real folder (a link or file in its place is replaced: it is ours to write)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)


def _get_file(conn, remote: str, local: Path) -> Path:
    tmp = local.with_name(f".{local.name}{PART}")
    conn.sftp.get(remote, str(tmp), callback=conn.check_cancel)   # a large file stops when its work is called off
    if local.is_dir() and not local.is_symlink():
        shutil.rmtree(local)
    os.replace(tmp, local)   # replaces a link itself, never what it points to
    return local


def get_file(conn, remote: str, local: Path) -> Path:
    _ensure_dir(local.parent)
    return _get_file(conn, remote, local)


def counted(conn, chunks: Iterator[bytes], total: int, on_bytes: Callable[[int, int], None]) -> Iterator[bytes]:
    """The chunks, telling `on_bytes(done, total)` what has gone over `conn` since the first."""
    before = conn.bytes_sent
    for chunk in chunks:
        yield chunk
        on_bytes(conn.bytes_sent - before, total)
