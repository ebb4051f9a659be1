"""The one way into a run folder (launcher/runfiles.py), on real files: no link followed (at a file's
name or on the way to it), no FIFO or socket read (refused, named, never waited on), a fresh
exclusive temporary name for every write (a link planted at the old fixed ones leads nowhere),
modes from the umask."""
from __future__ import annotations

import json
import os
import socket
import threading

import pytest

from launcher import runfiles
from launcher.runfiles import RunFileError
from trainer.spec import results

DOC = {"schema": 1, "candidates": [{"candidate": "x", "val_accuracy": 0.5, "val_loss": 1.0, "train_seconds": 1.0,
                                    "images_per_second": 1.0, "params": 1, "epochs": 1}],
       "best": {"candidate": "x", "val_accuracy": 0.5}}


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "runs" / "c" / "r"
    (folder / "logs").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(DOC))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret").write_text("not the run's")
    return folder


def test_a_fifo_is_refused_by_name_not_waited_on(run):
    os.mkfifo(run / "outcome.json")
    os.mkfifo(run / "logs" / "h0.log")
    for rel in ("outcome.json", "logs/h0.log"):
        with pytest.raises(RunFileError, match=rf"{rel}: Received a FIFO. Expected a regular file"):
            runfiles.read_bytes(run, rel, 1000)
    with pytest.raises(results.ResultsError, match="Received a FIFO"):
        os.replace(run / "outcome.json", run / "results.json")
        runfiles.load_results(run)
    assert runfiles.found(run, "results.json") == "a FIFO" and not runfiles.is_file(run, "results.json")


def test_a_socket_or_a_folder_where_a_file_belongs_is_named(run):
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(run / "tracking.json"))
        with pytest.raises(RunFileError, match="Received a socket"):
            runfiles.read_text(run, "tracking.json", 1000)
    with pytest.raises(RunFileError, match="logs: Received a folder. Expected a file"):
        runfiles.write_bytes(run, "logs", b"x")


def test_a_link_at_a_files_name_is_not_read_and_a_write_replaces_the_link_itself(run, tmp_path):
    secret = tmp_path / "elsewhere" / "secret"
    (run / "report.md").symlink_to(secret)
    with pytest.raises(RunFileError, match="report.md: Received a symbolic link"):
        runfiles.read_text(run, "report.md", 1000)
    runfiles.write_bytes(run, "report.md", b"# report\n")
    assert secret.read_text() == "not the run's" and not (run / "report.md").is_symlink()
    assert (run / "report.md").read_text() == "# report\n"


def test_a_link_in_place_of_a_folder_is_refused_for_reading_and_writing(run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (run / "history").symlink_to(elsewhere)
    with pytest.raises(RunFileError, match="history: Received a symbolic link. Expected a folder"):
        runfiles.read_text(run, "history/secret", 1000)
    with pytest.raises(RunFileError, match="history: Received a symbolic link. Expected a folder"):
        runfiles.write_bytes(run, "history/x.csv", b"epoch\n")
    with pytest.raises(RunFileError, match="Expected a folder"):
        runfiles.make_folder(run, "history/deeper")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["secret"]
    with pytest.raises(RunFileError, match="leaves the run folder"):
        runfiles.read_text(run, "../../../elsewhere/secret", 1000)


def test_links_planted_at_the_temporary_names_of_before_lead_nowhere(run, tmp_path):
    """A download once went to `.<name>.tfc-part`, a rewrite to `<name>.tmp`: fixed names, followed."""
    secret = tmp_path / "elsewhere" / "secret"
    for planted in (".results.json.tfc-part", "results.json.tmp", ".h0.log.tfc-part"):
        (run / planted).symlink_to(secret)
    runfiles.write_results(run, DOC)
    with runfiles.writer(run, "logs/h0.log") as out:
        out.write(b"a log\n")
    assert secret.read_text() == "not the run's"
    assert runfiles.load_results(run) == DOC


def test_two_writers_at_once_never_share_a_temporary_name(run):
    def write(i: int) -> None:
        for _ in range(50):
            runfiles.write_bytes(run, "report.md", f"writer {i}\n".encode() * 1000)
    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = (run / "report.md").read_text()
    assert len(set(text.splitlines())) == 1 and len(text.splitlines()) == 1000      # one writer's file, whole
    assert [p.name for p in run.iterdir() if p.name.endswith(runfiles.PART)] == []


def test_files_are_readable_as_the_umask_says_unless_a_mode_is_asked(run):
    umask = os.umask(0o027)
    try:
        runfiles.write_bytes(run, "report.md", b"x")
        runfiles.write_bytes(run, "key", b"x", mode=0o600)
        with runfiles.writer(run, "logs/h0.log") as out:
            out.write(b"x")
    finally:
        os.umask(umask)
    assert (run / "report.md").stat().st_mode & 0o777 == 0o640
    assert (run / "logs" / "h0.log").stat().st_mode & 0o777 == 0o640
    assert (run / "key").stat().st_mode & 0o777 == 0o600


def test_a_file_larger_than_its_bound_is_refused_and_a_failed_write_leaves_nothing(run):
    (run / "tracking.json").write_bytes(b"x" * 2000)
    with pytest.raises(RunFileError, match="a file of 2,000 bytes. Expected at most 1,000 bytes"):
        runfiles.read_bytes(run, "tracking.json", 1000)
    with pytest.raises(ZeroDivisionError):
        with runfiles.writer(run, "report.md") as out:
            out.write(b"half")
            1 / 0
    assert not (run / "report.md").exists() and [p for p in run.iterdir() if runfiles.PART in p.name] == []


def test_a_listing_names_each_entry_by_kind_without_following(run, tmp_path):
    os.mkfifo(run / "logs" / "h1.log")
    (run / "logs" / "h0.log").write_text("x")
    (run / "logs" / "h2.log").symlink_to(tmp_path / "elsewhere" / "secret")
    assert runfiles.listing(run, "logs") == [("h0.log", "a regular file"), ("h1.log", "a FIFO"),
                                             ("h2.log", "a symbolic link")]
    assert runfiles.listing(run, "nothing-here") == []
