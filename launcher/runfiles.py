"""Files inside a run folder (runs/<cluster>/<run>/, runs/local): the one way tfcompose reads and
writes them, and the owner of what a run folder's names may be.

A run folder holds what hosts sent and whatever anyone who can write there put, so:
- every name beneath the run folder is opened without following a link (O_NOFOLLOW), each folder
  on the way too (opened from the one above it), so a link at `logs/` or `history/` leads nowhere;
- only regular files are read: a FIFO would block its reader for ever, a device would answer
  anything; either is refused naming what it is (`RunFileError`), before it is opened when it can
  be, and opened non-blocking when it is swapped in after that look;
- a write goes to a fresh name made exclusively (O_EXCL, O_NOFOLLOW) in the same folder, then
  renamed over the final name: a link or FIFO there is replaced, never written through;
- a folder made beneath the run folder is a real folder, and a link in place of one is refused;
- files are made 0666 less the umask, as any program's `open` makes them (a run's report is the
  user's to share or not), unless a mode is asked for.

The run folder itself may be reached through links (`runs/<cluster>/latest` is one): it is the
user's choice of where to look. What is beneath it is not.
"""
from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import IO, Iterator, Optional

PART = ".tfc-part"              # the suffix of a file still being written
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
COPY_CHUNK = 1 << 20


class RunFileError(OSError):
    """A name in a run folder is not what tfcompose reads or writes there (a link, a FIFO, a device,
    a folder where a file belongs, a file too large): refused, naming the path and what it is."""

    def __init__(self, path, found: str, expected: str = "a regular file"):
        self.found, self.expected = found, expected
        super().__init__(errno.EINVAL, f"{found}, not {expected}", str(path))

    @property
    def line(self) -> str:
        return (f"{self.filename}: Received {self.found}. Expected {self.expected} (tfcompose follows no link, and reads "
                "no FIFO or device, beneath a run folder).")

    def __str__(self) -> str:
        return self.line


