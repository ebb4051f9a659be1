"""Image modes at the command boundary (the registry-backed `pull` cannot run here)."""
from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from launcher import image as images
from launcher.connection import Result
from launcher.errors import RemoteError


class FakeConnection:
    """Records commands; answers `docker image inspect` with a fixed ID."""

    def __init__(self, image_id: str | None):
        self.commands, self.image_id = [], image_id

    def run(self, command, check=True, **kw):
        self.commands.append(command)
        if command[:3] == ["docker", "image", "inspect"]:
            return Result(0 if self.image_id else 1, (self.image_id or "") + "\n", "")
        return Result(0, "", "")


def test_pull_runs_docker_pull_with_the_image_as_one_argument():
    conn = FakeConnection("sha256:abc")
    outcome = images.pull(conn, "registry.lab:5000/tfc/trainer:2.21")
    assert conn.commands[0] == ["docker", "pull", "--quiet", "registry.lab:5000/tfc/trainer:2.21"]
    assert outcome.action == "pulled" and outcome.image_id == "sha256:abc"


def test_ship_skips_a_host_that_has_the_exact_image(tmp_path):
    conn = FakeConnection("sha256:same")
    outcome = images.ship(conn, images.Shipment("t:1", "sha256:same", cache=tmp_path))
    assert outcome.action == "present" and outcome.bytes_sent == 0
    assert not list(tmp_path.iterdir())  # no archive was even made


class FakeEngineHost:
    """A host's engine as `ship` sees it: the layers it holds, whether it uses the containerd
    store, and whether its `docker load` takes a delta. Loading sets the image ID."""

    def __init__(self, shipment, held: list[list[str]], containerd: bool = False, refuses_delta: bool = False):
        self.held, self.containerd, self.refuses_delta = held, containerd, refuses_delta
        self.image_id, self.loads, self.bytes_sent, self.loaded_id = None, [], 0, shipment.image_id
        self.host = type("H", (), {"name": "h1"})()

    def run(self, command, check=True, **kw):
        if command[:3] == ["docker", "image", "inspect"]:
            return Result(0 if self.image_id else 1, f"{self.image_id or ''}\n", "")
        driver = '[["driver-type","io.containerd.snapshotter.v1"]]' if self.containerd else '[["Backing Filesystem","extfs"]]'
        return Result(0, "\n".join([driver, *map(json.dumps, self.held)]) + "\n", "")

    def stream(self, command, on_output, stdin_chunks=(), **kw):
        data = b"".join(stdin_chunks)
        self.bytes_sent += len(data)
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
            names = tar.getnames()
        self.loads.append(names)
        if self.refuses_delta and len(names) < 4:
            raise RemoteError("h1", "docker load", 1, "open /var/lib/docker/tmp/x/layer.tar: no such file")
        self.image_id = self.loaded_id


@pytest.fixture
def shipment(tmp_path, monkeypatch):
    """An image of three layers, split as if `docker save` had given it."""
    from test_layers import BLOBS, chunks_of, docker_save
    saved, image_id = docker_save(BLOBS)
    monkeypatch.setattr(images, "save_stream", lambda image: chunks_of(saved))
    return images.Shipment("t:1", image_id, tmp_path)


def test_ship_sends_only_the_layers_the_host_lacks(shipment):
    first_two = shipment.parts().diff_ids[:2]
    host = FakeEngineHost(shipment, [first_two])
    outcome = images.ship(host, shipment)
    assert (outcome.layers_sent, outcome.layers_total, outcome.note) == (1, 3, "")
    assert len(host.loads[0]) == 3 and outcome.bytes_sent == host.bytes_sent
    assert outcome.summary() == f"shipped 1/3 layers, {host.bytes_sent:,} B"


def test_ship_sends_the_full_archive_to_a_containerd_store_and_says_why(shipment):
    host = FakeEngineHost(shipment, [], containerd=True)
    outcome = images.ship(host, shipment)
    assert "containerd image store" in outcome.note and outcome.action == "shipped"
    assert "manifest.json" in host.loads[0] and len(host.loads[0]) == 5  # docker save as it was


def test_a_refused_delta_falls_back_to_the_full_archive_and_says_so(shipment):
    host = FakeEngineHost(shipment, [shipment.parts().diff_ids[:2]], refuses_delta=True)
    outcome = images.ship(host, shipment)
    assert len(host.loads) == 2 and "delta was refused" in outcome.note and "no such file" in outcome.note
    assert host.image_id == shipment.image_id


def test_transfer_detail_shows_bytes_rate_and_eta():
    from launcher.progress import transfer_detail
    assert transfer_detail("image", 50_000_000, 200_000_000, 2.0) == \
        "sending image: 50.0 of 200.0 MB, 25.0 MB/s, ETA 0:00:06"


def test_build_commands_fetch_wheels_then_build_with_buildkit(tmp_path):
    fetch, build = images.build_command("tensorflow/tensorflow:2.21.0-gpu", "tfc:1", tmp_path)
    assert fetch == ["bash", f"{tmp_path}/docker/fetch-wheels.sh", "tensorflow/tensorflow:2.21.0-gpu"]
    assert build[:4] == ["docker", "buildx", "build", "--load"] and "BASE_IMAGE=tensorflow/tensorflow:2.21.0-gpu" in build


def test_context_tarball_holds_the_trainer_and_docker_files_only():
    import io
    import tarfile
    names = tarfile.open(fileobj=io.BytesIO(images.context_tarball())).getnames()
    assert "trainer/main.py" in names and "docker/Dockerfile" in names and ".dockerignore" in names
    assert not any(n.startswith(("launcher", "tests")) or "__pycache__" in n for n in names)
