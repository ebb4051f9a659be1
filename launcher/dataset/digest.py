"""The manifest of a dataset folder: every file's relative path, size and SHA-256, plus what is
not a plain file or folder. A per-file cache keyed by size and modification time means an
unchanged 100k-file dataset is not read again on every `up`.

A cache entry is used only when it is one this code wrote, for the file as it is now: its key
(size, mtime, inode, ctime) matches, its digest is a SHA-256, and its check (a hash over the name,
the key and the digest) agrees, so an entry edited, cut or written by another version is a miss and
the file is hashed again (a wrong digest once failed every later `up` as "changed" on every host,
never naming the cache).

Standard library only, no imports from tfcompose: this file is also sent, as it is, to every
host and run there by python3 (the host's, or the trainer image's), so the launcher and the hosts
compute the manifest with the same code. Owner of the manifest format.

    python3 dataset_digest.py ROOT [CACHE_FILE]   → one JSON object on stdout
"""
import hashlib
import json
import os
import stat
import sys
import tempfile

MARKER = ".tfcompose-dataset"   # written by the sync into a data_dir it owns; not part of the data
PART = ".tfcompose-part"        # a file still arriving; not part of the data
CHUNK = 1 << 20


def manifest(root, cache_path=None, follow_file_links=False, on_file=None):
    """{"files": {rel: [size, sha256]}, "other": [rel], "empty_dirs": [rel], "unreadable": [rel]}.
    follow_file_links: a symlink to a file counts as that file (the launcher's source, whose links
    were checked to stay inside it); on a host, a link is "other" and a copy does not hold one."""
    if not os.path.isdir(root):
        return {"missing": True, "files": {}, "other": [], "empty_dirs": [], "unreadable": []}
    cache, fresh = _load_cache(cache_path), {}
    doc = {"files": {}, "other": [], "empty_dirs": [], "unreadable": []}
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: doc["unreadable"].append(
            os.path.relpath(e.filename, root) if e.filename else ".")):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        if not dirnames and not filenames and rel_dir != ".":
            doc["empty_dirs"].append(rel_dir)
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            rel = name if rel_dir == "." else rel_dir + "/" + name
            if rel in (MARKER,) or name.endswith(PART):
                continue
            _add(doc, fresh, cache, os.path.join(dirpath, name), rel, follow_file_links)
            if on_file:
                on_file()
    if cache_path:
        _save_cache(cache_path, fresh)
    return doc


def _add(doc, fresh, cache, path, rel, follow):
    try:
        st = os.stat(path) if follow and os.path.isfile(path) else os.lstat(path)
    except OSError:
        doc["unreadable"].append(rel)
        return
    if not stat.S_ISREG(st.st_mode):
        doc["other"].append(rel)
        return
    # The inode and ctime too: a file replaced by a rename (as the sync does) is a new inode, even
    # when its size and mtime happen to equal the old one's.
    key = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
    digest = _cached(cache.get(rel), rel, key) or _hash(path)
    if digest is None:
        doc["unreadable"].append(rel)
        return
    fresh[rel] = key + [digest, _check(rel, key, digest)]
    doc["files"][rel] = [st.st_size, digest]


def _check(rel, key, digest):
    """What ties a cache entry to its name, key and digest: an entry edited by hand fails it."""
    text = json.dumps([rel, key, digest], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _cached(entry, rel, key):
    """The digest a cache entry gives for the file with this key; None (a miss) for any entry
    that is not exactly one this code wrote for the file as it is."""
    if not (isinstance(entry, list) and len(entry) == 6 and entry[:4] == key and isinstance(entry[4], str)
            and len(entry[4]) == 64 and all(c in "0123456789abcdef" for c in entry[4])):
        return None
    return entry[4] if entry[5] == _check(rel, key, entry[4]) else None


def _hash(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(CHUNK)
                if not chunk:
                    return h.hexdigest()
                h.update(chunk)
    except OSError:
        return None


def _load_cache(path):
    try:
        with open(path) as fh:
            doc = json.load(fh)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


def _save_cache(path, entries):
    """Atomically: a cut run leaves the old cache or the new one, never half of one."""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", suffix=PART)
        with os.fdopen(fd, "w") as fh:
            json.dump(entries, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs time next run


def digest(doc):
    """One hash for a whole manifest: two copies agree exactly when their digests do."""
    canonical = json.dumps([sorted(doc["files"].items()), sorted(doc["other"]), sorted(doc["empty_dirs"]),
                            sorted(doc["unreadable"])], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def valid(doc):
    """Whether `doc` has the manifest's shape and types (what a host answers is checked by it)."""
    def names(key):
        return isinstance(doc.get(key), list) and all(isinstance(n, str) for n in doc[key])
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        return False
    entries_ok = all(isinstance(v, list) and len(v) == 2 and type(v[0]) is int and v[0] >= 0 and isinstance(v[1], str)
                     and len(v[1]) == 64 for v in doc["files"].values())
    return entries_ok and names("other") and names("empty_dirs") and names("unreadable")


class Heartbeat:
    """A dot on stderr every few seconds while files are hashed: the launcher takes a host that
    says nothing for long as stuck, and hashing a large dataset the first time takes a while."""

    def __init__(self, every=5.0):
        import time
        self.clock, self.every, self.last = time.monotonic, every, time.monotonic()

    def __call__(self):
        if self.clock() - self.last >= self.every:
            self.last = self.clock()
            sys.stderr.write(".")
            sys.stderr.flush()


if __name__ == "__main__":
    doc = manifest(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None, on_file=Heartbeat())
    json.dump(doc, sys.stdout, separators=(",", ":"))
