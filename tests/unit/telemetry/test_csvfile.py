"""telemetry/<host>.csv and its spools: what is written reads back the same; spools merge into the
CSV in time order, each moment once, and are removed only once the CSV is in place; a spool a
session still writes is left alone; a CSV or spool that is not the writer's is read as data to
check (bad rows skipped, links and FIFOs refused, long lines cut)."""
from __future__ import annotations

import os

import pytest

from launcher.telemetry import csvfile
from launcher.telemetry.samples import Gpu, Sample


def sample(t: float, gpus=((0, 50.0),), **kw) -> Sample:
    return Sample(time=t, cpu=1.5, cpu_limit=2.0, cpu_queued=0.25, mem=100.0, mem_limit=1000.0, net_in=10.0, net_out=20.0, swap=0.0,
                  gpus=tuple(Gpu(i, util=u, mem=1.0, mem_total=2.0, power=None, temp=40.0) for i, u in gpus),
                  training=True, trial=2, epoch=3, **kw)


def test_a_sample_reads_back_as_written(tmp_path):
    path = tmp_path / "h0.csv"
    written = [sample(100.0), sample(101.0, gpus=((0, 60.0), (3, 1.0))), sample(102.0, gpus=())]
    assert csvfile.write_csv(path, written, [0, 3]) == 3
    assert list(csvfile.read_csv(path)) == written
    header = path.read_text().splitlines()[0]
    assert header.startswith("time,training,trial,epoch,cpu_cores,") and header.endswith("gpu3_temp_c")
    assert csvfile.gpu_columns(path) == [0, 3]


def test_bad_rows_are_skipped_and_the_rest_kept(tmp_path):
    path = tmp_path / "h0.csv"
    csvfile.write_csv(path, [sample(100.0), sample(101.0)], [0])
    lines = path.read_text().splitlines()
    bad = [lines[1].replace("1.5", "-1.5", 1), lines[1].replace(",1,2,3,", ",yes,2,3,", 1),
           lines[1].replace("100", "nan", 1), "x" * 100_000, lines[1].replace(",50,", ",500,", 1), "\x1b[2J"]
    path.write_text("\n".join([lines[0], *bad, lines[2]]) + "\n")
    assert [s.time for s in csvfile.read_csv(path)] == [101.0]


def test_links_and_fifos_are_not_read(tmp_path):
    real = tmp_path / "real.csv"
    csvfile.write_csv(real, [sample(1.0)], [0])
    (tmp_path / "telemetry").mkdir()
    (tmp_path / "telemetry" / "h0.csv").symlink_to(real)
    os.mkfifo(tmp_path / "telemetry" / "h1.csv")
    assert list(csvfile.read_csv(tmp_path / "telemetry" / "h0.csv")) == []
    assert list(csvfile.read_csv(tmp_path / "telemetry" / "h1.csv")) == []       # would block if opened plainly
    assert csvfile.hosts_with_csv(tmp_path) == []


def test_spools_merge_into_the_csv_in_order_once_each_and_go(tmp_path):
    csvfile.write_csv(csvfile.csv_path(tmp_path, "h0"), [sample(1.0), sample(5.0)], [0])
    for name, times in (("a", [2.0, 3.0, 5.0]), ("b", [4.0, 6.0])):
        spool = csvfile.Spool(tmp_path, "h0", name)
        for t in times:
            spool.add(sample(t, gpus=((1, 7.0),)) if name == "b" else sample(t))
        spool.close()
    path = csvfile.merge(tmp_path, "h0")
    assert [s.time for s in csvfile.read_csv(path)] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert csvfile.gpu_columns(path) == [0, 1]
    assert not (tmp_path / "telemetry" / ".spool").exists()
    assert csvfile.merge(tmp_path, "h0") == path        # again: nothing new, the same CSV


def test_a_spool_still_written_is_left_for_later(tmp_path):
    held = csvfile.Spool(tmp_path, "h0", "live")
    held.add(sample(1.0))
    held.flush()
    assert csvfile.merge(tmp_path, "h0") is None and held.path.exists()
    held.close()
    assert [s.time for s in csvfile.read_csv(csvfile.merge(tmp_path, "h0"))] == [1.0]


def test_a_killed_sessions_half_line_and_hostile_spool_lines_are_skipped(tmp_path):
    spool = csvfile.Spool(tmp_path, "h0", "killed")
    spool.add(sample(1.0))
    spool.close()
    with open(spool.path, "a") as fh:
        fh.write('{"t": 2, "g": [[0, 1e999, null, null, null, null]], "tr": 1, "ti": 0, "e": 0}\n')
        fh.write('{"t": 3, "g": "lots"}\n[[[[[[[[\n{"t": 4, "g": [], "tr": 1, "ti": 0, "e": 0}\n{"t": 5, "c"')
    assert [s.time for s in csvfile.read_csv(csvfile.merge(tmp_path, "h0"))] == [1.0, 4.0]


def test_a_failed_merge_keeps_the_spools(tmp_path, monkeypatch):
    spool = csvfile.Spool(tmp_path, "h0", "s")
    spool.add(sample(1.0))
    spool.close()

    def full(*a, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(csvfile, "write_csv", full)
    with pytest.raises(OSError):
        csvfile.merge(tmp_path, "h0")
    assert spool.path.exists() and not csvfile.csv_path(tmp_path, "h0").exists()


def test_only_names_of_hosts_count(tmp_path):
    folder = tmp_path / "telemetry" / ".spool"
    folder.mkdir(parents=True)
    for name in ("h0.s.jsonl", "bad_name.s.jsonl", "H0.s.jsonl", "-h.s.jsonl", "h1.s.jsonl"):
        (folder / name).write_text("")
    assert csvfile.spool_hosts(tmp_path) == ["h0", "h1"]
