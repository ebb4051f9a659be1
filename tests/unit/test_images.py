"""Image modes at the command boundary (the registry-backed `pull` cannot run here)."""
from __future__ import annotations

from launcher import image as images
from launcher.connection import Result


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
    outcome = images.ship(conn, images.Archive("t:1", "sha256:same", cache_dir=tmp_path))
    assert outcome.action == "present" and outcome.bytes_sent == 0
    assert not list(tmp_path.iterdir())  # no archive was even made


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
