"""This machine's Docker engine: building the trainer image, its ID, and what `up` ships of it (a
Shipment: the image split once into cached layers, and the full `docker save` archive for an
engine that takes no delta)."""
from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator

from launcher import docker_commands as dc
from launcher.errors import ImageError
from launcher.files import CHUNK, REPO, atomic_writer, cache_root, gzip_compressor
from launcher.image import layers
from launcher.inventory.model import Cluster


def build_command(base: str, tag: str, context: Path = REPO) -> list[list[str]]:
    """The two commands that build the trainer image with no network inside the build."""
    return [dc.fetch_wheels(base, context), dc.build(base, tag, context)]


def build_local(cluster: Cluster) -> str:
    """Build the image on this machine; returns its ID."""
    for cmd in build_command(cluster.spec.base_image, cluster.spec.image, REPO):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise ImageError(f"building {cluster.spec.image} here failed: {' '.join(cmd)}\n  {tail}")
    return local_image_id(cluster.spec.image)


def local_image_id(image: str) -> str:
    import docker
    try:
        return docker.from_env().images.get(image).id
    except docker.errors.ImageNotFound:
        raise ImageError(f"image {image} is not present on this machine") from None
    except docker.errors.DockerException as exc:
        raise ImageError(f"cannot reach this machine's Docker engine: {exc}") from None


def load_here(parts: layers.Parts) -> None:
    """Load into this machine's engine what it lacks of the image (the code layer: KB); every
    layer if it refuses that (an engine that takes no delta)."""
    import docker
    try:
        if local_image_id(parts.image) == parts.image_id:
            return
    except ImageError:
        pass
    held = [img.attrs.get("RootFS", {}).get("Layers") or [] for img in docker.from_env().images.list(all=True)]
    missing = layers.missing_layers(parts.diff_ids, layers.present_chains(held))
    for attempt in (missing, list(range(len(parts.diff_ids)))):
        # `docker load` reads gzip itself (several members, too): the archive streams in as it is.
        proc = subprocess.Popen(["docker", "load", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            for chunk in parts.chunks(attempt):
                proc.stdin.write(chunk)
        except BrokenPipeError:
            pass
        _, err = proc.communicate()
        if proc.returncode == 0 and local_image_id(parts.image) == parts.image_id:
            return
    raise ImageError(f"loading your code image {parts.image} here failed: {err.decode(errors='replace')[-300:]}")


SAVE_TIMEOUT_S = 900


def save_stream(image: str) -> Iterator[bytes]:
    import docker
    # named=<this tag>: with named=True the SDK writes the image's *first* tag, which for an image
    # with several tags is not necessarily the one the hosts will look for.
    # A long read timeout: Docker 20.10 exports every layer before the first byte of a save, which
    # for a 3 GB image on a busy engine takes over the SDK's default minute.
    return docker.from_env(timeout=SAVE_TIMEOUT_S).images.get(image).save(chunk_size=CHUNK, named=image)


def image_size(image: str) -> int:
    """About what `docker save` of the image writes (its layers' size, as the engine says); 0 if unknown."""
    import docker
    try:
        size = docker.from_env().images.get(image).attrs.get("Size")
    except docker.errors.DockerException:
        return 0
    return size if isinstance(size, int) and size > 0 else 0


def counting(chunks: Iterable[bytes], total: int, on_bytes: Callable[[int, int], None]) -> Iterator[bytes]:
    """The chunks, telling `on_bytes(done, total)` how far they are; the end (done = total) once
    they are all through, whatever `total` estimated."""
    done = 0
    on_bytes(0, max(total, 1))      # at once: the engine may take a minute before its first byte
    for chunk in chunks:
        done += len(chunk)
        on_bytes(done, max(total, done + 1))
        yield chunk
    on_bytes(done, done)


Progress = Callable[[str], Callable[[int, int], None]]    # what is under way → its bytes done of total


def no_progress(what: str) -> Callable[[int, int], None]:
    return lambda done, total: None


class Archive:
    """The plain `docker save` of one image, gzip-compressed once into a cache file: the fallback for
    engines that do not take a layer delta."""

    def __init__(self, image: str, image_id: str, cache_dir: Path | None = None, progress: Progress = no_progress):
        self.image, self.image_id, self.progress = image, image_id, progress
        # The tag is part of the name: the archive records it, and `docker load` recreates it.
        safe_tag = "".join(c if c.isalnum() or c in "._-" else "_" for c in image)
        self.path = (cache_dir or cache_root() / "images") / f"{image_id.replace('sha256:', '')[:24]}-{safe_tag}.tar.gz"

    def ensure(self) -> Path:
        if self.path.is_file():
            return self.path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        compressor = gzip_compressor()
        saved = counting(save_stream(self.image), image_size(self.image),
                         self.progress(f"docker save of {self.image}, compressed into one archive"))
        with atomic_writer(self.path) as out:
            for chunk in saved:
                out.write(compressor.compress(chunk))
            out.write(compressor.flush())
        return self.path

    def chunks(self) -> Iterator[bytes]:
        with self.path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk


class Shipment:
    """What `up` ships, made once for all hosts on first need: the image split into cached layers
    (for deltas) and, only if some engine refuses a delta, the full archive."""

    def __init__(self, image: str, image_id: str, cache: Path | None = None, parts: layers.Parts | None = None,
                 progress: Progress = no_progress):
        self.image, self.image_id, self.cache = image, image_id, cache or cache_root()
        self.progress = progress    # the work here that the hosts wait for (docker save, compressing)
        self._lock, self._parts = threading.Lock(), parts
        self.suspect = False        # a host refused a delta made of the cached layers

    @staticmethod
    def parts_cache(root: Path | None = None) -> Path:
        return (root or cache_root()) / "image-parts"

    def parts(self) -> layers.Parts:
        with self._lock:
            if self._parts is None:
                cache = self.parts_cache(self.cache)
                self._parts = layers.load_parts(self.image, self.image_id, cache) or self._split(cache)
            return self._parts

    def _split(self, cache: Path) -> layers.Parts:
        saved = counting(save_stream(self.image), image_size(self.image), self.progress(f"docker save of {self.image}"))
        return layers.split_save(self.image, self.image_id, saved, cache,
                                 self.progress(f"compressing the new layers of {self.image}"))

    def forget_if_suspect(self) -> None:
        """After every host is served: a split a host refused is removed, so the next `up` makes
        it afresh from `docker save` (a damaged cache entry fails one `up`, not every one)."""
        with self._lock:
            if self.suspect and self._parts is not None:
                layers.forget(self._parts, self.parts_cache(self.cache))
                self._parts, self.suspect = None, False

    def full(self) -> Archive:
        """The plain `docker save` archive, made once: what an engine that takes no delta gets."""
        with self._lock:
            archive = Archive(self.image, self.image_id, self.cache / "images", self.progress)
            archive.ensure()
            return archive
