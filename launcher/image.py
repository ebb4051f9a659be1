"""Image: getting the trainer image onto every host, without a registry when need be.

- ship: build once here (BuildKit), then stream into each host's `docker load`, over SSH, only the
  layers its engine lacks (layers.py); the full `docker save` archive where an engine cannot take
  a delta. Nothing goes to a host that has the exact image ID.
- pull: `docker pull` on each host.
- build: push the build context to each host and build there (the original procedure).
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import tempfile
import threading
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Optional

from launcher import REPO, docker_commands as dc, layers, relay
from launcher.errors import ImageError, RemoteError
from launcher.group import Group
from launcher.inventory import Cluster, Host
from launcher.plan import Plan
from launcher.progress import transfer_reporter

CHUNK = 1 << 20
BUILD_TIMEOUT_S = 3 * 3600
PULL_TIMEOUT_S = 3600
CONTEXT_FILES = ("trainer", "docker/Dockerfile", "docker/install-runtime.sh", "docker/entrypoint.sh",
                 "docker/fetch-wheels.sh", ".dockerignore")


@dataclass(frozen=True)
class ImageOutcome:
    action: str        # "present", "shipped", "pulled", "built"
    bytes_sent: int = 0
    image_id: str = ""
    layers_sent: int = 0
    layers_total: int = 0
    note: str = ""     # why a host got the full archive instead of a delta; where a relay took it from
    via: str = ""      # relayed: the host it came from ("" when the launcher sent it)

    def summary(self) -> str:
        """`shipped 2/14 layers, 20,480 B`, `present, 0 B`; with the reason for a full archive."""
        layers = f" {self.layers_sent}/{self.layers_total} layers" if self.layers_total else ""
        return f"{self.action}{layers}, {self.bytes_sent:,} B{'; ' + self.note if self.note else ''}"


def prepare(group: Group, plan: Plan) -> Optional["Shipment"]:
    """For image_mode ship: build the image here (and your code's layer); None for pull and build,
    whose image is made on the hosts."""
    if plan.cluster.spec.image_mode != "ship":
        return None
    for host in plan.cluster.hosts:
        group.reporter.stage(host.name, "image", "building here")
    image_id = build_local(plan.cluster)
    return code_shipment(plan) if plan.cluster.spec.run else Shipment(plan.container_image, image_id)


def provide(group: Group, plan: Plan, shipment: Optional["Shipment"]) -> dict[str, ImageOutcome]:
    """The image on every host, by the inventory's image_mode (ship: what `prepare` made)."""
    spec = plan.cluster.spec
    if spec.image_mode == "pull":
        return group.staged("image", lambda h, c: pull(c, spec.image)).succeeded
    if spec.image_mode == "build":
        tarball = context_tarball()
        return group.staged("image", lambda h, c: build_remote(c, plan.cluster, h, tarball)).succeeded

    relayed = relay_first(group, plan.cluster, shipment)

    def one(host: Host, conn) -> ImageOutcome:
        outcome = relayed.served.get(host.name)
        if outcome is None:
            outcome = ship(conn, shipment, transfer_reporter(group.reporter, host.name, "image"))
            if host.name in relayed.broken:
                outcome = replace(outcome, note="; ".join(filter(None, [outcome.note, "sent directly: the relay "
                                                                        f"did not serve it ({relayed.broken[host.name]})"])))
        group.reporter.stage(host.name, "image", outcome.summary())
        return outcome
    return group.staged("image", one).succeeded


@dataclass
class Relayed:
    served: dict[str, ImageOutcome] = field(default_factory=dict)   # hosts whose image came through the chain
    broken: dict[str, str] = field(default_factory=dict)            # chain hosts it did not serve, and why


def relay_first(group: Group, cluster: Cluster, shipment: "Shipment") -> Relayed:
    """With image_relay on (or auto and 3+ hosts lacking layers): the layers go once, to the first
    host lacking them, and along a chain of the others (relay.py); each host's image ID is checked."""
    setting = cluster.spec.image_relay
    if relay.chain_for(setting, [h.name for h in cluster.hosts]) == []:
        return Relayed()
    try:
        parts = shipment.parts()
    except layers.Unsplittable:
        return Relayed()
    needs = group.run("image", lambda h, c: layers_needed(c, shipment, parts)).succeeded
    chain = [h for h in cluster.hosts if h.name in relay.chain_for(setting, [n for n, m in needs.items() if m])]
    if not chain:
        return Relayed()
    first = min(needs[h.name][0] for h in chain)      # every layer some host of the chain lacks
    for before, host in zip(chain, chain[1:]):
        group.reporter.stage(host.name, "image", f"receiving through the relay from {before.name}")
    conn, layer_list = group.conn(chain[0]), list(range(first, len(parts.diff_ids)))
    chunks = counted(conn, parts.chunks(layer_list), parts.archive_bytes(layer_list),
                     transfer_reporter(group.reporter, chain[0].name, "image"))
    before_bytes = conn.bytes_sent
    result = relay.run_chain(group, chain, chunks, cluster.name)
    for name, why in result.not_removed.items():
        group.reporter.warn(name, f"the relay's key could not be removed ({why}); `tfcompose down` removes it")
    checked = group.run("image", lambda h, c: verify(c, shipment), [h for h in chain if h.name in result.reached])
    return relayed_outcomes(chain, result, checked, needs, len(parts.diff_ids), conn.bytes_sent - before_bytes,
                            shipment.image_id)


def relayed_outcomes(chain: list[Host], result, checked, needs: dict[str, list[int]], total: int, sent: int,
                     image_id: str) -> Relayed:
    """Pure: what each chain host got, from the chain's walk and the image checks after it."""
    out = Relayed()
    onward = ", ".join(h.name for h in chain[1:] if h.name in checked.succeeded) or "no other host"
    for i, host in enumerate(chain):
        if host.name in checked.succeeded:
            via = chain[i - 1].name if i else ""
            out.served[host.name] = ImageOutcome("relayed" if via else "shipped", 0 if via else sent, image_id,
                                                 len(needs[host.name]), total, f"from {via}" if via else
                                                 f"passed on to {onward}", via)
        else:
            exc = checked.failed.get(host.name)
            out.broken[host.name] = result.broken.get(host.name) or (str(exc).splitlines()[0] if exc else "not reached")
    return out


def layers_needed(conn, shipment: "Shipment", parts: layers.Parts) -> list[int]:
    """The layers this host lacks; [] when it has the image or its engine takes no delta (it is
    then served directly)."""
    if remote_image_id(conn, shipment.image) == shipment.image_id:
        return []
    containerd_store, chains = host_layers(conn)
    return [] if containerd_store else layers.missing_layers(parts.diff_ids, chains)


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


def code_shipment(plan: Plan) -> "Shipment":
    """Your code as a layer on the trainer image (or on its requirements image), made here at once;
    also loaded into this machine's engine (a few KB), so the code image can be pushed or run here."""
    from launcher import code_image
    spec = plan.cluster.spec
    parent_tag = code_image.requirements_image(plan) if spec.run.requirements else spec.image
    parent = Shipment(parent_tag, local_image_id(parent_tag)).parts()
    parts = code_image.code_parts(plan, parent, Shipment.parts_cache())
    load_here(parts)
    return Shipment(plan.container_image, parts.image_id, parts=parts)


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


def local_image_id(image: str) -> str:
    import docker
    try:
        return docker.from_env().images.get(image).id
    except docker.errors.ImageNotFound:
        raise ImageError(f"image {image} is not present on this machine") from None
    except docker.errors.DockerException as exc:
        raise ImageError(f"cannot reach this machine's Docker engine: {exc}") from None


def remote_image_id(conn, image: str) -> Optional[str]:
    result = conn.run(dc.image_id(image), check=False)
    return result.stdout.strip() or None if result.ok else None


class Archive:
    """The plain `docker save` of one image, gzip-compressed once into a cache file: the fallback for
    engines that do not take a layer delta."""

    def __init__(self, image: str, image_id: str, cache_dir: Path | None = None):
        self.image, self.image_id = image, image_id
        # The tag is part of the name: the archive records it, and `docker load` recreates it.
        safe_tag = "".join(c if c.isalnum() or c in "._-" else "_" for c in image)
        self.path = (cache_dir or cache_root() / "images") / f"{image_id.replace('sha256:', '')[:24]}-{safe_tag}.tar.gz"

    def ensure(self) -> Path:
        if self.path.is_file():
            return self.path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".part")
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip framing, fast level
        with os.fdopen(fd, "wb") as out:
            for chunk in save_stream(self.image):
                out.write(compressor.compress(chunk))
            out.write(compressor.flush())
        os.replace(tmp, self.path)
        return self.path

    def chunks(self) -> Iterator[bytes]:
        with self.path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tfcompose"


