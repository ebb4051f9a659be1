"""The image on one host: its survey, pull, build context."""
from __future__ import annotations

import io
import json
import tarfile

from launcher.image import layers, on_host
from launcher.ssh.connection import Result
from support.fakes import FakeConnection, prefix_answers


def test_pull_runs_docker_pull_with_the_image_as_one_argument():
    conn = FakeConnection(prefix_answers({("docker", "image", "inspect"): Result(0, "sha256:abc\n", "")}))
    outcome = on_host.pull(conn, "registry.lab:5000/tfc/trainer:2.21")
    assert conn.commands[0] == ["docker", "pull", "--quiet", "registry.lab:5000/tfc/trainer:2.21"]
    assert outcome.action == "pulled" and outcome.image_id == "sha256:abc"


def test_one_survey_says_the_image_the_store_and_every_layer_chain_held():
    held = [["sha256:a", "sha256:b"], ["sha256:a"]]
    answer = "\n".join(["sha256:" + "1" * 64, '[["driver-type","io.containerd.snapshotter.v1"]]',
                        *map(json.dumps, held), "not json", '{"a": 1}']) + "\n"
    conn = FakeConnection(lambda command: Result(0, answer, ""))
    found = on_host.survey(conn, "t:1")
    assert len(conn.commands) == 1 and conn.commands[0][-1] == "t:1"
    assert found.has("sha256:" + "1" * 64) and found.containerd_store
    assert found.chains == frozenset(layers.present_chains(held))


def test_an_absent_image_surveys_as_none():
    conn = FakeConnection(lambda command: Result(0, "\n[]\n", ""))
    found = on_host.survey(conn, "t:1")
    assert found.image_id is None and not found.containerd_store and not found.chains


def test_context_tarball_holds_the_trainer_and_docker_files_only():
    names = tarfile.open(fileobj=io.BytesIO(on_host.context_tarball())).getnames()
    assert "trainer/main.py" in names and "docker/Dockerfile" in names and ".dockerignore" in names
    assert not any(n.startswith(("launcher", "tests")) or "__pycache__" in n for n in names)
