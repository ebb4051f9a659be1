"""Shipping the image to one host: only the layers its engine lacks (layers.py assembles the
archive), or the full `docker save` archive where the engine takes no delta; the host's image ID
is checked afterwards, so a host is never silently wrong."""
from __future__ import annotations

from typing import Callable, Iterator, Optional

from launcher import docker_commands as dc
from launcher.errors import RemoteError, summary
from launcher.image import layers
from launcher.image.local import Shipment
from launcher.image.on_host import HostImage, ImageOutcome, survey, verify
from launcher.ssh.transfer import counted


def layers_needed(found: HostImage, shipment: Shipment, parts: layers.Parts) -> list[int]:
    """The layers this host lacks; [] when it has the image or its engine takes no delta (it is
    then served directly)."""
    if found.has(shipment.image_id) or found.containerd_store:
        return []
    return layers.missing_layers(parts.diff_ids, set(found.chains))


def ship(conn, shipment: Shipment, found: Optional[HostImage] = None,
         on_bytes: Callable[[int, int], None] = lambda done, total: None) -> ImageOutcome:
    """What the host lacks of the image, by what its survey (`found`; made here when not given)
    said it holds."""
    found = found or survey(conn, shipment.image)
    if found.has(shipment.image_id):
        return ImageOutcome("present", 0, shipment.image_id)
    if found.containerd_store:
        return ship_full(conn, shipment, on_bytes, 0, "full archive: the host's engine uses the containerd "
                         "image store, which takes no layer delta")
    try:
        parts = shipment.parts()
    except layers.Unsplittable as exc:
        return ship_full(conn, shipment, on_bytes, 0, f"full archive: {exc}")
    missing = layers.missing_layers(parts.diff_ids, set(found.chains))
    try:
        sent = send(conn, parts.chunks(missing), parts.archive_bytes(missing), on_bytes)
        verify(conn, shipment.image, shipment.image_id)
    except RemoteError as exc:
        shipment.suspect = True             # damaged cached layers? forgotten once every host is served
        reason = summary(exc)[:200]
        return ship_full(conn, shipment, on_bytes, len(parts.diff_ids), f"full archive: the delta was refused ({reason})")
    return ImageOutcome("shipped", sent, shipment.image_id, len(missing), len(parts.diff_ids))


def ship_full(conn, shipment: Shipment, on_bytes, layer_count: int, note: str) -> ImageOutcome:
    archive = shipment.full()
    try:
        sent = send(conn, archive.chunks(), archive.path.stat().st_size, on_bytes)
        verify(conn, shipment.image, shipment.image_id)
    except RemoteError as exc:
        archive.path.unlink(missing_ok=True)    # a damaged cached archive must not fail every later `up`
        raise RemoteError(exc.host, exc.command, exc.status, exc.stderr,
                          reason=f"{exc.reason}; the cached archive {archive.path} was removed, so the next "
                                 "`tfcompose up` makes it afresh") from None
    return ImageOutcome("shipped", sent, shipment.image_id, layer_count, layer_count, note)


def send(conn, chunks: Iterator[bytes], total: int, on_bytes) -> int:
    """Stream a gzip archive into the host's `docker load`; returns the bytes sent."""
    before = conn.bytes_sent
    conn.stream(dc.load_gzipped_archive(), on_output=lambda _: None, stdin_chunks=counted(conn, chunks, total, on_bytes))
    return conn.bytes_sent - before
