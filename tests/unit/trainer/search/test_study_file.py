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
