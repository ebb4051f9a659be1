"""The trainer's progress file (trainer/progress.py): written by the trainer, read by the launcher."""
from __future__ import annotations

import pytest
from trainer.progress import parse
from support.builders import tracked


def test_the_trainer_writes_a_document_the_launcher_reads(tmp_path):
    docs = list(tracked(tmp_path))
    first, last = docs[0], docs[-1]
    assert (first.trial_index, first.epoch, first.trials, first.epochs) == (1, 1, 2, 3)
    assert first.eta_seconds() == 50.0 and last.eta_seconds() == 0.0   # 5 epochs left × 10 s, then none
    assert first.fraction == pytest.approx(1 / 6) and last.fraction == 1.0
    assert len(last.recent) == 6 and not list(tmp_path.glob("*.tmp"))   # written atomically


@pytest.mark.parametrize("text", ["", "{}", "[1]", '{"schema": 1}', "x" * 20000,
                                  '{"schema": 1, "task": 3}'])
def test_what_a_host_sends_that_is_not_a_progress_document_is_ignored(text):
    assert parse(text) is None
