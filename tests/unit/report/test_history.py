"""`tfcompose runs` and `compare` over collected run folders."""
from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib.image
import pytest

from launcher.cli import main
from launcher.report import history as runs, build as report


def run_folder(folder: Path, best: float, started: str) -> Path:
    (folder / "history").mkdir(parents=True)
    records = []
    for name, acc in (("small_cnn", best), ("deep_cnn", best - 0.2)):
        (folder / "history" / f"{name}.csv").write_text(
            f"epoch,loss,accuracy,val_loss,val_accuracy\n1,1.2,0.4,1.1,{acc - 0.1:.2f}\n2,0.8,0.7,0.9,{acc:.2f}\n")
        records.append({"candidate": name, "val_accuracy": acc, "val_loss": 0.9, "train_seconds": 3.0,
                        "images_per_second": 100.0, "epochs": 2, "params": 1000, "history": f"history/{name}.csv"})
    (folder / "results.json").write_text(json.dumps({"schema": 1, "candidates": records, "mode": "sync", "restarts": 1,
                                                     "best": {"candidate": "small_cnn", "val_accuracy": best},
                                                     "started": started, "finished": started[:-2] + "59"}))
    return folder


def test_runs_lists_collected_runs_and_compare_draws_both(tmp_path, capsys, monkeypatch):
    from launcher import view
    monkeypatch.setattr(view.out, "width", 200)
    run_folder(tmp_path / "runs" / "lab" / "aaaaaaaaaaaa", 0.9, "2026-11-20T10:00:00")
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


def test_runs_names_the_same_best_as_the_leaderboard_when_two_trials_tie(tmp_path):
    folder = run_folder(tmp_path / "runs" / "lab" / "cccccccccccc", 0.9, "2026-11-20T10:00:00")
    doc = json.loads((folder / "results.json").read_text())
    doc["candidates"][1].update(val_accuracy=0.9, val_loss=0.5)       # deep_cnn ties, with the lower loss
    doc["candidates"].append({**doc["candidates"][0], "candidate": "nan_cnn", "val_accuracy": float("nan")})
    (folder / "results.json").write_text(json.dumps(doc))
    (summary,) = runs.find(tmp_path / "runs")
    board = report.ranked(doc)
    assert summary.best == board[0]["candidate"] == "deep_cnn" and board[-1]["candidate"] == "nan_cnn"


@pytest.mark.parametrize("change, says", [
    ({"restarts": "many"}, "restarts: Received 'many'. Expected an integer ≥ 0."),
    ({"restarts": [1]}, "restarts: Received [1]"),
    ({"restarts": 1e400}, "restarts: Received inf"),
    ({"workers": True}, "workers: Received True"),
])
def test_a_results_file_tfcompose_did_not_write_is_named_and_other_runs_still_listed(tmp_path, capsys, change, says):
    good = run_folder(tmp_path / "runs" / "lab" / "aaaaaaaaaaaa", 0.9, "2026-11-20T10:00:00")
    bad = run_folder(tmp_path / "runs" / "lab" / "bbbbbbbbbbbb", 0.8, "2026-11-21T10:00:00")
    doc = json.loads((bad / "results.json").read_text())
    (bad / "results.json").write_text(json.dumps({**doc, **change}).replace("Infinity", "1e400"))
    assert [r.run_id for r in runs.find(tmp_path / "runs")] == [good.name]
    assert main(["compare", "aaaa", "--runs", str(tmp_path / "runs"), "-o", str(tmp_path / "c.png")]) == 0
    assert main(["report", str(bad)]) == 2
    assert says in capsys.readouterr().err


def test_results_nested_too_deep_is_bad_input_not_a_crash(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text("[" * 100_000)
    assert main(["report", str(folder)]) == 2 and "nested too deep" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["x.txt", "folder"])
def test_compare_refuses_an_output_that_is_no_picture_file(tmp_path, capsys, name):
    run_folder(tmp_path / "runs" / "lab" / "aaaaaaaaaaaa", 0.9, "2026-11-20T10:00:00")
    (tmp_path / "folder").mkdir()
    assert main(["compare", "aaaa", "--runs", str(tmp_path / "runs"), "-o", str(tmp_path / name)]) == 2
    assert "--output: Received" in capsys.readouterr().err and not (tmp_path / "folder.png").exists()


