"""Dataset sync and verification through real sshd hosts: the copy is exact, only changes travel,
a cut transfer leaves no half file, and hosts that disagree stop `up` before anything trains."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from launcher.dataset import sync as dataset
from support.cluster import cli, labelled

pytestmark = pytest.mark.integration
TRAIN = {"dataset": {"kind": "image_folder", "train_dir": "/data/train", "val_dir": "/data/val", "image_size": [32, 32]},
         "candidates": ["small_cnn"], "epochs": 1, "batch_per_replica": 16, "join_timeout_s": 90}
LINE = r"^{host}: dataset \((\d+) files, digest (\w+)(?:, sent (\d+) \(([\d,]+) B\), removed (\d+)|, nothing to send)\)$"


def dataset_lines(out: str, hosts=("h0", "h1")) -> dict[str, tuple]:
    found = {h: re.search(LINE.format(host=h), out, re.M) for h in hosts}
    assert all(found.values()), out
    return {h: (int(m.group(1)), m.group(2), int(m.group(3) or 0), int((m.group(4) or "0").replace(",", "")),
                int(m.group(5) or 0)) for h, m in found.items()}


def with_dataset(inv, hosts, source=None):
    doc = yaml.safe_load(inv.read_text())
    for entry, host in zip(doc["hosts"], hosts):
        entry["data_dir"] = str(host.workdir / "data")
    doc.pop("dataset_source", None)
    if source:
        doc["dataset_source"] = str(source)
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inv


def copy_files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != ".tfcompose-dataset")


def test_up_syncs_the_dataset_exactly_sends_only_changes_and_refuses_hosts_that_disagree(
        cluster_env, image_folder, capsys, tmp_path, monkeypatch):
    source = tmp_path / "oasis"
    shutil.copytree(image_folder, source)
    name, inv, hosts = cluster_env(n=2, train=TRAIN)
    with_dataset(inv, hosts, source)
    data = [h.workdir / "data" for h in hosts]
    files = copy_files(source)

    # A data_dir holding someone else's files is not emptied: refused, naming the host.
    data[1].mkdir(parents=True)
    (data[1] / "notes.txt").write_text("mine")
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 1 and "h1: data_dir" in err and "did not put there" in err, out + err
    assert (data[1] / "notes.txt").read_text() == "mine" and labelled(name) == []
    (data[1] / "notes.txt").unlink()

    # A transfer cut after the first files: nothing half-written under a final name.
    real = dataset.tar_stream

    def cut(root, paths, src):
        for n, chunk in enumerate(real(root, paths, src)):
            if n == 40:
                raise ConnectionResetError("the link went down")
            yield chunk
    monkeypatch.setattr(dataset, "tar_stream", cut)
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 1 and labelled(name) == [], out + err
    assert "dataset failed" in err and "the link went down" in err
    for folder in data:
        for path in folder.rglob("*.png"):
            assert path.read_bytes() == (source / path.relative_to(folder)).read_bytes()
    monkeypatch.undo()

    # The next up completes it, and the trainer trains on the copies.
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"))
    assert code == 0, out + err
    first = dataset_lines(out)
    assert first["h0"][0] == first["h1"][0] == len(files) and first["h0"][1] == first["h1"][1]
    assert all(copy_files(folder) == files for folder in data)
    assert not any(p.name.endswith(".tfcompose-part") for folder in data for p in folder.rglob("*"))
    results = json.loads((tmp_path / "runs" / name / "latest" / "results.json").read_text())
    assert results["workers"] == 2 and results["candidates"][0]["candidate"] == "small_cnn"

    # Nothing changed: nothing sent.
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0 and "nothing to send" in out and dataset_lines(out)["h0"][2:] == (0, 0, 0), out + err

    # One file's content changed: that file alone travels, to every host.
    changed = source / files[0]
    changed.write_bytes((source / files[1]).read_bytes())
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0, out + err
    for host, (count, _, sent, sent_bytes, removed) in dataset_lines(out).items():
        assert (count, sent, removed) == (len(files), 1, 0) and changed.stat().st_size <= sent_bytes < changed.stat().st_size + 4096
    assert all((folder / files[0]).read_bytes() == changed.read_bytes() for folder in data)

    # Copied by hand (no dataset_source) and one host lost a file: up refuses, naming host and file.
    (data[1] / files[2]).unlink()
    with_dataset(inv, hosts)
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 1 and f"h1: 1 difference(s) from h0: missing {files[2]}" in err, out + err
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 1 and f"h1: 1 difference(s) from h0: missing {files[2]}" in err, out + err
    assert "h0: 1 difference" not in err

    # With the source again, the sync puts it back.
    with_dataset(inv, hosts, source)
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0, out + err
    lines = dataset_lines(out)
    assert lines["h1"][2] == 1 and lines["h0"][2] == 0 and copy_files(data[1]) == files
    assert cli(capsys, "down", "-i", str(inv))[0] == 0


def test_a_copied_marker_or_a_linked_data_dir_is_never_filled_and_a_refusal_changes_no_host(
        cluster_env, image_folder, capsys, tmp_path):
    source = tmp_path / "oasis"
    shutil.copytree(image_folder, source)
    name, inv, hosts = cluster_env(n=2, train=TRAIN)
    with_dataset(inv, hosts, source)
    data = [h.workdir / "data" for h in hosts]
    assert cli(capsys, "up", "-i", str(inv))[0] == 0
    files = copy_files(source)

    # h1's folder replaced by a copy of h0's (`cp -a` carries the marker along) plus a thesis;
    # h0 holds a file the sync would remove. Refused on h1, and nothing changes on h0 either.
    shutil.rmtree(data[1])
    subprocess.run(["cp", "-a", str(data[0]), str(data[1])], check=True)
    (data[1] / "thesis").mkdir()
    (data[1] / "thesis" / "chapter1.tex").write_text("\\chapter{One}")
    (data[0] / "extra.png").write_bytes(b"not in the source")
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 1 and "h1: data_dir" in err and "copied" in err and "nothing was changed on any host" in err, out + err
    assert (data[1] / "thesis" / "chapter1.tex").read_text() == "\\chapter{One}"
    assert (data[0] / "extra.png").exists()

    # A data_dir that is a link into a folder carrying h0's marker: refused too.
    shutil.rmtree(data[1])
    data[1].symlink_to(data[0])
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 1 and "symbolic link" in err and (data[0] / "extra.png").exists(), out + err
    data[1].unlink()

    # Both hosts on one folder (NFS, or two hosts on one machine): synced once, and it is exact.
    doc = yaml.safe_load(inv.read_text())
    doc["hosts"][1]["data_dir"] = str(data[0])
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0, out + err
    assert copy_files(data[0]) == files and not (data[0] / "extra.png").exists()

    # An empty folder appearing in a synced data_dir is removed, and later ups pass.
    (data[0] / "train" / "new-class").mkdir()
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0 and not (data[0] / "train" / "new-class").exists(), out + err
    assert cli(capsys, "down", "-i", str(inv))[0] == 0
