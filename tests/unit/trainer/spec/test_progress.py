"""The trainer's progress file (trainer/spec/progress.py): written by the trainer, read by the launcher."""
from __future__ import annotations

import pytest
from trainer.spec.progress import parse
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


def test_each_epochs_end_and_its_trials_start_ride_along_and_a_document_from_before_still_reads(tmp_path):
    import json
    last = list(tracked(tmp_path))[-1]
    assert len(last.epoch_times) == len(last.recent) and all(end >= start > 0 for end, start in last.epoch_times)
    doc = json.loads((tmp_path / "progress-worker-1.json").read_text())
    older = {k: v for k, v in doc.items() if k != "epoch_times"}              # an image from before #47
    assert parse(json.dumps(older)).epoch_times == []
    assert parse(json.dumps({**doc, "epoch_times": doc["epoch_times"][1:]})) is None       # not one per epoch
    assert parse(json.dumps({**doc, "epoch_times": [[-1, 0]] * len(doc["recent"])})) is None