def test_off_a_terminal_tables_print_whole_at_any_columns(tmp_path, capsys, monkeypatch):
    folder = run_folder(tmp_path / "runs" / "a-cluster-with-a-long-name" / "aaaaaaaaaaaa", 0.9, "2026-11-20T10:00:00")
    doc = json.loads((folder / "results.json").read_text())
    doc["candidates"][0]["candidate"] = doc["best"]["candidate"] = "small_cnn@lr=0.0001,bs=16,width=128,dropout=0.25"
    doc["candidates"][0]["params"] = 1_493_636
    (folder / "results.json").write_text(json.dumps(doc))
    for columns in ("40", "80", "400"):
        monkeypatch.setenv("COLUMNS", columns)           # captured output is off a terminal, as a pipe is
        assert main(["runs", "--runs", str(tmp_path / "runs")]) == 0
        out = capsys.readouterr().out
        header = next(line for line in out.splitlines() if "cluster" in line)
        assert all(title in header for title in ("cluster", "started", "mode", "best trial", "val_acc", "duration",
                                                 "restarts")), out
        assert "small_cnn@lr=0.0001,bs=16,width=128,dropout=0.25" in out and "a-cluster-with-a-long-name" in out
        assert main(["report", str(folder)]) == 0
        out = capsys.readouterr().out
        assert "1,493,636" in out and "small_cnn@lr=0.0001,bs=16,width=128,dropout=0.25" in out


def test_compare_labels_each_run_by_cluster_and_id_even_through_two_latest_links(tmp_path, capsys, monkeypatch):
    from launcher import view
    from launcher.report import history
    from support.figures import overlapping
    monkeypatch.setattr(view.out, "width", 200)
    a = run_folder(tmp_path / "runs" / "oasis" / "aaaaaaaaaaaa", 0.97, "2026-11-20T10:00:00")
    b = run_folder(tmp_path / "runs" / "lab" / "bbbbbbbbbbbb", 0.99, "2026-11-21T10:00:00")
    for link, target in ((a.parent / "latest", a.name), (b.parent / "latest", b.name)):
        link.symlink_to(target)
    latest = [a.parent / "latest", b.parent / "latest"]
    assert history.run_labels(latest) == ["oasis/aaaaaaaaaaaa", "lab/bbbbbbbbbbbb"]
    assert history.run_labels([a, a]) == ["oasis/aaaaaaaaaaaa (1)", "oasis/aaaaaaaaaaaa (2)"]
    assert main(["compare", *map(str, latest), "--runs", str(tmp_path / "runs"), "-o", str(tmp_path / "c.png")]) == 0
    header = capsys.readouterr().out
    assert "oasis/aaaaaaaaaaaa" in header and "lab/bbbbbbbbbbbb" in header and " latest " not in header
    kept = {}
    monkeypatch.setattr("matplotlib.pyplot.close", lambda fig: kept.setdefault("fig", fig))
    history.compare_picture(latest, tmp_path / "c2.png")
    fig = kept["fig"]
    fig.canvas.draw()
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert labels == ["oasis/aaaaaaaaaaaa: small_cnn", "lab/bbbbbbbbbbbb: small_cnn"]
    assert overlapping(fig, fig.legends, fig.axes) == []            # the legend below the plot, not on the lines
    bottom, top = fig.axes[0].get_ylim()
    assert bottom > 0 and top >= 0.99                                # the axis from the curves, not 0–1


def test_a_damaged_run_is_listed_as_damaged_saying_why_never_hidden(tmp_path, capsys, monkeypatch):
    """#46: `runs` silently dropped a run whose results.json it could not read (and a FIFO there hung it)."""
    from launcher import view
    monkeypatch.setattr(view.out, "width", 300)
    root = tmp_path / "runs" / "lab"
    run_folder(root / "aaaaaaaaaaaa", 0.9, "2026-11-20T10:00:00")
    fifo = root / "bbbbbbbbbbbb"
    fifo.mkdir(parents=True)
    os.mkfifo(fifo / "results.json")
    typed = run_folder(root / "cccccccccccc", 0.9, "2026-11-22T10:00:00")
    doc = json.loads((typed / "results.json").read_text())
    doc["candidates"][0]["epochs_run"] = "2"
    (typed / "results.json").write_text(json.dumps(doc))
    (root / "dddddddddddd").mkdir()
    os.mkfifo(root / "dddddddddddd" / "outcome.json")
    (root / "not-a-run").mkdir()
    listed = {r.run_id: (r.state, r.best) for r in runs.find(tmp_path / "runs", with_damaged=True)}
    assert listed == {"aaaaaaaaaaaa": ("finished", "small_cnn"),
                      "bbbbbbbbbbbb": ("damaged", "results.json: Received a FIFO. Expected a regular file (tfcompose "
                                                  "follows no link, and reads no FIFO or device, beneath a run folder)."),
                      "cccccccccccc": ("damaged", "results.json: candidates[0].epochs_run: Received '2'. Expected an "
                                                  f"integer 0–100,000."),
                      "dddddddddddd": ("damaged", "outcome.json: Received a FIFO. Expected a regular file (tfcompose "
                                                  "follows no link, and reads no FIFO or device, beneath a run folder).")}
    assert [r.run_id for r in runs.find(tmp_path / "runs")] == ["aaaaaaaaaaaa"]        # compare picks no damaged run
    assert main(["runs", "--runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert out.count("│ damaged") == 3 and "epochs_run: Received '2'" in out
