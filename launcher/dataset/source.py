"""The dataset on this machine (`dataset_source`): whether it can be copied exactly (checked by
`validate`, no file read) and its manifest (every file hashed once, cached per file)."""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Optional

from launcher.dataset import digest as dd
from launcher.errors import InventoryError
from launcher.files import cache_root

SHOWN = 5                       # problems named at once
NAME_MAX = 255                  # bytes in one file name on the hosts' file systems


def source_problems(root: Path) -> list[str]:
    """What makes a folder unfit to be copied exactly: said per path, cheaply (no file is read)."""
    if not root.is_dir():
        return [f"{root}: not an existing folder"]
    problems, classes = [], 0
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: problems.append(f"{e.filename}: cannot be read")):
        here = Path(dirpath)
        if here != root and not dirnames and not filenames:
            problems.append(f"{here}: empty folder (a class without images)")
        classes += here != root and bool(filenames)
        for name in dirnames + filenames:
            problems += _entry_problems(root, here / name, name)
        if len(problems) > 20:
            break
    if not problems and classes == 0:
        problems.append(f"{root}: no class folders with files (expected <class>/<image> inside)")
    return problems


def _entry_problems(root: Path, path: Path, name: str) -> list[str]:
    shown = repr(str(path))[1:-1]       # a name that is not text is shown escaped, never raw
    if any(ord(c) < 32 or ord(c) == 127 for c in name) or name.endswith(dd.PART) or name == dd.MARKER:
        return [f"{shown}: a name tfcompose cannot copy safely (control characters or its own temporary names)"]
    if not _is_text(name):
        return [f"{shown}: a name that is not UTF-8 text (the hosts and the manifest name files as text)"]
    if len((name + dd.PART).encode()) > NAME_MAX:
        return [f"{shown}: a name too long to copy (with the temporary suffix it would pass {NAME_MAX} bytes)"]
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):         # a loop, or a link to nothing
            return [f"{shown}: a symlink that loops or points at nothing"]
        if not target.is_relative_to(root.resolve()) or not target.is_file():
            return [f"{shown}: a symlink that leaves the folder or points at no file"]
    elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return [f"{path}: neither a file nor a folder"]
    if not os.access(path, os.R_OK):
        return [f"{shown}: cannot be read"]
    return []


def _is_text(name: str) -> bool:
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:           # os.walk gives undecodable bytes as surrogates
        return False


def source_manifest(root: Optional[Path], inventory: Path) -> Optional[dict]:
    """The manifest of the dataset_source folder `root` (cached per file), or None without one.
    Bad input → exit 2, naming the inventory file and the field."""
    if root is None:
        return None
    problems = source_problems(root)
    if not problems:
        doc = dd.manifest(str(root.resolve()), _local_cache(root), follow_file_links=True)
        problems = [f"{root / rel}: cannot be read" for rel in doc["unreadable"]]
    if problems:
        raise InventoryError([f"{inventory}: dataset_source: {p}" for p in problems[:SHOWN]])
    return doc


def _local_cache(root: Path) -> Optional[str]:
    """The per-file hash cache for this source; None (hash without one) where it cannot be kept."""
    path = cache_root() / "datasets" / (hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:24] + ".json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(path)
