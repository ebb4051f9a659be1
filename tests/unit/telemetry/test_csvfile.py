"""telemetry/<host>.csv (its spools: test_spools.py): what is written reads back the same; a CSV
that is not the writer's is read as data to check (bad rows skipped, links and FIFOs refused, long
lines cut)."""
from __future__ import annotations

import os

from launcher.telemetry import csvfile
from support.builders import telemetry_sample as sample


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
