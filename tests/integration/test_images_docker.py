"""Image archives and the wheel cache against the real Docker engine."""
from __future__ import annotations

import os
import shutil
import subprocess

from launcher import REPO, image as images


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
    shutil.copy(REPO / "docker" / "fetch-wheels.sh", script)
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
