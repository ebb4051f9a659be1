"""Image archives and the wheel cache against the real Docker engine."""
from __future__ import annotations

import os
import shutil
import subprocess

from launcher.files import REPO
from launcher.image import local as images, stage as image_stage


def test_archive_records_the_requested_tag_even_when_the_image_has_several(tmp_path):
    """`docker load` on a host recreates the tags in the archive: it must be the one the host looks for."""
    import gzip
    import json as json_
    import tarfile as tarfile_

    from support.common import docker_ok, require
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
    from support.common import docker_ok, ensure_base_image, require
    require(docker_ok(), "no Docker engine answers `docker info`")
    base = ensure_base_image()
    inspect = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", base], capture_output=True, text=True)
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


def test_an_engine_loads_a_delta_archive_that_carries_only_the_layer_it_lacks(tmp_path):
    """The way in for layer deltas, on this machine's real engine: the base's layers stay behind."""
    import gzip
    import json as json_

    from support.common import docker_ok, require
    from launcher.image import layers
    require(docker_ok(), "no Docker engine answers `docker info`")
    for name, text in (("base", "FROM scratch\nCOPY big /big\n"), ("top", "FROM tfc-test-delta-base:1\nCOPY small /small\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text(text)
    (tmp_path / "base" / "big").write_bytes(os.urandom(3_000_000))
    (tmp_path / "top" / "small").write_text("the code that changed\n")
    try:
        for name in ("base", "top"):
            build = subprocess.run(["docker", "buildx", "build", "--load", "-t", f"tfc-test-delta-{name}:1",
                                    str(tmp_path / name)], capture_output=True, text=True)
            assert build.returncode == 0, build.stderr
        image_id = images.local_image_id("tfc-test-delta-top:1")
        parts = images.Shipment("tfc-test-delta-top:1", image_id, tmp_path / "cache").parts()
        held = subprocess.run(["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", "tfc-test-delta-base:1"],
                              capture_output=True, text=True, check=True).stdout
        missing = layers.missing_layers(parts.diff_ids, layers.present_chains([json_.loads(held)]))
        archive = b"".join(parts.chunks(missing))
        assert missing == [1] and len(archive) < 10_000  # the 3 MB base layer is not in it
        subprocess.run(["docker", "rmi", "tfc-test-delta-top:1"], capture_output=True, check=True)
        load = subprocess.run(["docker", "load"], input=gzip.decompress(archive), capture_output=True)
        assert load.returncode == 0, load.stderr
        assert images.local_image_id("tfc-test-delta-top:1") == image_id
        run = subprocess.run(["docker", "create", "tfc-test-delta-top:1", "x"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr  # a usable image, both layers in place
        cp = subprocess.run(["docker", "cp", f"{run.stdout.strip()}:/small", "-"], capture_output=True)
        subprocess.run(["docker", "rm", run.stdout.strip()], capture_output=True)
        assert b"the code that changed" in cp.stdout
    finally:
        subprocess.run(["docker", "rmi", "-f", "tfc-test-delta-top:1", "tfc-test-delta-base:1"], capture_output=True)


def test_a_code_layer_made_without_docker_loads_and_holds_the_code(tmp_path, monkeypatch):
    """The image `up` makes of run.code_dir by appending a layer here is one Docker accepts and runs."""
    import json

    import yaml

    from support.common import docker_ok, require
    from launcher import plan as plan_mod
    from launcher.inventory.load import load_cluster
    require(docker_ok(), "no Docker engine answers `docker info`")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "Dockerfile").write_text("FROM scratch\nCOPY hello /hello\nWORKDIR /srv\nCMD [\"/hello\"]\n")
    (tmp_path / "base" / "hello").write_text("from the base\n")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('my script')\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"cluster": "c", "image": "tfc-test-code-base:1", "hosts": [{"name": "a", "address": "10.0.0.1"}],
                                   "run": {"command": ["python", "train.py"], "code_dir": str(tmp_path / "code")}}))
    plan = plan_mod.make(load_cluster(inv))
    try:
        build = subprocess.run(["docker", "buildx", "build", "--load", "-t", "tfc-test-code-base:1", str(tmp_path / "base")],
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr
        shipment = image_stage.code_shipment(plan)
        assert images.local_image_id(plan.container_image) == shipment.image_id  # loaded here too
        inspect, base = json.loads(subprocess.run(["docker", "image", "inspect", plan.container_image, "tfc-test-code-base:1"],
                                                  capture_output=True, text=True, check=True).stdout)
        assert inspect["Config"]["Labels"]["tfcompose.code"] == plan.code_hash and inspect["Config"]["WorkingDir"] == "/workspace"
        assert inspect["Config"]["Cmd"] == ["/hello"] and inspect["RootFS"]["Layers"][:-1] == base["RootFS"]["Layers"]
        made = subprocess.run(["docker", "create", plan.container_image], capture_output=True, text=True, check=True).stdout.strip()
        for path, text in (("/workspace/train.py", b"print('my script')"), ("/hello", b"from the base")):
            cp = subprocess.run(["docker", "cp", f"{made}:{path}", "-"], capture_output=True)
            assert text in cp.stdout, path
        subprocess.run(["docker", "rm", made], capture_output=True)
        assert image_stage.code_shipment(plan).image_id == shipment.image_id  # the same code: the same image, nothing to send
    finally:
        subprocess.run(["docker", "rmi", "-f", plan.container_image, "tfc-test-code-base:1"], capture_output=True)