def kind(mode: int) -> str:
    """What a file's mode says it is, as a person names it."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "an unknown kind of file"


def _parts(rel: str | os.PathLike) -> list[str]:
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    if any(p in ("..", "/") or "/" in p for p in parts) or Path(rel).is_absolute():
        raise RunFileError(rel, "a path that leaves the run folder", "a path inside it")
    return parts


@contextlib.contextmanager
def _folder(root: Path, parts: list[str], create: bool) -> Iterator[int]:
    """An fd of root/parts…, each part a real folder (made when `create`), never a link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        where = Path(root)
        for part in parts:
            where = where / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                inner = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise RunFileError(where, kind(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode),
                                       "a folder") from None
                raise
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def found(root: Path, rel: str | os.PathLike) -> Optional[str]:
    """What is at root/rel (`kind`), without following a link there; None: nothing. A link or a
    file in place of a folder on the way is a RunFileError."""
    parts = _parts(rel)
    try:
        with _folder(Path(root), parts[:-1], create=False) as fd:
            return kind(os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


def is_file(root: Path, rel: str | os.PathLike) -> bool:
    return found(root, rel) == "a regular file"


def is_folder(root: Path, rel: str | os.PathLike) -> bool:
    return found(root, rel) == "a folder"


@contextlib.contextmanager
def open_read(root: Path, rel: str | os.PathLike, limit: Optional[int] = None) -> Iterator[IO[bytes]]:
    """root/rel for reading: a regular file (at most `limit` bytes), or a RunFileError."""
    parts, path = _parts(rel), Path(root, *_parts(rel))
    with _folder(Path(root), parts[:-1], create=False) as dir_fd:
        mode = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode
        if not stat.S_ISREG(mode):      # said before it is opened: opening a device may do something
            raise RunFileError(path, kind(mode))
        try:
            fd = os.open(parts[-1], READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:        # a link swapped in since the look
                raise RunFileError(path, "a symbolic link") from None
            raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RunFileError(path, kind(st.st_mode))
        if limit is not None and st.st_size > limit:
            raise RunFileError(path, f"a file of {st.st_size:,} bytes", f"at most {limit:,} bytes")
        yield fh


def read_bytes(root: Path, rel: str | os.PathLike, limit: int) -> bytes:
    with open_read(root, rel, limit) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:           # it grew since it was looked at
        raise RunFileError(Path(root, *_parts(rel)), f"a file of more than {limit:,} bytes", f"at most {limit:,} bytes")
    return data


def read_text(root: Path, rel: str | os.PathLike, limit: int) -> str:
    """The file as UTF-8 text (a ValueError when it is not)."""
    return read_bytes(root, rel, limit).decode("utf-8")


def make_folder(root: Path, rel: str | os.PathLike) -> Path:
    """root/rel and each folder on the way made (or found) as a real folder; a link is refused."""
    with _folder(Path(root), _parts(rel), create=True):
        pass
    return Path(root, *_parts(rel))


def _new_file(dir_fd: int, name: str, mode: int) -> tuple[str, int]:
    """A fresh temporary name beside `name`, made exclusively (never an existing file or a link)."""
    for _ in range(100):
        tmp = f".{name[:200]}.{secrets.token_hex(6)}{PART}"
        try:
            return tmp, os.open(tmp, NEW_FLAGS, mode, dir_fd=dir_fd)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no fresh temporary name", name)


@contextlib.contextmanager
def writer(root: Path, rel: str | os.PathLike, mode: Optional[int] = None) -> Iterator[IO[bytes]]:
    """A binary file that appears at root/rel only once it is complete (and nothing on failure):
    written under a fresh name in the same folder, then renamed over whatever was there (a link or
    a FIFO is replaced itself; a folder there is refused). Made 0666 less the umask, or `mode`."""
    parts = _parts(rel)
    path = Path(root, *parts)
    with _folder(Path(root), parts[:-1], create=True) as dir_fd:
        tmp, fd = _new_file(dir_fd, parts[-1], 0o666 if mode is None else mode)
        try:
            with os.fdopen(fd, "wb") as out:
                yield out
            if mode is not None:
                os.chmod(tmp, mode, dir_fd=dir_fd)      # the umask may have taken bits asked for
            try:
                os.replace(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except IsADirectoryError:
                raise RunFileError(path, "a folder", "a file (or nothing) at that name") from None
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise


def write_bytes(root: Path, rel: str | os.PathLike, data: bytes, mode: Optional[int] = None) -> Path:
    with writer(root, rel, mode) as out:
        out.write(data)
    return Path(root, *_parts(rel))


def copy(root: Path, source: str | os.PathLike, target: str | os.PathLike) -> Path:
    """A regular file of the run folder copied to another name in it, streamed."""
    with open_read(root, source) as src, writer(root, target) as out:
        shutil.copyfileobj(src, out, COPY_CHUNK)
    return Path(root, *_parts(target))


def rename(root: Path, folder: str | os.PathLike, old: str, new: str) -> None:
    """old → new inside root/folder (a real folder); replaces a link at `new`, never follows one."""
    with _folder(Path(root), _parts(folder), create=False) as dir_fd:
        os.replace(old, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


@contextlib.contextmanager
def appender(root: Path, rel: str | os.PathLike) -> Iterator[IO[str]]:
    """root/rel opened to append text (made when missing): a regular file, never through a link."""
    parts = _parts(rel)
    path = Path(root, *parts)
    with _folder(Path(root), parts[:-1], create=True) as dir_fd:
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         0o666, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RunFileError(path, "a symbolic link") from None
            raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RunFileError(path, kind(st.st_mode))
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        yield fh


def listing(root: Path, rel: str | os.PathLike = "") -> list[tuple[str, str]]:
    """(name, kind) of each entry of root/rel, a real folder (none when it is missing)."""
    try:
        with _folder(Path(root), _parts(rel), create=False) as fd:
            names = os.listdir(fd)
            return sorted((n, kind(os.stat(n, dir_fd=fd, follow_symlinks=False).st_mode)) for n in names)
    except FileNotFoundError:
        return []


# --- the run folder's own files --------------------------------------------------------------------

RESULTS = "results.json"
MAX_RESULTS = 64 << 20          # a results.json of a search of 100,000 trials, with room


def load_results(run_dir: Path, folder: str = "") -> dict:
    """run_dir/folder/results.json read safely and checked by its owner (trainer/spec/results.py): the
    one way the launcher takes a results file in; every reader trusts what it returns."""
    from trainer.spec import results
    rel = Path(folder) / RESULTS
    path = Path(run_dir) / rel
    try:
        text = read_text(Path(run_dir), rel, MAX_RESULTS)
    except RunFileError as exc:
        raise results.ResultsError(exc.line) from None
    except UnicodeDecodeError:
        raise results.ResultsError(f"{path}: Received a file that is not UTF-8 text. Expected a tfcompose "
                                   "results.json.") from None
    except OSError as exc:
        raise results.ResultsError(f"{path}: cannot read results ({exc.strerror or exc}). Expected a run folder from "
                                   "`tfcompose collect` or the simulation's runs/local.") from None
    return results.parse(text, str(path))


def write_results(run_dir: Path, doc: dict, folder: str = "") -> Path:
    """results.json written whole, as its owner writes it (after its check)."""
    from trainer.spec import results, results_check
    results_check.check(doc, str(Path(run_dir) / folder / RESULTS))
    return write_bytes(Path(run_dir), Path(folder) / RESULTS, results.dumps(doc).encode())
