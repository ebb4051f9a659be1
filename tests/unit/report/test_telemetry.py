"""The report of a run with telemetry: telemetry.png (a panel per host, trials, epochs, warnings),
a Hardware section with each host's means and the run's warnings, and the per-trial figures in the
leaderboard (report.md and the CLI's table)."""
from __future__ import annotations

import json
import re

import matplotlib.image

from launcher import view
from launcher.report.build import write_report
from launcher.telemetry import assemble, csvfile
from launcher.telemetry.samples import Gpu, Sample

T0 = 1_700_000_000.0


def run_with_telemetry(tmp_path, idle_from: float = 200.0):
    records = []
    for i, name in enumerate(["small_cnn", "deep_cnn"]):
        records.append({"candidate": name, "val_accuracy": 0.6 + 0.1 * i, "val_loss": 0.9, "train_seconds": 150.0,
                        "images_per_second": 100.0, "epochs": 3, "params": 1000, "started_at": T0 + 150 * i,
                        "ended_at": T0 + 150 * (i + 1)})
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "candidates": records, "mode": "sync",
                                                       "best": {"candidate": "deep_cnn", "val_accuracy": 0.7}}))
    for host in ("h0", "h1"):
        rows = []
        for i in range(301):
            util = 2.0 if host == "h1" and i >= idle_from else 90.0
            rows.append(Sample(time=T0 + i, cpu=1.0, cpu_limit=2.0, mem=500.0, mem_limit=4000.0, net_in=100.0,
                               net_out=90.0, gpus=(Gpu(0, util=util, mem=2048.0, mem_total=16384.0, power=150.0),),
                               training=True, trial=1 + i // 150, epoch=(i % 150) // 50))
        csvfile.write_csv(csvfile.csv_path(tmp_path, host), rows, [0])
    csvfile.write_rules(tmp_path, 60)                 # the run's telemetry.warn_after_s, as its live view judged
    assert assemble.assemble(tmp_path, ["h0", "h1"]) == []
    return tmp_path


def test_the_report_shows_the_hardware_over_time_the_warnings_and_the_figures_per_trial(tmp_path):
    report = write_report(run_with_telemetry(tmp_path))
    picture = tmp_path / "telemetry.png"
    assert picture in report.files and picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = matplotlib.image.imread(picture).shape
    assert height > 400 and width > 1000
    text = (tmp_path / "report.md").read_text()
    assert "| GPU h | GPU % | GPU Wh | CPU h | host |" in text
    assert "| 0.0833 | 90 | 12.5 | 0.0833 |" in text           # small_cnn: 2 GPUs × 150 s, both at 90 %
    assert "## Hardware" in text and "| h1 | 60 % | 2.0 GiB | 1.00 of 2 | 0.49 GiB | 100 / 90 Mbit/s |" in text
    # Idle from minute 3.3 on; the rules look every 5 s, so the warning's span starts within 5 s of it.
    assert re.search(r"^- h1: GPU 0 under 10 % busy for 60 s while h1 trains \(mean 2 %\) \(minutes 3\.[34]–5\.0\)$",
                     text, re.M)
    assert "![telemetry](telemetry.png)" in text


def test_a_run_without_telemetry_has_no_hardware_part(tmp_path):
    run_with_telemetry(tmp_path)
    for path in (tmp_path / "telemetry").iterdir():
        path.unlink()
    text_files = write_report(tmp_path).files
    assert not (tmp_path / "telemetry.png").exists() and all(p.name != "telemetry.png" for p in text_files)
    assert "## Hardware" not in (tmp_path / "report.md").read_text()


def test_the_cli_leaderboard_has_the_figures_too(tmp_path):
    run_with_telemetry(tmp_path, idle_from=1000)
    from rich.console import Console
    console = Console(width=200, record=True)
    console.print(view.leaderboard(tmp_path))
    text = console.export_text()
    assert "GPU h" in text and "CPU h" in text and "0.0833" in text


def test_no_trial_name_on_telemetry_png_prints_over_another(tmp_path, monkeypatch):
    """Trials pruned within a second or two of each other (ASHA's first rung) are shaded, not named
    over each other or over a long trial just after them: the long trial keeps its name."""
    from launcher.report import telemetry as report_telemetry
    from support.figures import Kept, overlapping
    run_with_telemetry(tmp_path)
    doc = json.loads((tmp_path / "results.json").read_text())
    quick = [{**doc["candidates"][0], "candidate": f"small_cnn#00{i}", "started_at": T0 + 2 * i, "ended_at": T0 + 2 * i + 1.5}
             for i in range(1, 5)]
    doc["candidates"] = quick + [{**doc["candidates"][1], "started_at": T0 + 10, "ended_at": T0 + 300}]
    kept = Kept()
    monkeypatch.setattr("launcher.report.build._save", kept)
    report_telemetry.section(tmp_path, doc, kept)
    fig = kept.figures["telemetry.png"]
    for ax in fig.axes:
        assert overlapping(fig, ax.texts, ax.texts) == []
    assert "deep_cnn" in {t.get_text() for t in fig.axes[0].texts}
    kept.close()
