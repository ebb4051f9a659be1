"""This machine's image build."""
from __future__ import annotations

from launcher.image import local as images


def test_build_commands_fetch_wheels_then_build_with_buildkit(tmp_path):
    fetch, build = images.build_command("tensorflow/tensorflow:2.21.0-gpu", "tfc:1", tmp_path)
    assert fetch == ["bash", f"{tmp_path}/docker/fetch-wheels.sh", "tensorflow/tensorflow:2.21.0-gpu"]
    assert build[:4] == ["docker", "buildx", "build", "--load"] and "BASE_IMAGE=tensorflow/tensorflow:2.21.0-gpu" in build
