"""The dataset sync: what to send and remove, judging the hosts, what a host may name."""
from __future__ import annotations

import io
import json
import tarfile
from types import SimpleNamespace

import pytest
from launcher.dataset import digest as dd, sync as dataset
from launcher.errors import BadAnswer
from launcher.ssh.connection import Result
from support.builders import make_source
from support.fakes import FakeConnection


def test_sync_sends_missing_and_changed_files_and_removes_extras_and_links():
    source = {"files": {"a": [1, "h1"], "b": [2, "h2"], "c": [3, "h3"]}, "other": [], "empty_dirs": [], "unreadable": []}
    copy = {"files": {"a": [1, "h1"], "b": [2, "OLD"], "x": [9, "hx"]}, "other": ["lnk"], "empty_dirs": [], "unreadable": []}
    assert dataset.plan_sync(source, copy) == (["b", "c"], ["lnk", "x"])
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


GOOD = "a" * 64


@pytest.mark.parametrize("answer", [
    {"files": {"../../home/op/.ssh/authorized_keys": [1, GOOD]}, "other": [], "empty_dirs": [], "unreadable": []},
    {"files": {"a.png": ["many", GOOD]}, "other": [], "empty_dirs": [], "unreadable": []},
    {"files": {"a.png": [1, "short"]}, "other": [], "empty_dirs": [], "unreadable": []},
    {"files": {"a.png": [1, GOOD]}, "other": [["nested"]], "empty_dirs": [], "unreadable": []},
    {"files": {"a\x1b]52;c;cGF5bG9hZA==\x07.png": [1, GOOD]}, "other": [], "empty_dirs": [], "unreadable": []},
    ["not", "a", "manifest"],
    "[" * 100_000,
])
def test_a_host_manifest_that_is_not_one_tfcompose_writes_is_a_bad_answer(answer):
    text = answer if isinstance(answer, str) else json.dumps(answer)
    conn = FakeConnection(lambda command: Result(0, text, ""))
    with pytest.raises(BadAnswer, match="relative paths inside data_dir"):
        dataset.host_manifest(conn, SimpleNamespace(container_image="img"),
                              SimpleNamespace(name="h1", data_dir="/data", bundle_dir="/w/c"))
