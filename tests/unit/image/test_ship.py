"""Shipping to one host: only the layers it lacks, or the full archive and why."""
from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from launcher.errors import RemoteError
from launcher.image import layers, local
from launcher.image.local import Shipment
from launcher.image.on_host import HostImage
from launcher.image.ship import ship
from launcher.ssh.connection import Result
from support.builders import BLOBS, chunks_of, docker_save
from support.fakes import FakeConnection


def test_ship_skips_a_host_that_has_the_exact_image(tmp_path):
    conn = FakeConnection()
    outcome = ship(conn, Shipment("t:1", "sha256:same", cache=tmp_path), HostImage("sha256:same"))
    assert outcome.action == "present" and outcome.bytes_sent == 0 and conn.commands == []
    assert not list(tmp_path.iterdir())  # no archive was even made


class EngineHost(FakeConnection):
    """A host's engine as `ship` sees it after its survey: loading an archive sets the image ID
    (an engine refusing deltas fails on one that lacks layers)."""

    def __init__(self, shipment: Shipment, refuses_delta: bool = False):
        super().__init__(self.inspect, self.load)
        self.shipment, self.refuses_delta, self.image_id, self.loads = shipment, refuses_delta, None, []

    def inspect(self, command) -> Result:
        return Result(0 if self.image_id else 1, f"{self.image_id or ''}\n", "")

    def load(self, command, data: bytes) -> None:
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
            names = tar.getnames()
        self.loads.append(names)
        if self.refuses_delta and len(names) < 4:
            raise RemoteError("h1", "docker load", 1, "open /var/lib/docker/tmp/x/layer.tar: no such file")
        self.image_id = self.shipment.image_id


@pytest.fixture
def shipment(tmp_path, monkeypatch):
    """An image of three layers, split as if `docker save` had given it."""
    saved, image_id = docker_save(BLOBS)
    monkeypatch.setattr(local, "save_stream", lambda image: chunks_of(saved))
    return Shipment("t:1", image_id, tmp_path)


def holding(diff_ids: list[str], containerd: bool = False) -> HostImage:
    return HostImage(None, containerd, frozenset(layers.present_chains([diff_ids])))


def test_ship_sends_only_the_layers_the_host_lacks(shipment):
    host = EngineHost(shipment)
    outcome = ship(host, shipment, holding(shipment.parts().diff_ids[:2]))
    assert (outcome.layers_sent, outcome.layers_total, outcome.note) == (1, 3, "")
    assert len(host.loads[0]) == 3 and outcome.bytes_sent == host.bytes_sent
    assert outcome.summary() == f"shipped 1/3 layers, {host.bytes_sent:,} B"


def test_ship_sends_the_full_archive_to_a_containerd_store_and_says_why(shipment):
    host = EngineHost(shipment)
    outcome = ship(host, shipment, holding([], containerd=True))
    assert "containerd image store" in outcome.note and outcome.action == "shipped"
    assert "manifest.json" in host.loads[0] and len(host.loads[0]) == 5  # docker save as it was


def test_a_refused_delta_falls_back_to_the_full_archive_and_says_so(shipment):
    host = EngineHost(shipment, refuses_delta=True)
    outcome = ship(host, shipment, holding(shipment.parts().diff_ids[:2]))
    assert len(host.loads) == 2 and "delta was refused" in outcome.note and "no such file" in outcome.note
    assert host.image_id == shipment.image_id
