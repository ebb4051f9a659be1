"""At collect: the spools merged into each host's CSV, and each trial's figures added to
results.json, checked by its owner; without telemetry or results, nothing changes."""
from __future__ import annotations

import json
from functools import partial

import pytest

from launcher.telemetry import assemble, csvfile, spools
from launcher.telemetry.samples import Gpu, Sample

approx = partial(pytest.approx, rel=1e-5)


def results_doc(trials):
    return {"schema": 1, "best": {"candidate": trials[0][0], "val_accuracy": 0.9}, "mode": "sync",
            "candidates": [{"candidate": name, "val_accuracy": 0.9, "val_loss": 0.1, "train_seconds": 1.0,
                            "images_per_second": 1.0, "params": 1, "epochs": 1, **extra} for name, extra in trials]}


def spool(run, host, start, seconds, util):
    out = spools.Spool(run, host, "s1")
    for i in range(seconds + 1):
        out.add(Sample(time=start + i, cpu=1.0, gpus=(Gpu(0, util=util, power=100.0),)))
    out.close()


def test_figures_land_in_results_json_per_trial(tmp_path):
    trials = [("a", {"started_at": 100.0, "ended_at": 130.0}), ("b", {"started_at": 130.0, "ended_at": 160.0}),
              ("old", {"gpu_hours": 99.0})]
    (tmp_path / "results.json").write_text(json.dumps(results_doc(trials)))
    spool(tmp_path, "h0", 90.0, 80, 50.0)
    spool(tmp_path, "h1", 90.0, 80, 70.0)
    assert assemble.assemble(tmp_path, ["h0", "h1"]) == []
    doc = json.loads((tmp_path / "results.json").read_text())
    a, b, old = doc["candidates"]
    assert a["gpu_hours"] == approx(2 * 30 / 3600) and a["gpu_hours"] == b["gpu_hours"]   # 2 hosts × 1 GPU × 30 s
    assert a["gpu_utilization"] == 60.0 and a["energy_wh"] == approx(200 * 30 / 3600)    # 2 × 100 W × 30 s
    assert a["telemetry_coverage"] == 1.0 and a["cpu_hours"] == approx(60 / 3600)
    assert "gpu_hours" not in old                      # a figure from before, with nothing to back it, goes
    assert sorted(p.name for p in (tmp_path / "telemetry").iterdir()) == ["h0.csv", "h1.csv"]


def test_no_results_or_no_telemetry_changes_nothing_and_bad_results_are_a_warning(tmp_path):
    spool(tmp_path, "h0", 0.0, 5, 1.0)
    assert assemble.assemble(tmp_path, ["h0"]) == []            # telemetry without results: the CSV only
    assert csvfile.csv_path(tmp_path, "h0").is_file()
    (tmp_path / "results.json").write_text('{"schema": 1, "candidates": [{"candidate": 3}]}')
    problems = assemble.assemble(tmp_path, ["h0"])
    assert len(problems) == 1 and problems[0].startswith("no telemetry figures per trial:")
    assert (tmp_path / "results.json").read_text() == '{"schema": 1, "candidates": [{"candidate": 3}]}'


def test_a_parallel_runs_results_are_written_once_with_their_figures_and_without_them_when_those_fail(tmp_path,
                                                                                                       monkeypatch):
    """#48: collect wrote the chief's results.json, then telemetry read it back and wrote it again."""
    from launcher import runfiles
    written = []
    real = runfiles.write_results
    monkeypatch.setattr(runfiles, "write_results", lambda run, doc, *a: written.append(doc) or real(run, doc, *a))
    doc = {**results_doc([("a", {"started_at": 100.0, "ended_at": 130.0, "host": "h0"})]), "mode": "parallel"}
    spool(tmp_path, "h0", 90.0, 80, 50.0)
    assert assemble.assemble(tmp_path, ["h0"], doc) == [] and len(written) == 1
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["candidates"][0]["gpu_hours"] == approx(30 / 3600) and "gpu_hours" not in doc["candidates"][0]
    (tmp_path / "results.json").unlink()
    monkeypatch.setattr(assemble.figures, "per_trial", lambda *a: [{"gpu_utilization": 400.0}])   # out of range
    problems = assemble.assemble(tmp_path, ["h0"], doc)
    assert len(problems) == 1 and "gpu_utilization" in problems[0] and len(written) == 2
    assert json.loads((tmp_path / "results.json").read_text()) == doc          # the results stand without figures


def test_a_sync_runs_copied_results_are_left_as_the_chief_wrote_them_without_telemetry(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(results_doc([("a", {})])) + "  ")
    before = (tmp_path / "results.json").stat()
    assert assemble.assemble(tmp_path, ["h0"]) == []
    after = (tmp_path / "results.json").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
