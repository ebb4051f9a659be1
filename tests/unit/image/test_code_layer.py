"""Your code as an image layer made without Docker: the same folder gives the same layer and image
ID (so an unchanged project ships nothing), and the config is the parent's with the layer on top."""
from __future__ import annotations

import json
import os
import socket
import tarfile

from launcher import plan
from launcher.image import code_layer as code_image


def project(root):
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    (root / "train.py").write_text("print('hi')\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    return root


def test_the_same_folder_gives_the_same_layer_whatever_its_timestamps(tmp_path):
    folder = project(tmp_path / "p")
    first = code_image.layer_tar(folder, tmp_path / "a.tar")
    (folder / "train.py").touch()
    assert code_image.layer_tar(folder, tmp_path / "b.tar") == first
    (folder / "train.py").write_text("print('changed')\n")
    assert code_image.layer_tar(folder, tmp_path / "c.tar")[0] != first[0]


def test_the_layer_holds_the_code_under_workspace_without_caches(tmp_path):
    folder = project(tmp_path / "p")
    code_image.layer_tar(folder, tmp_path / "a.tar")
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = {m.name: m for m in tar}
        assert tar.extractfile("workspace/pkg/mod.py").read() == b"X = 1\n"
    assert sorted(members) == ["workspace", "workspace/pkg", "workspace/pkg/mod.py", "workspace/run.sh", "workspace/train.py"]
    assert members["workspace/run.sh"].mode == 0o755 and members["workspace/train.py"].mode == 0o644
    assert all(m.uid == 0 and m.mtime == 0 for m in members.values())


def test_the_config_is_the_parents_with_the_layer_and_the_code_label_on_top():
    parent = {"architecture": "amd64", "created": "2026-01-01T00:00:00Z", "rootfs": {"type": "layers", "diff_ids": ["sha256:a"]},
              "config": {"Env": ["PATH=/bin"], "Labels": {"keep": "me"}, "Entrypoint": ["tfcompose-entrypoint"]},
              "history": [{"created_by": "base"}]}
    config = json.loads(code_image.appended_config(json.dumps(parent).encode(), "sha256:code", "abc123"))
    assert config["rootfs"]["diff_ids"] == ["sha256:a", "sha256:code"]
    assert config["config"]["Labels"] == {"keep": "me", "tfcompose.code": "abc123"}
    assert config["config"]["Entrypoint"] == ["tfcompose-entrypoint"] and config["config"]["WorkingDir"] == "/workspace"
    assert len(config["history"]) == 2 and config["created"] == parent["created"]


def test_git_history_fifos_and_sockets_are_neither_in_the_layer_nor_in_the_run_id(tmp_path):
    folder = project(tmp_path / "p")
    before = plan.code_hash(folder)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")      # a `git commit`: no file of the code changed
    os.mkfifo(folder / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "agent.sock"))
        assert plan.code_hash(folder) == before
        code_image.layer_tar(folder, tmp_path / "a.tar")
    with tarfile.open(tmp_path / "a.tar") as tar:
        assert not any(n.endswith(("pipe", "agent.sock")) or ".git" in n for n in tar.getnames())


def test_a_file_name_that_is_not_utf8_is_hashed_and_carried_as_it_is(tmp_path):
    folder = project(tmp_path / "p")
    odd = os.fsdecode(b"data-\xff.bin")
    (folder / odd).write_bytes(b"x")
    assert plan.code_hash(folder) != plan.code_hash(project(tmp_path / "q"))
    code_image.layer_tar(folder, tmp_path / "a.tar")
    with tarfile.open(tmp_path / "a.tar") as tar:
        assert f"workspace/{odd}" in tar.getnames()
