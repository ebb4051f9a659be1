"""tracking.json: written, read back, and a file that is not one tfcompose wrote is none."""
from __future__ import annotations

import json

from launcher.tracking import ledger


def test_a_ledger_is_read_back_and_says_where_the_run_is(tmp_path):
    book = ledger.Ledger(tracker="http://127.0.0.1:5000", experiment="lab", experiment_id="3", search_run="abc",
                         trials={"t1": "r1", "t2": "r2"}, registered_as="oasis", version="2", complete=True)
    book.write(tmp_path)
    again = ledger.read(tmp_path)
    assert again == book and again.url() == "http://127.0.0.1:5000/#/experiments/3/runs/abc"
    assert ledger.summary(tmp_path) == ("tracked in MLflow: 2 trial run(s) under http://127.0.0.1:5000/#/experiments/3/"
                                        "runs/abc; best model registered as oasis version 2")


def test_a_run_not_all_sent_says_how_to_send_the_rest(tmp_path):
    ledger.Ledger(tracker="http://127.0.0.1:5000", experiment="lab", pending="MLflow at …: no answer").write(tmp_path)
    assert ledger.summary(tmp_path) == (f"not all sent to MLflow at http://127.0.0.1:5000 (MLflow at …: no answer); "
                                        f"`tfcompose track {tmp_path}` sends the rest")


def test_what_is_not_a_ledger_is_none(tmp_path):
    path = tmp_path / ledger.FILE
    for text in ("[1]", "{", json.dumps({"schema": 1, "tracker": 5, "experiment": "x"}),
                 json.dumps({"schema": 1, "tracker": "t", "experiment": "x", "trials": {"a": 1}}),
                 json.dumps({"schema": 2, "tracker": "t", "experiment": "x"})):
        path.write_text(text)
        assert ledger.read(tmp_path) is None and ledger.summary(tmp_path) is None
    path.unlink()
    (tmp_path / "elsewhere.json").write_text(json.dumps({"schema": 1, "tracker": "t", "experiment": "x"}))
    path.symlink_to(tmp_path / "elsewhere.json")
    assert ledger.read(tmp_path) is None
