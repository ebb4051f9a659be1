"""Layer-delta image archives: a host gets only the layers its Docker engine lacks.

`docker save` is split once on this machine into one gzip member per layer, cached under the
layer's diff ID (a layer shared by many images or tags is compressed once, and a new code image
costs only its new layers), plus the image's config. A host's archive is assembled from those
members: a tar holding manifest.json, the config, and only the layer tars whose chain ID the
host's engine does not have. `docker load` (classic image store) looks a layer up by chain ID and
takes the ones it has from its store; gzip members concatenate into one valid gzip stream.

Engines that want every layer in the archive (Docker 25+ with the containerd image store) are
detected by `image.py`, which then sends the plain `docker save` archive instead.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from launcher.errors import ImageError
from launcher.files import CHUNK, atomic_writer, gzip_bytes, gzip_compressor, write_atomic

BLOCK = 512
MAX_META_BYTES = 16 << 20   # manifest.json and the config: small JSON, read into memory


class Unsplittable(ImageError):
    """This engine's `docker save` cannot be split into layers (compressed layer blobs)."""


def chain_ids(diff_ids: list[str]) -> list[str]:
    """Docker's chain IDs: the first layer's is its diff ID, each next one hashes parent + diff."""
    chains: list[str] = []
    for diff in diff_ids:
        chains.append(diff if not chains else
                      "sha256:" + hashlib.sha256(f"{chains[-1]} {diff}".encode()).hexdigest())
    return chains


def present_chains(layer_lists: Iterable[list[str]]) -> set[str]:
    """Every chain ID an engine holds, from its images' diff-ID lists (each prefix is a chain)."""
    return {chain for diffs in layer_lists for chain in chain_ids(diffs)}


def missing_layers(diff_ids: list[str], present: set[str]) -> list[int]:
    """Indexes of the layers a host must receive. Once one is missing, so is every later one
    (a chain includes its parent), so this is always a suffix."""
    chains = chain_ids(diff_ids)
    first = next((i for i, chain in enumerate(chains) if chain not in present), len(chains))
    return list(range(first, len(chains)))


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


@dataclass(frozen=True)
class Parts:
    """One image split into cached pieces: its config and one gzip member per layer."""
    image: str
    image_id: str
    config: bytes
    diff_ids: list[str]
    layer_dir: Path

    def member(self, index: int) -> Path:
        return self.layer_dir / f"{_hex(self.diff_ids[index])}.gz"

    def layer_size(self, index: int) -> int:
        """Uncompressed size of a layer's tar (its entry's size in the archive)."""
        return int((self.layer_dir / f"{_hex(self.diff_ids[index])}.size").read_text())

    def archive_bytes(self, layers: list[int]) -> int:
        """About what `chunks(layers)` sends (the small members are not counted)."""
        return sum(self.member(i).stat().st_size for i in layers)

    @property
    def config_name(self) -> str:
        return f"{_hex(self.image_id)}.json"

    def layer_name(self, index: int) -> str:
        return f"{_hex(self.diff_ids[index])}/layer.tar"

    def manifest(self) -> bytes:
        """The archive's manifest.json: this image under its one tag, every layer in order."""
        return json.dumps([{"Config": self.config_name, "RepoTags": [self.image],
                            "Layers": [self.layer_name(i) for i in range(len(self.diff_ids))]}]).encode()

    def expectation(self, layers: list[int]) -> dict:
        """What an archive of these layers holds, for a relay hop to check (hop_check.py)."""
        return {"config": {"name": self.config_name, "sha256": hashlib.sha256(self.config).hexdigest()},
                "manifest_sha256": hashlib.sha256(self.manifest()).hexdigest(),
                "layers": [[self.layer_name(i), self.layer_size(i)] for i in layers]}

    def chunks(self, layers: list[int]) -> Iterator[bytes]:
        """A gzip-compressed docker-archive tar with config, manifest and the given layers."""
        head = b"".join(_header(n, len(b)) + b + _padding(len(b)) for n, b in
                        ((self.config_name, self.config), ("manifest.json", self.manifest())))
        pending = head
        for i in layers:
            size = self.layer_size(i)
            yield gzip_bytes(pending + _header(self.layer_name(i), size))
            with self.member(i).open("rb") as fh:
                while chunk := fh.read(CHUNK):
                    yield chunk
            pending = _padding(size)
        yield gzip_bytes(pending + b"\0" * (2 * BLOCK))


DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def load_parts(image: str, image_id: str, cache: Path) -> Parts | None:
    """The cached split of this exact image, if every piece of it is still there and is what it
    says (the config hashes to the image ID, each diff ID is a digest, each size a number);
    anything else is a cache miss, and the image is split again."""
    meta = cache / "images" / f"{_hex(image_id)}.json"
    try:
        doc = json.loads(meta.read_text())
        config = bytes.fromhex(doc["config"])
        parts = Parts(image, image_id, config, doc["diff_ids"], cache / "layers")
        ok = "sha256:" + hashlib.sha256(config).hexdigest() == image_id and \
            parts.diff_ids == json.loads(config)["rootfs"]["diff_ids"] and \
            all(DIGEST.fullmatch(d) for d in parts.diff_ids) and \
            all(parts.member(i).is_file() and parts.layer_size(i) >= 0 for i in range(len(parts.diff_ids)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return parts if ok else None


def forget(parts: Parts, cache: Path) -> None:
    """Remove an image's split from the cache (its members too): after a host refused what was
    made of it, the next `up` splits and compresses it afresh."""
    for path in [cache / "images" / f"{_hex(parts.image_id)}.json",
                 *(parts.member(i) for i in range(len(parts.diff_ids))),
                 *(parts.layer_dir / f"{_hex(d)}.size" for d in parts.diff_ids)]:
        path.unlink(missing_ok=True)


def split_save(image: str, image_id: str, stream: Iterable[bytes], cache: Path,
               on_compress: Callable[[int, int], None] = lambda done, total: None) -> Parts:
    """Split a `docker save` stream into cached layer members (new layers only) and the config;
    `on_compress(done, total)`: the bytes of new layers compressed so far."""
    (cache / "layers").mkdir(parents=True, exist_ok=True)
    (cache / "images").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".split-") as tmp:
        reader = _Reader(iter(stream))
        entries = _spool_entries(reader, Path(tmp))
        for _ in reader.chunks:     # the tar's end blocks and padding: the save is read to its end
            pass
        manifest = json.loads(_entry_bytes(entries, "manifest.json"))
        config = _entry_bytes(entries, manifest[0]["Config"])
        diff_ids = json.loads(config)["rootfs"]["diff_ids"]
        if "sha256:" + hashlib.sha256(config).hexdigest() != image_id:
            raise ImageError(f"docker save of {image} gave a config that is not image {image_id}")
        if not all(isinstance(d, str) and DIGEST.fullmatch(d) for d in diff_ids):
            raise ImageError(f"docker save of {image} gave layer IDs that are not sha256 digests")
        by_digest = {digest: path for path, digest, _ in entries.values()}
        missing = [diff for diff in diff_ids if diff not in by_digest]
        if missing:
            raise Unsplittable(f"this machine's `docker save` of {image} holds no plain tar for layer "
                               f"{missing[0][:19]}… (compressed layers), so no delta can be made")
        new = [diff for diff in dict.fromkeys(diff_ids) if not _stored(cache / "layers", diff, by_digest[diff])]
        total, done = sum(by_digest[diff].stat().st_size for diff in new), 0
        for diff in new:
            store_layer(cache / "layers", diff, by_digest[diff], lambda n, before=done: on_compress(before + n, total))
            done += by_digest[diff].stat().st_size
        if total:
            on_compress(total, total)
    write_atomic(cache / "images" / f"{_hex(image_id)}.json",
                  json.dumps({"config": config.hex(), "diff_ids": diff_ids}).encode())
    return Parts(image, image_id, config, diff_ids, cache / "layers")


def _spool_entries(reader: "_Reader", tmp: Path) -> dict[str, tuple[Path, str, int]]:
    """Every regular file of the tar stream onto disk: name → (file, sha256 digest, size)."""
    entries = {}
    with tarfile.open(fileobj=reader, mode="r|") as tar:
        for n, member in enumerate(tar):
            if not member.isfile():
                continue
            path, digest = tmp / str(n), hashlib.sha256()
            with tar.extractfile(member) as src, path.open("wb") as out:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            entries[member.name] = (path, "sha256:" + digest.hexdigest(), member.size)
    return entries


def _entry_bytes(entries: dict, name: str) -> bytes:
    if name not in entries or entries[name][2] > MAX_META_BYTES:
        raise ImageError(f"docker save gave no usable {name}")
    return entries[name][0].read_bytes()


def _stored(layer_dir: Path, diff: str, raw: Path) -> bool:
    """Whether an earlier image already compressed this layer into the cache."""
    member, size_file = layer_dir / f"{_hex(diff)}.gz", layer_dir / f"{_hex(diff)}.size"
    return member.is_file() and size_file.is_file() and size_file.read_text().strip() == str(raw.stat().st_size)


def store_layer(layer_dir: Path, diff: str, raw: Path, on_bytes: Callable[[int], None] = lambda done: None) -> None:
    """Compress a layer into its cached member, unless an earlier image already did; `on_bytes`:
    how much of the layer is compressed so far."""
    if _stored(layer_dir, diff, raw):
        return
    compressor, done = gzip_compressor(), 0
    with atomic_writer(layer_dir / f"{_hex(diff)}.gz") as out, raw.open("rb") as src:
        while chunk := src.read(CHUNK):
            out.write(compressor.compress(chunk))
            done += len(chunk)
            on_bytes(done)
        out.write(compressor.flush())
    write_atomic(layer_dir / f"{_hex(diff)}.size", str(raw.stat().st_size).encode())


class _Reader(io.RawIOBase):
    """A file object over an iterator of byte chunks (what the Docker SDK's save yields)."""

    def __init__(self, chunks: Iterator[bytes]):
        self.chunks, self.rest = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not self.rest:
            try:
                self.rest = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(buf), len(self.rest))
        buf[:n], self.rest = self.rest[:n], self.rest[n:]
        return n
