"""The report: report.md and PNGs from a run folder."""
from __future__ import annotations

import json

import matplotlib.image
import pytest
from launcher import runfiles
from launcher.cli import main
from launcher.report.build import write_report


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
                                                       "best": {"candidate": TRIALS[2], "val_accuracy": 0.8},
                                                       "workers": 2}))
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


# --- the pictures, from real runs (tests/data/runs) ----------------------------------------------

@pytest.fixture(scope="module")
def real_reports(tmp_path_factory):
    """The leaderboard and curves of each real run, drawn once for the module (16 panels take
    seconds), kept open: (the ranked trials, report.md's text, the figures by file name)."""
    from launcher.report import build as report
    from support.figures import Kept, real_run
    kept, made = Kept(), {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "_save", kept)
        for name in ("tpe-asha", "parallel-lost-host", "lab-overloaded"):
            folder = real_run(name, tmp_path_factory.mktemp("runs"))
            doc = runfiles.load_results(folder)
            rows = report.ranked(doc)
            report.plot_leaderboard(rows, folder)
            figures = {"leaderboard.png": kept.figures["leaderboard.png"]}
            if name != "parallel-lost-host":        # of 16 trials, two rows of panels are enough (16 take seconds)
                report.plot_curves(folder, rows[:3] + rows[-3:] if len(rows) > 8 else rows, folder)
                figures["curves.png"] = kept.figures["curves.png"]
            made[name] = (rows, report.markdown(doc, rows, []), figures)
    yield made
    kept.close()


def bar_order(fig) -> list[str]:
    """The leaderboard's bars as drawn, top to bottom: each bar's tick label (its trial)."""
    ax = fig.axes[0]
    by_y = {round(t.get_position()[1]): t.get_text() for t in ax.get_yticklabels()}
    bars = sorted(ax.patches, key=lambda bar: -bar.get_y())
    return [by_y[round(bar.get_y() + bar.get_height() / 2)] for bar in bars]


def test_leaderboard_png_ranks_as_the_table_marks_pruned_trials_and_says_so_in_its_title(real_reports):
    from launcher.report.values import texts
    ranked, _, figures = real_reports["tpe-asha"]
    fig = figures["leaderboard.png"]
    order = bar_order(fig)
    names = [r["candidate"] for r in ranked]
    assert [label.split("\n")[0] for label in order] == [f"{i}. {n}" for i, n in enumerate(names, start=1)]
    assert order[0] == f"1. deep_cnn#011\n{texts(ranked)[0]}" and "lr 1.35e-4, bs 32, width 128" in order[0]
    pruned = {r["candidate"] for r in ranked if r["state"] == "pruned"}
    hatched = {label.split("\n")[0].split(" ", 1)[1] for label, bar in
               zip(order, sorted(fig.axes[0].patches, key=lambda b: -b.get_y())) if bar.get_hatch()}
    assert hatched == pruned and len(pruned) == 13
    # A complete 0.9916 above a pruned 0.9944: so the title says how the bars are ranked.
    assert "trained to the end first" in fig.axes[0].get_title() and "pruned" in fig.axes[0].get_title()
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert sum("(pruned at epoch 1)" in n for n in notes) == 9 and sum("(pruned at epoch 3)" in n for n in notes) == 4


def test_leaderboard_png_names_a_retried_trial_instead_of_drawing_an_empty_bar(real_reports):
    _, md, figures = real_reports["parallel-lost-host"]
    fig = figures["leaderboard.png"]
    assert len(fig.axes[0].patches) == 8 and all("small_cnn#002\n" not in label for label in bar_order(fig))
    assert not any("nan" in t.get_text() or "0.00 M params" in t.get_text() for t in fig.axes[0].texts)
    assert "not drawn, no trained model: 1 retried: small_cnn#002 → small_cnn#002~r1" in fig.axes[0].get_xlabel()
    assert fig.axes[0].get_title() == "Leaderboard: best at the top"       # nothing pruned: the plain rule
    assert "| 9 | small_cnn#002 (retried as small_cnn#002~r1) | lr 2e-4, bs 16, width 64 |" in md


def test_no_text_of_the_leaderboard_png_overprints_another(real_reports):
    from support.figures import overlapping
    _, _, figures = real_reports["tpe-asha"]
    fig = figures["leaderboard.png"]
    ax = fig.axes[0]
    labels, notes = ax.get_yticklabels(), ax.texts
    legend = [t for legend in fig.legends for t in legend.get_texts()]
    assert overlapping(fig, labels, labels) == [] and overlapping(fig, notes, notes) == []
    assert overlapping(fig, [ax.title], legend + list(labels) + list(notes)) == []
    assert overlapping(fig, legend, [ax]) == []          # the legend stands above the bars, not on them