def save_stream(image: str) -> Iterator[bytes]:
    import docker
    # named=<this tag>: with named=True the SDK writes the image's *first* tag, which for an image
    # with several tags is not necessarily the one the hosts will look for.
    return docker.from_env().images.get(image).save(chunk_size=CHUNK, named=image)


class Shipment:
    """What `up` ships, made once for all hosts on first need: the image split into cached layers
    (for deltas) and, only if some engine refuses a delta, the full archive."""

    def __init__(self, image: str, image_id: str, cache: Path | None = None, parts: layers.Parts | None = None):
        self.image, self.image_id, self.cache = image, image_id, cache or cache_root()
        self._lock, self._parts = threading.Lock(), parts

    @staticmethod
    def parts_cache(root: Path | None = None) -> Path:
        return (root or cache_root()) / "image-parts"

    def parts(self) -> layers.Parts:
        with self._lock:
            if self._parts is None:
                cache = self.parts_cache(self.cache)
                self._parts = layers.load_parts(self.image, self.image_id, cache) or \
                    layers.split_save(self.image, self.image_id, save_stream(self.image), cache)
            return self._parts

    def full(self) -> Archive:
        """The plain `docker save` archive, made once: what an engine that takes no delta gets."""
        with self._lock:
            archive = Archive(self.image, self.image_id, self.cache / "images")
            archive.ensure()
            return archive


