"""study.db, the file (trainer/search/study_file.py): a file that is not a study is one clear
error with the fix, and a study made for another search is not resumed."""
from __future__ import annotations

import pytest

from trainer.search import study_file
from trainer.search.study_file import StudyDamaged
from trainer.spec.config import TrainConfig


def cfg(**search) -> TrainConfig:
    return TrainConfig.model_validate({"candidates": ["small_cnn", "deep_cnn"], "epochs": 9, "search": search})


def test_a_damaged_study_file_is_one_clear_error_with_the_fix(tmp_path):
    (tmp_path / "study.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StudyDamaged) as caught:
        study_file.resume_or_start(tmp_path / "study.db", cfg(learning_rates=[0.1, 0.01]), 0, log=lambda line: None)
    message = str(caught.value)
    assert str(tmp_path / "study.db") in message and "tfcompose up --new-run" in message and "\n" not in message


def test_a_study_is_resumed_for_the_same_search_only(tmp_path):
    said = []
    first = study_file.resume_or_start(tmp_path / "study.db", cfg(learning_rates=[0.01, 0.001]), 0, said.append)
    first.ask()
    same = study_file.resume_or_start(tmp_path / "study.db", cfg(learning_rates=[0.01, 0.001]), 0, said.append)
    assert len(same.trials) == 1 and said == []
    other = study_file.resume_or_start(tmp_path / "study.db", cfg(learning_rates=[0.5, 0.2]), 0, said.append)
    assert other.trials == [] and "the search changed" in said[0]
    assert study_file.fingerprint(cfg(learning_rates=[0.5, 0.2], port=1)) == study_file.fingerprint(cfg(learning_rates=[0.5, 0.2]))


def test_a_copy_of_the_study_is_whole_and_leaves_no_connection_open(tmp_path, monkeypatch):
    import sqlite3
    import threading
    source = tmp_path / "study.db"
    with sqlite3.connect(source) as made:
        made.execute("create table t (x)")
        made.execute("insert into t values (42)")
    made.close()
    opened = []
    real = sqlite3.connect

    class Recorded:
        def __init__(self, *args):
            self.conn, self.closed = real(*args), False
            opened.append(self)

        def __getattr__(self, name):
            return getattr(self.conn, name)

        def backup(self, target, **kw):
            return self.conn.backup(target.conn, **kw)

        def close(self):
            self.closed = True
            self.conn.close()
    monkeypatch.setattr(sqlite3, "connect", Recorded)
    study_file.copy_out(source, tmp_path / "copy.db", threading.RLock())
    assert len(opened) == 2 and all(c.closed for c in opened)
    monkeypatch.undo()
    with sqlite3.connect(tmp_path / "copy.db") as copy:
        assert copy.execute("select x from t").fetchall() == [(42,)]
