"""Image: getting the trainer image onto every host, without a registry when need be.

- ship: build once here (BuildKit), then stream `docker save | gzip` over SSH into `docker load`,
  only to hosts that lack that exact image ID; the archive is made once and reused.
- pull: `docker pull` on each host.
- build: push the build context to each host and build there (the original procedure).
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from launcher import REPO, docker_commands as dc
from launcher.errors import ImageError, RemoteError
from launcher.group import Group
from launcher.inventory import Cluster, Host
from launcher.plan import Plan

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


def provide(group: Group, plan: Plan) -> dict[str, ImageOutcome]:
    """The image on every host, by the inventory's image_mode."""
    spec = plan.cluster.spec
    if spec.image_mode == "pull":
        return group.staged("image", lambda h, c: pull(c, spec.image)).succeeded
    if spec.image_mode == "build":
        tarball = context_tarball()
        return group.staged("image", lambda h, c: build_remote(c, plan.cluster, h, tarball)).succeeded
    for host in plan.cluster.hosts:
        group.reporter.stage(host.name, "image", "building here")
    image_id = build_local(plan.cluster)
    if spec.run:
        image_id = build_code_image(plan)
    archive = Archive(plan.container_image, image_id)
    return group.staged("image", lambda h, c: ship(c, archive)).succeeded


def build_command(base: str, tag: str, context: Path = REPO) -> list[list[str]]:
    """The two commands that build the trainer image with no network inside the build."""
    return [dc.fetch_wheels(base, context), dc.build(base, tag, context)]


def build_local(cluster: Cluster) -> str:
    """Build the image on this machine; returns its ID."""
    for cmd in build_command(cluster.spec.base_image, cluster.spec.image):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise ImageError(f"building {cluster.spec.image} here failed: {' '.join(cmd)}\n  {tail}")
    return local_image_id(cluster.spec.image)


CODE_DOCKERFILE = """\
# Your code on top of the tfcompose image (built by `tfcompose up` for an inventory with `run:`).
FROM {base}
COPY code/ /workspace/
{requirements}WORKDIR /workspace
LABEL tfcompose.code="{code_hash}"
"""


def build_code_image(plan: Plan) -> str:
    """Bake run.code_dir (and its requirements, installed now, not at every start) into a layer."""
    from launcher.inventory import code_dir
    cluster = plan.cluster
    tag, folder, req = plan.container_image, code_dir(cluster), cluster.spec.run.requirements
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copytree(folder, Path(ctx) / "code", ignore=shutil.ignore_patterns("__pycache__", ".git"))
        install = f"RUN python3 -m pip install --no-cache-dir -r /workspace/{req}\n" if req else ""
        (Path(ctx) / "Dockerfile").write_text(CODE_DOCKERFILE.format(
            base=cluster.spec.image, requirements=install, code_hash=plan.code_hash))
        proc = subprocess.run(["docker", "buildx", "build", "--load", "-t", tag, ctx], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"building your code into {tag} failed:\n  " + "\n  ".join(proc.stderr.strip().splitlines()[-8:]))
    return local_image_id(tag)


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
    """`docker save` of one image, gzip-compressed once into a cache file, for every host that needs it."""

    def __init__(self, image: str, image_id: str, cache_dir: Path | None = None):
        self.image, self.image_id = image, image_id
        cache = cache_dir or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tfcompose" / "images"
        # The tag is part of the name: the archive records it, and `docker load` recreates it.
        safe_tag = "".join(c if c.isalnum() or c in "._-" else "_" for c in image)
        self.path = cache / f"{image_id.replace('sha256:', '')[:24]}-{safe_tag}.tar.gz"

    def ensure(self) -> Path:
        if self.path.is_file():
            return self.path
        import docker
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".part")
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip framing, fast level
        with os.fdopen(fd, "wb") as out:
            # named=<this tag>: with named=True the SDK writes the image's *first* tag, which for an
            # image with several tags is not necessarily the one the hosts will look for.
            for chunk in docker.from_env().images.get(self.image).save(chunk_size=CHUNK, named=self.image):
                out.write(compressor.compress(chunk))
            out.write(compressor.flush())
        os.replace(tmp, self.path)
        return self.path

    def chunks(self) -> Iterator[bytes]:
        with self.path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk


def ship(conn, archive: Archive) -> ImageOutcome:
    """Load the archive into the host's engine unless it already has that exact image ID."""
    if remote_image_id(conn, archive.image) == archive.image_id:
        return ImageOutcome("present", 0, archive.image_id)
    archive.ensure()
    before = conn.bytes_sent
    conn.stream(dc.load_gzipped_archive(), on_output=lambda _: None, stdin_chunks=archive.chunks())
    loaded = remote_image_id(conn, archive.image)
    if loaded != archive.image_id:
        raise RemoteError(conn.host.name, "docker load", reason=f"after loading, the host's "
                          f"{archive.image} is {loaded}, not {archive.image_id}")
    return ImageOutcome("shipped", conn.bytes_sent - before, archive.image_id)


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
