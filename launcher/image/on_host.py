"""The image on one host: what its engine holds (one survey per `up`, read by both the relay and
the ship), the check after a load, and the image modes that make the image on the host itself
(`pull`, `build`)."""
from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher import docker_commands as dc
from launcher.errors import RemoteError
from launcher.files import REPO
from launcher.image import layers
from launcher.image.local import build_command
from launcher.inventory.model import Cluster, Host

BUILD_TIMEOUT_S = 3 * 3600
PULL_TIMEOUT_S = 3600
CONTEXT_FILES = ("trainer", "docker/Dockerfile", "docker/install-runtime.sh", "docker/entrypoint.sh",
                 "docker/fetch-wheels.sh", ".dockerignore")


@dataclass(frozen=True)
class ImageOutcome:
    action: str        # "present", "shipped", "relayed", "pulled", "built"
    bytes_sent: int = 0
    image_id: str = ""
    layers_sent: int = 0
    layers_total: int = 0
    note: str = ""     # why a host got the full archive instead of a delta; where a relay took it from
    via: str = ""      # relayed: the host it came from ("" when the launcher sent it)

    def summary(self) -> str:
        """`shipped 2/14 layers, 20,480 B`, `present, 0 B`; with the reason for a full archive."""
        counts = f" {self.layers_sent}/{self.layers_total} layers" if self.layers_total else ""
        return f"{self.action}{counts}, {self.bytes_sent:,} B{'; ' + self.note if self.note else ''}"


@dataclass(frozen=True)
class HostImage:
    """What a host's engine holds, from one survey: the ID of the image's tag (None if absent),
    whether it uses the containerd image store (no layer deltas), and its layer chains."""
    image_id: Optional[str] = None
    containerd_store: bool = False
    chains: frozenset = field(default_factory=frozenset)

    def has(self, image_id: str) -> bool:
        return self.image_id == image_id


def survey(conn, image: str) -> HostImage:
    lines = conn.run(dc.image_survey(image)).stdout.splitlines()
    image_id = lines[0].strip() if lines and lines[0].startswith("sha256:") else None
    containerd = len(lines) > 1 and "io.containerd.snapshotter" in lines[1]
    lists = []
    for line in lines[2:]:
        try:
            diffs = json.loads(line)
        except ValueError:
            continue
        if isinstance(diffs, list) and all(isinstance(d, str) for d in diffs):
            lists.append(diffs)
    return HostImage(image_id, containerd, frozenset(layers.present_chains(lists)))


def remote_image_id(conn, image: str) -> Optional[str]:
    result = conn.run(dc.image_id(image), check=False)
    return result.stdout.strip() or None if result.ok else None


def verify(conn, image: str, image_id: str) -> None:
    loaded = remote_image_id(conn, image)
    if loaded != image_id:
        raise RemoteError(conn.host.name, "docker load", reason=f"after loading, the host's "
                          f"{image} is {loaded}, not {image_id}")


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
