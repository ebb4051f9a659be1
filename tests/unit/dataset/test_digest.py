"""The manifest (dataset/digest.py): sizes, hashes, the cache."""
from __future__ import annotations

import os
from launcher.dataset import digest as dd
from support.builders import make_source


def test_manifest_lists_size_and_hash_and_skips_its_own_marker_and_half_arrived_files(tmp_path):
    root = make_source(tmp_path / "d")
    (root / dd.MARKER).write_text("")
    (root / "train" / "CN" / ("x.png" + dd.PART)).write_bytes(b"half")
    doc = dd.manifest(str(root))
    assert sorted(doc["files"]) == ["train/AD/b.png", "train/CN/a.png", "val/CN/c.png"]
    assert doc["files"]["val/CN/c.png"][0] == 1 and len(doc["files"]["val/CN/c.png"][1]) == 64


def test_the_cache_spares_rereading_unchanged_files_but_not_a_replaced_one(tmp_path, monkeypatch):
    root, cache = make_source(tmp_path / "d"), tmp_path / "cache.json"
    first = dd.manifest(str(root), str(cache))
    read = []
    real = dd._hash
    monkeypatch.setattr(dd, "_hash", lambda path: read.append(path) or real(path))
    assert dd.manifest(str(root), str(cache)) == first and read == []
    stat = (root / "val/CN/c.png").stat()
    (root / "new").write_bytes(b"z")  # same size, same mtime, new inode: a sync's rename
    os.utime(root / "new", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(root / "new", root / "val/CN/c.png")
    again = dd.manifest(str(root), str(cache))
    assert read == [str(root / "val/CN/c.png")] and again["files"]["val/CN/c.png"] != first["files"]["val/CN/c.png"]
