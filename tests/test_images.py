"""Image modes at the command boundary (the registry-backed `pull` cannot run here)."""
from __future__ import annotations

import os
import shutil
import subprocess

from launcher import images
from launcher.remote import Result


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


def test_archive_records_the_requested_tag_even_when_the_image_has_several(tmp_path):
    """`docker load` on a host recreates the tags in the archive: it must be the one the host looks for."""
    import gzip
    import json as json_
    import tarfile as tarfile_

    from conftest import docker_ok, require
    require(docker_ok(), "no Docker engine answers `docker info`")
    (tmp_path / "x").write_text("x")
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY x /x\n")
    tags = ["aaa-tfc-test-first:1", "tfc-test-wanted:1"]  # the first tag sorts first
    build = subprocess.run(["docker", "buildx", "build", "--load", "-t", tags[0], "-t", tags[1], str(tmp_path)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    try:
        archive = images.Archive(tags[1], images.local_image_id(tags[1]), cache_dir=tmp_path / "cache")
        with gzip.open(archive.ensure()) as fh, tarfile_.open(fileobj=fh) as tar:
            manifest = json_.load(tar.extractfile("manifest.json"))
        assert manifest[0]["RepoTags"] == [tags[1]]
    finally:
        subprocess.run(["docker", "rmi", *tags], capture_output=True)


def test_fetch_wheels_reuses_its_wheels_until_the_base_image_changes(tmp_path):
    """Every `up` in ship mode builds the image: a repeat with the same base must not download again."""
    from conftest import docker_ok, require
    require(docker_ok(), "no Docker engine answers `docker info`")
    base = "tf-offline-base:cpu"
    inspect = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", base], capture_output=True, text=True)
    require(inspect.returncode == 0, f"{base} is not built (bash ../shared/ci/build-offline-base.sh)")
    script = tmp_path / "docker" / "fetch-wheels.sh"
    script.parent.mkdir()
    shutil.copy(images.REPO / "docker" / "fetch-wheels.sh", script)
    wheel = tmp_path / "docker" / "wheels" / "already_here-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_text("kept")
    script_hash = subprocess.run(["sha256sum", str(script)], capture_output=True, text=True).stdout.split()[0]
    stamp = tmp_path / "docker" / "wheels.stamp"
    stamp.write_text(f"{inspect.stdout.strip()} {script_hash}\n")
    # pip with no index and no config: any download attempt fails at once, leaving the folder empty.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    offline = {**env, "PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INDEX": "1"}

    reuse = subprocess.run(["bash", str(script), base], capture_output=True, text=True, env=offline)
    assert reuse.returncode == 0 and "already in" in reuse.stderr and wheel.read_text() == "kept"

    stamp.write_text(f"sha256:an-older-base {script_hash}\n")
    refetch = subprocess.run(["bash", str(script), base], capture_output=True, text=True, env=offline)
    assert refetch.returncode == 1 and "no wheel downloaded" in refetch.stderr
    assert not wheel.exists() and not stamp.exists()
