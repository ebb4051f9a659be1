"""A session's spools (launcher/telemetry/spools.py): they merge into the CSV in time order, each
moment once, and are removed only once the CSV is in place; a spool a session still writes is left
alone; a killed session's half line and hostile lines are skipped; only hosts' names count."""
from __future__ import annotations

import pytest

from launcher.telemetry import csvfile, spools
from support.builders import telemetry_sample as sample


def test_spools_merge_into_the_csv_in_order_once_each_and_go(tmp_path):
    csvfile.write_csv(csvfile.csv_path(tmp_path, "h0"), [sample(1.0), sample(5.0)], [0])
    for name, times in (("a", [2.0, 3.0, 5.0]), ("b", [4.0, 6.0])):
        spool = spools.Spool(tmp_path, "h0", name)
        for t in times:
            spool.add(sample(t, gpus=((1, 7.0),)) if name == "b" else sample(t))
        spool.close()
    path = spools.merge(tmp_path, "h0")
    assert [s.time for s in csvfile.read_csv(path)] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert csvfile.gpu_columns(path) == [0, 1]
    assert not (tmp_path / "telemetry" / ".spool").exists()
    assert spools.merge(tmp_path, "h0") == path        # again: nothing new, the same CSV


def test_a_spool_still_written_is_left_for_later(tmp_path):
    held = spools.Spool(tmp_path, "h0", "live")
    held.add(sample(1.0))
    held.flush()
    assert spools.merge(tmp_path, "h0") is None and held.path.exists()
    held.close()
    assert [s.time for s in csvfile.read_csv(spools.merge(tmp_path, "h0"))] == [1.0]


def test_a_killed_sessions_half_line_and_hostile_spool_lines_are_skipped(tmp_path):
    spool = spools.Spool(tmp_path, "h0", "killed")
    spool.add(sample(1.0))
    spool.close()
    with open(spool.path, "a") as fh:
        fh.write('{"t": 2, "g": [[0, 1e999, null, null, null, null]], "tr": 1, "ti": 0, "e": 0}\n')
        fh.write('{"t": 3, "g": "lots"}\n[[[[[[[[\n{"t": 4, "g": [], "tr": 1, "ti": 0, "e": 0}\n{"t": 5, "c"')
    assert [s.time for s in csvfile.read_csv(spools.merge(tmp_path, "h0"))] == [1.0, 4.0]


def test_a_failed_merge_keeps_the_spools(tmp_path, monkeypatch):
    spool = spools.Spool(tmp_path, "h0", "s")
    spool.add(sample(1.0))
    spool.close()

    def full(*a, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(spools, "write_csv", full)
    with pytest.raises(OSError):
        spools.merge(tmp_path, "h0")
    assert spool.path.exists() and not csvfile.csv_path(tmp_path, "h0").exists()


def test_only_names_of_hosts_count(tmp_path):
    folder = tmp_path / "telemetry" / ".spool"
    folder.mkdir(parents=True)
    for name in ("h0.s.jsonl", "bad_name.s.jsonl", "H0.s.jsonl", "-h.s.jsonl", "h1.s.jsonl"):
        (folder / name).write_text("")
    assert spools.spool_hosts(tmp_path) == ["h0", "h1"]
