"""This machine's files: where the repository and the cache are, and the one way tfcompose writes
a file (a fresh temporary name in the same folder, then a rename: launcher/runfiles.py), so a
crash or a full disk never leaves half a file under a final name, and a link at the final name is
replaced, never written through."""
from __future__ import annotations

import contextlib
import os
import zlib
from pathlib import Path
from typing import IO, Iterator, Optional

from launcher import runfiles
from launcher.runfiles import PART  # noqa: F401  (the suffix of a file still being written)
from launcher.errors import BadInput

REPO = Path(__file__).resolve().parent.parent
CHUNK = 1 << 20                 # what is read, hashed, compressed or sent at a time


def cache_root() -> Path:
    """What can be made again (split layers, hash caches): safe to delete."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tfcompose"


def state_root() -> Path:
    """What this machine must remember (which data_dirs it filled): not a cache."""
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "tfcompose"


@contextlib.contextmanager
def atomic_writer(path: Path, mode: Optional[int] = None) -> Iterator[IO[bytes]]:
    """A binary file that appears at `path` only once it is complete (and nothing on failure);
    private (600) unless `mode` says otherwise: caches and state hold your code and your choices.
    A run folder's files, readable as the umask says, are written by launcher/runfiles.py."""
    path = Path(path)
    with runfiles.writer(path.parent, path.name, 0o600 if mode is None else mode) as out:
        yield out


def write_atomic(path: Path, data: bytes, mode: Optional[int] = None) -> Path:
    with atomic_writer(path, mode) as out:
        out.write(data)
    return Path(path)


def gzip_compressor():
    """gzip framing at the fast level: members concatenate into one valid gzip stream."""
    return zlib.compressobj(1, zlib.DEFLATED, 31)


def gzip_bytes(data: bytes) -> bytes:
    compressor = gzip_compressor()
    return compressor.compress(data) + compressor.flush()


def write_folder(folder: Path, files: dict[str, str], out_dir: Path) -> list[Path]:
    """Each file under a temporary name, then renamed: no half file under a final name; private
    (600), as on the hosts: a bundle may hold the values of `run.env`."""
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            written.append(write_atomic(folder / name, text.encode(), mode=0o600))
    except OSError as exc:
        raise BadInput(f"{out_dir}: cannot write {exc.filename or folder} ({exc.strerror or exc}). "
                       "Expected a folder you can write (--output).") from None
    return written