def ship(conn, shipment: Shipment, on_bytes: Callable[[int, int], None] = lambda done, total: None) -> ImageOutcome:
    """Only the layers the host's engine lacks; the full archive where an engine cannot take that.
    The host's image ID is checked afterwards: never silently wrong."""
    if remote_image_id(conn, shipment.image) == shipment.image_id:
        return ImageOutcome("present", 0, shipment.image_id)
    containerd_store, chains = host_layers(conn)
    if containerd_store:
        return ship_full(conn, shipment, on_bytes, 0, "full archive: the host's engine uses the containerd "
                         "image store, which takes no layer delta")
    try:
        parts = shipment.parts()
    except layers.Unsplittable as exc:
        return ship_full(conn, shipment, on_bytes, 0, f"full archive: {exc}")
    missing = layers.missing_layers(parts.diff_ids, chains)
    try:
        sent = send(conn, parts.chunks(missing), parts.archive_bytes(missing), on_bytes)
        verify(conn, shipment)
    except RemoteError as exc:
        reason = str(exc).splitlines()[-1].strip()[:160]
        return ship_full(conn, shipment, on_bytes, len(parts.diff_ids), f"full archive: the delta was refused ({reason})")
    return ImageOutcome("shipped", sent, shipment.image_id, len(missing), len(parts.diff_ids))


def ship_full(conn, shipment: Shipment, on_bytes, layer_count: int, note: str) -> ImageOutcome:
    archive = shipment.full()
    sent = send(conn, archive.chunks(), archive.path.stat().st_size, on_bytes)
    verify(conn, shipment)
    return ImageOutcome("shipped", sent, shipment.image_id, layer_count, layer_count, note)


def send(conn, chunks: Iterator[bytes], total: int, on_bytes) -> int:
    """Stream a gzip archive into the host's `docker load`; returns the bytes sent."""
    before = conn.bytes_sent
    conn.stream(dc.load_gzipped_archive(), on_output=lambda _: None, stdin_chunks=counted(conn, chunks, total, on_bytes))
    return conn.bytes_sent - before


def counted(conn, chunks: Iterator[bytes], total: int, on_bytes) -> Iterator[bytes]:
    """The chunks, telling `on_bytes(done, total)` what has gone over `conn` so far."""
    before = conn.bytes_sent
    for chunk in chunks:
        yield chunk
        on_bytes(conn.bytes_sent - before, total)


def verify(conn, shipment: Shipment) -> None:
    loaded = remote_image_id(conn, shipment.image)
    if loaded != shipment.image_id:
        raise RemoteError(conn.host.name, "docker load", reason=f"after loading, the host's "
                          f"{shipment.image} is {loaded}, not {shipment.image_id}")


def host_layers(conn) -> tuple[bool, set[str]]:
    """(does the engine use the containerd image store, the chain IDs it holds)."""
    lines = conn.run(dc.image_layers()).stdout.splitlines()
    containerd = bool(lines) and "io.containerd.snapshotter" in lines[0]
    lists = []
    for line in lines[1:]:
        try:
            diffs = json.loads(line)
        except ValueError:
            continue
        if isinstance(diffs, list) and all(isinstance(d, str) for d in diffs):
            lists.append(diffs)
    return containerd, layers.present_chains(lists)


def pull(conn, image: str) -> ImageOutcome:
    conn.run(dc.pull(image), timeout=PULL_TIMEOUT_S)
    return ImageOutcome("pulled", 0, remote_image_id(conn, image) or "")


def context_tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in CONTEXT_FILES:
            tar.add(REPO / name, arcname=name, filter=lambda t: None if "__pycache__" in t.name else t)
    return buf.getvalue()


def build_remote(conn, cluster: Cluster, host: Host, tarball: bytes) -> ImageOutcome:
    ctx = f"{host.bundle_dir}/build-context"
    conn.run(["mkdir", "-p", ctx])
    conn.stream(["tar", "-xzf", "-", "-C", ctx], on_output=lambda _: None, stdin_chunks=[tarball], timeout=PULL_TIMEOUT_S)
    fetch, build = build_command(cluster.spec.base_image, cluster.spec.image, Path(ctx))
    # Without python3/pip on the host the wheels step fails; the build then installs from PyPI.
    conn.run(["sh", "-c", '"$@" || true', "sh", *fetch], timeout=BUILD_TIMEOUT_S)
    conn.run(build, timeout=BUILD_TIMEOUT_S)
    return ImageOutcome("built", len(tarball), remote_image_id(conn, cluster.spec.image) or "")
