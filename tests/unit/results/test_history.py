"""`tfcompose runs` and `compare` over collected run folders."""
from __future__ import annotations

import json
from pathlib import Path
import matplotlib.image
from launcher.results import history as runs
from launcher.cli import main


def run_folder(folder: Path, best: float, started: str) -> Path:
    (folder / "history").mkdir(parents=True)
    records = []
    for name, acc in (("small_cnn", best), ("deep_cnn", best - 0.2)):
        (folder / "history" / f"{name}.csv").write_text(
            f"epoch,loss,accuracy,val_loss,val_accuracy\n1,1.2,0.4,1.1,{acc - 0.1:.2f}\n2,0.8,0.7,0.9,{acc:.2f}\n")
        records.append({"candidate": name, "val_accuracy": acc, "val_loss": 0.9, "train_seconds": 3.0,
                        "images_per_second": 100.0, "epochs": 2, "params": 1000, "history": f"history/{name}.csv"})
    (folder / "results.json").write_text(json.dumps({"schema": 1, "candidates": records, "mode": "sync", "restarts": 1,
                                                     "started": started, "finished": started[:-2] + "59"}))
    return folder


def test_runs_lists_collected_runs_and_compare_draws_both(tmp_path, capsys, monkeypatch):
    from launcher import view
    monkeypatch.setattr(view.out, "width", 200)
    a = run_folder(tmp_path / "runs" / "lab" / "aaaaaaaaaaaa", 0.9, "2026-11-20T10:00:00")
    b = run_folder(tmp_path / "runs" / "lab" / "bbbbbbbbbbbb", 0.8, "2026-11-21T10:00:00")
    (tmp_path / "runs" / "lab" / "latest").symlink_to(b.name)
    found = runs.find(tmp_path / "runs")
    assert [(r.run_id, r.best, r.best_val_accuracy, r.duration_s, r.restarts) for r in found] == \
           [("aaaaaaaaaaaa", "small_cnn", 0.9, 59.0, 1), ("bbbbbbbbbbbb", "small_cnn", 0.8, 59.0, 1)]
    assert main(["runs", "--runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "aaaaaaaaaaaa" in out and "bbbbbbbbbbbb" in out and "0.9000" in out
    png = tmp_path / "compare.png"
    assert main(["compare", "aaaa", str(b), "--runs", str(tmp_path / "runs"), "-o", str(png)]) == 0
    out = capsys.readouterr().out
    assert "small_cnn 0.9000" in out and "small_cnn 0.8000" in out
    assert matplotlib.image.imread(png).shape[0] > 100
    assert main(["compare", "zzzz", "--runs", str(tmp_path / "runs")]) == 2
