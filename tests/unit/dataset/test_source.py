"""dataset_source checks: what cannot be copied exactly is refused by validate."""
from __future__ import annotations

import os
import pytest
import yaml
from launcher.dataset import digest as dd, source
from launcher.cli import main
from support.builders import make_source


@pytest.mark.parametrize("breakage, says", [
    (lambda r: (r / "train" / "empty").mkdir(), "empty folder"),
    (lambda r: (r / "train" / "CN" / "out.png").symlink_to("/etc/hostname"), "symlink that leaves"),
    (lambda r: (r / "train" / "CN" / "bad\nname.png").write_bytes(b"x"), "control characters"),
    (lambda r: os.mkfifo(r / "train" / "CN" / "pipe"), "neither a file nor a folder"),
])
def test_a_source_that_cannot_be_copied_exactly_is_refused_naming_the_path(tmp_path, breakage, says):
    root = make_source(tmp_path / "d")
    breakage(root)
    (problem,) = source.source_problems(root)
    assert says in problem and str(root) in problem


def test_an_unreadable_file_is_refused(tmp_path, monkeypatch):
    root = make_source(tmp_path / "d")
    # Root (as CI runs) reads every file: the permission answer is faked, the walk is real.
    monkeypatch.setattr(source.os, "access", lambda path, mode: not str(path).endswith("a.png"))
    (problem,) = source.source_problems(root)
    assert problem == f"{root / 'train/CN/a.png'}: cannot be read"


def test_a_symlink_inside_the_source_counts_as_its_file(tmp_path):
    root = make_source(tmp_path / "d")
    (root / "train" / "CN" / "again.png").symlink_to(root / "train" / "CN" / "a.png")
    assert source.source_problems(root) == []
    doc = dd.manifest(str(root), follow_file_links=True)
    assert doc["files"]["train/CN/again.png"] == doc["files"]["train/CN/a.png"]


def test_a_folder_without_class_folders_is_refused(tmp_path):
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.png").write_bytes(b"x")
    assert "no class folders" in source.source_problems(tmp_path / "flat")[0]
    assert "not an existing folder" in source.source_problems(tmp_path / "nowhere")[0]


def test_validate_names_the_file_and_field_of_a_bad_dataset_source_and_exits_2(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"cluster": "c", "dataset_source": str(tmp_path / "missing"),
                                   "defaults": {"data_dir": "/srv/data"},
                                   "hosts": [{"name": "a", "address": "10.0.0.1"}]}))
    assert main(["validate", "-i", str(inv)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[:-1]  # the last line counts the problems
    assert len(err) == 1 and err[0].startswith(f"{inv}:2:") and "dataset_source" in err[0] and "not an existing folder" in err[0]


@pytest.mark.parametrize("breakage, says", [
    (lambda r: (r / "train" / "CN" / "loop.png").symlink_to(r / "train" / "CN" / "loop.png"), "loops or points at nothing"),
    (lambda r: (r / "train" / "CN" / os.fsdecode(b"scan-\xff.png")).write_bytes(b"x"), "not UTF-8"),
    (lambda r: (r / "train" / "CN" / ("n" * 245 + ".png")).write_bytes(b"x"), "too long to copy"),
])
def test_names_up_could_never_copy_are_refused_by_validate(tmp_path, breakage, says):
    root = make_source(tmp_path / "d")
    breakage(root)
    (problem,) = source.source_problems(root)
    assert says in problem and "\udcff" not in problem


def test_a_cache_folder_that_cannot_be_made_only_costs_time(tmp_path, monkeypatch):
    root = make_source(tmp_path / "d")
    (tmp_path / "not-a-folder").write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    doc = source.source_manifest(root, tmp_path / "inv.yaml")
    assert sorted(doc["files"]) == ["train/AD/b.png", "train/CN/a.png", "val/CN/c.png"]
