"""What `tfcompose tensorboard` serves (launcher/stages/tensorboard_source.py): which host, which
folder on it or in a collected run, which image; anything else refused naming what is expected."""
from __future__ import annotations

import pytest

from launcher.errors import BadAnswer, BadInput
from launcher.stages import tensorboard_source as source
from support.builders import cluster, run_folder


def test_the_chief_by_default_and_any_host_of_a_parallel_search():
    c = cluster(3)
    assert source.pick_host(c, None, lambda: False).name == "h0"
    assert source.pick_host(c, "h2", lambda: True).name == "h2"


def test_an_unknown_host_is_refused_naming_the_hosts():
    with pytest.raises(BadInput) as exc:
        source.pick_host(cluster(2), "h9", lambda: True)
    assert exc.value.lines == ["--host: Received 'h9'. Expected a host of inv.yaml: h0, h1."]


def test_a_worker_of_a_sync_search_is_refused_it_writes_no_tensorboard_logs():
    with pytest.raises(BadInput, match=r"--host: Received 'h1', a worker of a sync search.*the chief, h0"):
        source.pick_host(cluster(2), "h1", lambda: False)


def test_the_trainer_folder_or_all_of_a_run_programs_results():
    assert source.logdir(cluster(1)) == "/results/tensorboard"
    byo = cluster(1, run={"command": ["python", "train.py"], "code_dir": "."})
    assert source.logdir(byo) == "/results"


def test_the_image_is_the_id_the_clusters_container_runs():
    image = "sha256:" + "a" * 64
    assert source.image_of({"Image": image}, "h0") == image
    for hostile in ({"Image": "alpine; rm -rf /"}, {"Image": ["x"]}, {}):
        with pytest.raises(BadAnswer):
            source.image_of(hostile, "h0")


def test_a_collected_sync_run_serves_its_tensorboard_folder(tmp_path):
    run = run_folder(tmp_path / "c" / "abc", "tensorboard")
    assert source.collected_logdir(run, None) == run / "tensorboard"


def test_a_collected_parallel_run_serves_every_host_or_the_one_asked_for(tmp_path):
    run = run_folder(tmp_path, "hosts/h0/tensorboard", "hosts/h1/tensorboard")
    assert source.collected_logdir(run, None) == run / "hosts"
    assert source.collected_logdir(run, "h1") == run / "hosts" / "h1" / "tensorboard"
    with pytest.raises(BadInput, match=r"--host: Received 'h7'. Expected a host of .*: h0, h1."):
        source.collected_logdir(run, "h7")


def test_a_folder_that_is_not_a_collected_run_is_refused(tmp_path):
    (tmp_path / "notes").mkdir()
    for folder in (tmp_path / "notes", tmp_path / "absent"):
        with pytest.raises(BadInput, match="Expected a collected run: runs/<cluster>/<run>"):
            source.collected_logdir(folder, None)
    with pytest.raises(BadInput, match="Expected no --host"):
        source.collected_logdir(run_folder(tmp_path / "sync", "tensorboard"), "h0")
