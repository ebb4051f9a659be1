"""This machine's image build."""
from __future__ import annotations

from launcher.image import local as images


def test_build_commands_fetch_wheels_then_build_with_buildkit(tmp_path):
    fetch, build = images.build_command("tensorflow/tensorflow:2.21.0-gpu", "tfc:1", tmp_path)
    assert fetch == ["bash", f"{tmp_path}/docker/fetch-wheels.sh", "tensorflow/tensorflow:2.21.0-gpu"]
    assert build[:4] == ["docker", "buildx", "build", "--load"] and "BASE_IMAGE=tensorflow/tensorflow:2.21.0-gpu" in build


def test_the_first_split_of_an_image_reports_docker_save_then_compressing_as_work_here(tmp_path, monkeypatch):
    from launcher.reporter import RecordingReporter, local_reporter
    from support.builders import BLOBS, chunks_of, docker_save
    saved, image_id = docker_save(BLOBS)
    monkeypatch.setattr(images, "save_stream", lambda image: chunks_of(saved))
    monkeypatch.setattr(images, "image_size", lambda image: len(saved) - 3000)   # the engine's figure is a little short
    seen = RecordingReporter()
    shipment = images.Shipment("t:1", image_id, tmp_path, progress=lambda what: local_reporter(seen, what))
    shipment.parts()
    said = [detail for _, what, detail in seen.events if what == "local"]
    assert said[0] == f"docker save of t:1 0/{len(saved) - 3000}"        # said before the engine's first byte
    assert said[-1].startswith("compressing the new layers of t:1 ")
    ends = [d for d in said if d.split()[-1].split("/")[0] == d.split()[-1].split("/")[1]]
    assert ends == [f"docker save of t:1 {len(saved)}/{len(saved)}",
                    f"compressing the new layers of t:1 {sum(map(len, BLOBS))}/{sum(map(len, BLOBS))}"]
    seen.events.clear()
    images.Shipment("t:1", image_id, tmp_path, progress=lambda what: local_reporter(seen, what)).parts()
    assert seen.events == []          # split before: nothing to do here, nothing said
