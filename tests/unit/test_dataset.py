"""Dataset sync and verification without hosts: the source checks, manifests and their cache, the
rules that say what to send, remove or refuse (tests/integration/test_dataset_sync.py runs them over sshd)."""
from __future__ import annotations

import io
import os
import tarfile

import pytest
import yaml

from launcher import dataset, dataset_digest as dd
from launcher.cli import main


def make_source(root, files=None):
    files = files or {"train/CN/a.png": b"a" * 100, "train/AD/b.png": b"b" * 50, "val/CN/c.png": b"c"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_manifest_lists_size_and_hash_and_skips_its_own_marker_and_half_arrived_files(tmp_path):
    root = make_source(tmp_path / "d")
    (root / dd.MARKER).write_text("")
    (root / "train" / "CN" / ("x.png" + dd.PART)).write_bytes(b"half")
    doc = dd.manifest(str(root))
    assert sorted(doc["files"]) == ["train/AD/b.png", "train/CN/a.png", "val/CN/c.png"]
    assert doc["files"]["val/CN/c.png"][0] == 1 and len(doc["files"]["val/CN/c.png"][1]) == 64


def test_the_cache_spares_rereading_unchanged_files_but_not_a_replaced_one(tmp_path, monkeypatch):
    root, cache = make_source(tmp_path / "d"), tmp_path / "cache.json"
    first = dd.manifest(str(root), str(cache))
    read = []
    real = dd._hash
    monkeypatch.setattr(dd, "_hash", lambda path: read.append(path) or real(path))
    assert dd.manifest(str(root), str(cache)) == first and read == []
    stat = (root / "val/CN/c.png").stat()
    (root / "new").write_bytes(b"z")  # same size, same mtime, new inode: a sync's rename
    os.utime(root / "new", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(root / "new", root / "val/CN/c.png")
    again = dd.manifest(str(root), str(cache))
    assert read == [str(root / "val/CN/c.png")] and again["files"]["val/CN/c.png"] != first["files"]["val/CN/c.png"]


@pytest.mark.parametrize("breakage, says", [
    (lambda r: (r / "train" / "empty").mkdir(), "empty folder"),
    (lambda r: (r / "train" / "CN" / "out.png").symlink_to("/etc/hostname"), "symlink that leaves"),
    (lambda r: (r / "train" / "CN" / "bad\nname.png").write_bytes(b"x"), "control characters"),
    (lambda r: os.mkfifo(r / "train" / "CN" / "pipe"), "neither a file nor a folder"),
])
def test_a_source_that_cannot_be_copied_exactly_is_refused_naming_the_path(tmp_path, breakage, says):
    root = make_source(tmp_path / "d")
    breakage(root)
    (problem,) = dataset.source_problems(root)
    assert says in problem and str(root) in problem


def test_an_unreadable_file_is_refused(tmp_path, monkeypatch):
    root = make_source(tmp_path / "d")
    # Root (as CI runs) reads every file: the permission answer is faked, the walk is real.
    monkeypatch.setattr(dataset.os, "access", lambda path, mode: not str(path).endswith("a.png"))
    (problem,) = dataset.source_problems(root)
    assert problem == f"{root / 'train/CN/a.png'}: cannot be read"


def test_a_symlink_inside_the_source_counts_as_its_file(tmp_path):
    root = make_source(tmp_path / "d")
    (root / "train" / "CN" / "again.png").symlink_to(root / "train" / "CN" / "a.png")
    assert dataset.source_problems(root) == []
    doc = dd.manifest(str(root), follow_file_links=True)
    assert doc["files"]["train/CN/again.png"] == doc["files"]["train/CN/a.png"]


def test_a_folder_without_class_folders_is_refused(tmp_path):
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.png").write_bytes(b"x")
    assert "no class folders" in dataset.source_problems(tmp_path / "flat")[0]
    assert "not an existing folder" in dataset.source_problems(tmp_path / "nowhere")[0]


def test_validate_names_the_file_and_field_of_a_bad_dataset_source_and_exits_2(tmp_path, capsys):
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"cluster": "c", "dataset_source": str(tmp_path / "missing"),
                                   "defaults": {"data_dir": "/srv/data"},
                                   "hosts": [{"name": "a", "address": "10.0.0.1"}]}))
    assert main(["validate", "-i", str(inv)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[:-1]  # the last line counts the problems
    assert len(err) == 1 and err[0].startswith(f"{inv}:2:") and "dataset_source" in err[0] and "not an existing folder" in err[0]


def test_sync_sends_missing_and_changed_files_and_removes_extras_and_links():
    source = {"files": {"a": [1, "h1"], "b": [2, "h2"], "c": [3, "h3"]}, "other": [], "empty_dirs": [], "unreadable": []}
    copy = {"files": {"a": [1, "h1"], "b": [2, "OLD"], "x": [9, "hx"]}, "other": ["lnk"], "empty_dirs": [], "unreadable": []}
    assert dataset.plan_sync(source, copy) == (["b", "c"], ["x", "lnk"])
    assert dataset.plan_sync(source, source) == ([], [])


def test_judge_names_each_differing_host_and_its_first_differences():
    ref = {"files": {f"f{i}": [1, "h"] for i in range(8)}, "other": [], "empty_dirs": [], "unreadable": []}
    same = {**ref, "files": dict(ref["files"])}
    fewer = {**ref, "files": {k: v for k, v in ref["files"].items() if k != "f3"}}
    messy = {**ref, "files": {**ref["files"], **{f"z{i}": [1, "h"] for i in range(9)}}}
    lines = dataset.judge({"h0": same, "h1": fewer, "h2": messy, "h3": {"missing": True}}, ref, "h0")
    assert lines[0] == "h1: 1 difference(s) from h0: missing f3"
    assert lines[1].startswith("h2: 9 difference(s) from h0: extra z0, extra z1") and lines[1].endswith(", …")
    assert lines[2] == "h3: data_dir does not exist"


def test_the_tar_stream_holds_each_file_under_its_temporary_name(tmp_path):
    root = make_source(tmp_path / "d", {"train/CN/" + "n" * 120 + ".png": b"long name", "val/AD/b.png": b"b" * 700})
    source = dd.manifest(str(root))
    data = b"".join(dataset.tar_stream(root, sorted(source["files"]), source))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar}
    assert got == {rel + dd.PART: (root / rel).read_bytes() for rel in source["files"]}


@pytest.mark.parametrize("name, ok", [("train/CN/a.png", True), ("../../etc/passwd", False), ("/etc/passwd", False),
                                      ("a/../../b", False), ("a\x1b[31mred", False), ("", False), ("ok..png", True)])
def test_paths_a_host_names_must_stay_inside_its_data_dir_and_be_printable(name, ok):
    assert dataset.safe_relative(name) is ok


def test_a_host_manifest_naming_paths_outside_is_a_bad_answer():
    from launcher.connection import Result
    from launcher.errors import BadAnswer

    class Conn:
        def run(self, command, **kw):
            return Result(0, '{"files": {"../../home/op/.ssh/authorized_keys": [1, "h"]}, "other": [], '
                             '"empty_dirs": [], "unreadable": []}', "")
    host = type("H", (), {"name": "h1", "data_dir": "/data", "bundle_dir": "/w/c"})()
    plan = type("P", (), {"container_image": "img"})()
    with pytest.raises(BadAnswer, match="relative paths inside data_dir"):
        dataset.host_manifest(Conn(), plan, host)
