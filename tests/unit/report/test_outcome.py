"""outcome.json (launcher/report/outcome.py): how a collected run ended, written and read back."""
from __future__ import annotations

import json

from launcher.report import outcome


def test_a_failed_run_says_so_and_reads_back(tmp_path):
    made = outcome.write(tmp_path, "lab", "20261125-140233-3f2a1b2c", "failed", "h0 failed (exit code 137)\x1b[2J")
    back = outcome.read(tmp_path)
    assert back == made and back.failed and "\x1b" not in back.message


def test_what_is_not_an_outcome_tfcompose_writes_is_none(tmp_path):
    for text in ("{", "[]", json.dumps({"schema": 1, "state": "won"}), "x" * 100_000,
                 json.dumps({"schema": 2, "cluster": "a", "run": "b", "state": "failed", "message": "", "collected": ""})):
        (tmp_path / outcome.FILE).write_text(text)
        assert outcome.read(tmp_path) is None
    (tmp_path / outcome.FILE).unlink()
    (tmp_path / outcome.FILE).symlink_to("/etc/passwd")
    assert outcome.read(tmp_path) is None


def test_a_fifo_at_outcome_json_is_no_outcome_and_is_named_not_waited_on(tmp_path):
    """#46: a FIFO there once held `runs`, `report` and `collect` for ever (its size was checked, not its kind)."""
    import os
    os.mkfifo(tmp_path / outcome.FILE)
    assert outcome.read(tmp_path) is None
    assert outcome.damage(tmp_path).endswith(f"{outcome.FILE}: Received a FIFO. Expected a regular file (tfcompose "
                                             "follows no link, and reads no FIFO or device, beneath a run folder).")
    assert outcome.damage(tmp_path / "nowhere") == ""
