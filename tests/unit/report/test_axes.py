"""The report's axes: accuracy ranges from the data, a real epoch axis, text shown literally."""
from __future__ import annotations

from launcher.report import axes


def test_accuracy_axes_come_from_the_data_so_the_contenders_are_told_apart():
    assert axes.accuracy_limits([0.955, 0.97, 0.99, 1.0])[0] == 0.94       # not 0: the 0.95–1.0 band fills the axis
    bottom, top = axes.accuracy_limits([0.136, 0.189])
    assert 0.1 <= bottom <= 0.136 and 0.189 < top < 0.25                    # a trial at chance, on its own scale
    assert axes.accuracy_limits([1.0, 1.0])[1] > 1.0                        # 1.0 itself stays inside
    many = [0.19] + [0.9 + i / 100 for i in range(10)]
    bottom, _ = axes.accuracy_limits(many, spare=0.1)
    assert bottom > 0.8 and axes.below(many, bottom) == 1                  # the diverged one falls below, counted
    assert axes.accuracy_limits([]) == (0.0, 1.02) and axes.accuracy_limits([float("nan")]) == (0.0, 1.02)


def test_an_epoch_axis_stays_an_axis_when_a_trial_ran_one_epoch():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([1], [0.9], "o")
    axes.epoch_axis(ax, 6)
    assert ax.get_xlim() == (0.5, 6.5) and [t for t in ax.get_xticks() if 1 <= t <= 6] == [1, 2, 3, 4, 5, 6]
    plt.close(fig)


def test_text_from_a_results_file_is_shown_literally():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.set_title(axes.plain("failed: ValueError: cost $5 or $x^{"))     # unbalanced mathtext would stop the drawing
    fig.canvas.draw()
    assert ax.get_title() == r"failed: ValueError: cost \$5 or \$x^{"
    plt.close(fig)


def test_what_a_picture_leaves_out_is_said_by_what_became_of_it_in_a_few_short_lines():
    lost = [{"candidate": f"deep_cnn@lr=0.01,bs=32~r{i}", "state": "retried", "retried_as": f"deep_cnn@lr=0.01,bs=32~r{i + 1}"}
            for i in range(4)] + [{"candidate": "deep_cnn#7", "state": "failed", "why": "out of memory"}]
    note = axes.left_out(lost, "no trained model")
    assert note.startswith("not drawn, no trained model: 4 retried: deep_cnn@lr=0.01,bs=32~r0 → deep_cnn@lr=0.01,bs=32~r1")
    assert "…; 1 failed: deep_cnn#7" in note.replace("\n", " ")
    assert all(len(line) <= 120 for line in note.splitlines())    # wrapped: the picture keeps its width
    assert axes.left_out([], "no trained model") == ""
