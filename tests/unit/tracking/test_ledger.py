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


def test_a_fifo_at_tracking_json_is_no_ledger_and_a_known_secret_is_never_written(tmp_path):
    """#46: a FIFO there once held `track` and the closing line of `collect` for ever."""
    import os
    from launcher.text import hide
    os.mkfifo(tmp_path / ledger.FILE)
    assert ledger.read(tmp_path) is None and ledger.summary(tmp_path) is None
    hide(["pw-d00d1e55"])
    ledger.Ledger(tracker="http://127.0.0.1:5000", experiment="lab", pending="Invalid url http://u:pw-d00d1e55@h").write(tmp_path)
    assert "pw-d00d1e55" not in (tmp_path / ledger.FILE).read_text() and ledger.read(tmp_path).pending.endswith("u:***@h")
