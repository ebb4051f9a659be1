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
    if any(ord(c) < 32 or ord(c) == 127 for c in name) or name.endswith(dd.PART) or name == dd.MARKER:
        return [f"{path}: a name tfcompose cannot copy safely (control characters or its own temporary names)"]
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        target = path.resolve()
        if not target.is_relative_to(root.resolve()) or not target.is_file():
            return [f"{path}: a symlink that leaves the folder or points at no file"]
    elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return [f"{path}: neither a file nor a folder"]
    if not os.access(path, os.R_OK):
        return [f"{path}: cannot be read"]
    return []


def source_manifest(root: Optional[Path], inventory: Path) -> Optional[dict]:
    """The manifest of the dataset_source folder `root` (cached per file), or None without one.
    Bad input → exit 2, naming the inventory file and the field."""
    if root is None:
        return None
    problems = source_problems(root)
    if not problems:
        cache = _local_cache(root)
        cache.parent.mkdir(parents=True, exist_ok=True)
        doc = dd.manifest(str(root.resolve()), str(cache), follow_file_links=True)
        problems = [f"{root / rel}: cannot be read" for rel in doc["unreadable"]]
    if problems:
        raise InventoryError([f"{inventory}: dataset_source: {p}" for p in problems[:SHOWN]])
    return doc


def _local_cache(root: Path) -> Path:
    return cache_root() / "datasets" / (hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24] + ".json")
