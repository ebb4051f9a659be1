"""The chief's state mirrored (elastic): a consistent snapshot at each epoch, adopted once by the
host that becomes chief."""
from __future__ import annotations

import json
import sqlite3
from contextlib import closing

from trainer.train import mirror


def chief_files(tmp_path):
    backups, results = tmp_path / "backup" / "h0", tmp_path / "results"
    backups.mkdir(parents=True)
    with closing(sqlite3.connect(backups / "study.db")) as db:
        db.execute("create table trials (number int, value real)")
        db.execute("insert into trials values (0, 0.91)")
        db.commit()
    (results / "history").mkdir(parents=True)
    (results / "history" / "small_cnn.csv").write_text("epoch,accuracy\n1,0.5\n")
    (results / "best_model.keras").write_bytes(b"model" * 1000)
    return backups, results


def test_a_snapshot_holds_the_study_history_and_best_model_and_links_what_did_not_change(tmp_path):
    backups, results = chief_files(tmp_path)
    first = mirror.snapshot(backups, results, {"host": "h0", "trial": "small_cnn", "epoch": 1})
    with closing(sqlite3.connect(first / "study.db")) as db:
        assert db.execute("select value from trials").fetchall() == [(0.91,)]       # a real SQLite copy
    model = (first / "results" / "best_model.keras").stat().st_ino
    (results / "history" / "small_cnn.csv").write_text("epoch,accuracy\n1,0.5\n2,0.7\n")
    second = mirror.snapshot(backups, results, {"host": "h0", "trial": "small_cnn", "epoch": 2})
    assert (second / "results" / "history" / "small_cnn.csv").read_text().endswith("2,0.7\n")
    assert (second / "results" / "best_model.keras").stat().st_ino == model       # unchanged: linked, not copied
    assert json.loads((second / "manifest.json").read_text())["epoch"] == 2
    assert sorted(p.name for p in backups.iterdir()) == ["chief-state", "study.db"]  # no .tmp or .old left


def test_the_next_chief_adopts_the_mirror_once_and_never_its_own(tmp_path):
    backups, results = chief_files(tmp_path)
    snap = mirror.snapshot(backups, results, {"host": "h0", "trial": "small_cnn", "epoch": 3})
    mine, my_results = tmp_path / "h1" / "backup" / "h1", tmp_path / "h1" / "results"
    (mine / "history").mkdir(parents=True)
    (mine / "history" / "small_cnn.csv").write_text("epoch,accuracy\n1,0.5\n2,0.7\n")   # its own, newer rows
    (mine / "history" / "deep_cnn.csv").write_text("epoch,accuracy\n1,0.4\n")
    snap.rename(mine / mirror.RECEIVED)             # as the launcher's relay leaves it
    said = mirror.adopt(mine, my_results, "h1")
    assert said["host"] == "h0" and said["epoch"] == 3
    assert (mine / "study.db").is_file() and (my_results / "best_model.keras").read_bytes() == b"model" * 1000
    assert (my_results / "history" / "small_cnn.csv").read_text() == "epoch,accuracy\n1,0.5\n2,0.7\n"
    assert (my_results / "history" / "deep_cnn.csv").is_file()
    assert mirror.adopt(mine, my_results, "h1") is None                            # once
    again = mirror.snapshot(backups, results, {"host": "h1", "trial": "small_cnn", "epoch": 4})
    again.rename(mine / mirror.RECEIVED)
    assert mirror.adopt(mine, my_results, "h1") is None                            # its own: never taken
