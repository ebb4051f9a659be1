"""The report: report.md and PNGs from a run folder."""
from __future__ import annotations

import json
import matplotlib.image
from launcher.cli import main
from launcher.results.report import write_report


TRIALS = ["small_cnn@lr=0.01,bs=16", "small_cnn@lr=0.001,bs=16", "deep_cnn@lr=0.01,bs=16"]


def run_folder(tmp_path):
    (tmp_path / "history").mkdir()
    records = []
    for i, name in enumerate(TRIALS):
        (tmp_path / "history" / f"{name}.csv").write_text(
            "epoch,loss,accuracy,val_loss,val_accuracy\n1,1.2,0.4,1.1,0.5\n2,0.8,0.7,0.9,%.2f\n" % (0.6 + 0.1 * i))
        records.append({"candidate": name, "val_accuracy": 0.6 + 0.1 * i, "val_loss": 0.9, "train_seconds": 3.0,
                        "images_per_second": 100.0, "epochs": 2, "epochs_run": 2, "params": 1000 * (i + 1),
                        "history": f"history/{name}.csv", "confusion_matrix": [[5, 1], [2, 4]]})
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "candidates": records, "class_names": ["AD", "CN"],
                                                       "best": {"candidate": TRIALS[2]}, "workers": 2}))
    return tmp_path


def test_report_files_are_valid_pngs_and_name_every_trial(tmp_path):
    report = write_report(run_folder(tmp_path))
    assert [p.name for p in report.files] == ["report.md", "leaderboard.png", "curves.png", "confusion_matrix.png"]
    for png in report.files[1:]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width, _ = matplotlib.image.imread(png).shape
        assert height > 100 and width > 100
    text = (tmp_path / "report.md").read_text()
    assert "Best: **deep_cnn@lr=0.01,bs=16**" in text and all(f"| {t} |" in text for t in TRIALS)
    assert text.index(TRIALS[2]) < text.index(TRIALS[1]) < text.index("| small_cnn@lr=0.01,bs=16 |")  # ranked


def test_report_cli_prints_the_leaderboard_and_rejects_a_folder_without_results(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    assert main(["report", str(run_folder(tmp_path / "run"))]) == 0
    out = capsys.readouterr().out
    assert "leaderboard" in out and "deep_cnn@lr=0.01,bs=16" in out
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "Expected a run folder" in capsys.readouterr().err
