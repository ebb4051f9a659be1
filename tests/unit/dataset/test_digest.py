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


def test_a_cache_entry_that_is_not_exactly_one_it_wrote_is_a_miss(tmp_path, monkeypatch):
    # A wrong digest in the cache once failed every later `up` as "changed val/CN/c.png" on every
    # host, never naming the cache: an entry edited, cut or from another version is hashed again.
    import json
    root, cache = make_source(tmp_path / "d"), tmp_path / "cache.json"
    truth = dd.manifest(str(root), str(cache))
    entries = json.loads(cache.read_text())
    wrong = "0" * 64
    edits = {"an edited digest": lambda e: e[:4] + [wrong] + e[5:],
             "an old five-field entry": lambda e: e[:4] + [wrong],
             "a digest that is no SHA-256": lambda e: e[:4] + [12345, e[5]],
             "a cut entry": lambda e: e[:3],
             "no list at all": lambda e: "x"}
    real, read = dd._hash, []
    monkeypatch.setattr(dd, "_hash", lambda path: read.append(path) or real(path))
    for what, edit in edits.items():
        bad = dict(entries, **{"val/CN/c.png": edit(entries["val/CN/c.png"])})
        cache.write_text(json.dumps(bad))
        read.clear()
        assert dd.manifest(str(root), str(cache)) == truth, what
        assert read == [str(root / "val/CN/c.png")], what            # that file alone is read again
        assert json.loads(cache.read_text()) == entries, what        # and the cache is right again
    cache.write_text(json.dumps({**entries, "val/CN/c.png": entries["train/CN/a.png"]}))   # another file's entry
    read.clear()
    assert dd.manifest(str(root), str(cache)) == truth and str(root / "val/CN/c.png") in read