def test_curves_png_one_epoch_axis_a_scale_per_trial_and_the_title_above_every_panel(real_reports):
    from support.figures import overlapping
    _, _, figures = real_reports["tpe-asha"]
    fig = figures["curves.png"]
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert len(panels) == 6
    assert all(ax.get_xlim() == (0.5, 6.5) for ax in panels)   # a trial pruned at epoch 1 included: not 0.945–1.050
    once = next(ax for ax in panels if ax.get_title().startswith("deep_cnn#016 (pruned at 1)"))
    low, high = once.get_ylim()
    points = [y for line in once.get_lines() for y in line.get_ydata()]
    assert low <= min(points) and max(points) <= high and (low, high) != (0, 1.02)
    assert min(points) - low < 0.1 * (high - low) + 0.05           # its own scale: the points fill it
    assert overlapping(fig, [fig._suptitle], panels + [ax.title for ax in panels]) == []
    assert overlapping(fig, fig.legends, panels) == []


def test_a_run_whose_trials_were_lost_says_what_became_of_them_without_widening_its_pictures(real_reports):
    from support.figures import overlapping
    _, md, figures = real_reports["lab-overloaded"]
    board, curves = figures["leaderboard.png"], figures["curves.png"]
    assert len(board.axes[0].patches) == 2                      # the two trials trained; six lost or failed
    note = board.axes[0].get_xlabel()
    assert "4 retried: deep_cnn@lr=0.01,bs=32 → deep_cnn@lr=0.01,bs=32~r1" in note.replace("\n", " ")
    assert "2 failed: deep_cnn@lr=0.01,bs=32~r2" in note.replace("\n", " ")
    assert board.get_size_inches()[0] == 12.0 and all(len(line) <= 120 for line in note.splitlines())
    assert curves._supxlabel.get_text().startswith("not drawn, no epochs recorded: 4 retried")
    panels = [ax for ax in curves.axes if ax.axison]
    assert len(panels) == 2 and overlapping(curves, [curves._suptitle], curves.legends + panels) == []
    assert "| 8 | deep_cnn@lr=0.001,bs=32~r2 (failed: h1 reported no epoch for 121 s" in md


def test_history_rows_no_trainer_writes_are_left_out_with_a_note_and_never_a_traceback(tmp_path):
    """#46: a history value of 1e308 once raised OverflowError in the axis limits."""
    from launcher.report.epochs import read_history
    folder = run_folder(tmp_path)
    (folder / "history" / f"{TRIALS[0]}.csv").write_text(
        "epoch,loss,accuracy,val_loss,val_accuracy\n1,1,0.4,1,1e308\n2,1,0.5,1,0.6\n3,1,inf,1,0.6\n")
    (folder / "history" / f"{TRIALS[1]}.csv").write_text(
        "epoch,loss,accuracy,val_loss,val_accuracy\n1,nan,nan,nan,nan\n1e400,1,0.5,1,0.5\n-3,1,0.5,1,0.5\n")
    rows, note = read_history(folder, {"history": f"history/{TRIALS[0]}.csv"})
    assert [r["epoch"] for r in rows] == ["2"]
    assert note == f"history/{TRIALS[0]}.csv: 2 of 3 row(s) left out (val_accuracy 1e+308 is not an accuracy 0–1)"
    rows, note = read_history(folder, {"history": f"history/{TRIALS[1]}.csv"})
    assert [r["epoch"] for r in rows] == ["1"] and "epoch '1e400' is not a whole number" in note   # NaN: no figure, kept
    made = write_report(folder)
    text = (folder / "report.md").read_text()
    assert "## Notes" in text and f"history/{TRIALS[0]}.csv: 2 of 3 row(s) left out" in text
    assert [p.name for p in made.files][:3] == ["report.md", "leaderboard.png", "curves.png"]


def test_a_program_that_wrote_nothing_where_it_should_is_told_where_its_files_must_go(tmp_path):
    """#47: a `run:` program that saved its model under /tmp got "This run left no results"."""
    from launcher.report import outcome
    from launcher.report.build import ProgramFiles, write_outcome_only
    outcome.write(tmp_path, "lab", "20261127-120000-0badc0de", "finished", "chief h0 finished (exit 0)")
    text = write_outcome_only(tmp_path, ProgramFiles("/out", 0)).read_text()
    assert "left no results" not in text and "$TFC_RESULTS_DIR (/out" in text and "run.results_dir" in text
    text = write_outcome_only(tmp_path, ProgramFiles("/out", 3)).read_text()
    assert "wrote 3 file(s) to its results folder (/out)" in text and "TFC_RESULTS_DIR" not in text
    assert "left no results" in write_outcome_only(tmp_path).read_text()          # the trainer's run, as before
