"""The search's pictures from real runs (tests/data/runs): search.png and parameters.png."""
from __future__ import annotations

import pytest

from launcher.runfiles import load_results as load


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """search.png and parameters.png of each real run, drawn once and kept open."""
    from launcher.report import search as search_report
    from support.figures import Kept, real_run
    made = {}
    for name in ("tpe-asha", "parallel-lost-host"):
        kept = Kept()
        folder = real_run(name, tmp_path_factory.mktemp("runs"))
        doc = load(folder)
        search_report.plot_search(doc, folder, kept)
        search_report.plot_parameters(doc, folder, kept)
        made[name] = (doc, kept.figures, kept)
    yield made
    for _, _, kept in made.values():
        kept.close()


def test_search_png_has_a_legend_and_an_axis_that_tells_the_contenders_apart(searched):
    from support.figures import overlapping
    doc, figures, _ = searched["tpe-asha"]
    fig = figures["search.png"]
    ax = fig.axes[0]
    legend = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert {"deep_cnn", "small_cnn", "best: deep_cnn#011", "pruned (× where it stopped)",
            "rung: the pruner judges here"} <= set(legend)
    bottom, top = ax.get_ylim()
    assert top >= 1.0 and (1.0 - 0.95) / (top - bottom) >= 0.15, (bottom, top)   # was 0–1.02: 5 % of the height
    under = [r["candidate"] for r in doc["candidates"] if min(r["curve"]) < bottom]
    assert under and all(name in ax.get_xlabel() for name in under)             # below the axis: named, not lost
    assert overlapping(fig, fig.legends, [ax]) == [] and overlapping(fig, [ax.title], fig.legends) == []
    assert ax.get_xlim() == (0.5, 6.5)


def test_search_png_draws_a_retried_trial_as_what_it_is(searched):
    _, figures, _ = searched["parallel-lost-host"]
    legend = [t.get_text() for legend in figures["search.png"].legends for t in legend.get_texts()]
    assert "retried (its epochs so far)" in legend and "rung: the pruner judges here" not in legend   # no pruner


def test_parameters_png_shows_only_the_values_that_varied_with_its_legend_off_the_panels(searched):
    from support.figures import overlapping
    for name, panels in (("tpe-asha", {"batch_per_replica", "learning_rate", "dropout", "width"}),
                         ("parallel-lost-host", {"batch_per_replica", "learning_rate", "width"})):
        doc, figures, _ = searched[name]
        fig = figures["parameters.png"]
        shown = [ax for ax in fig.axes if ax.axison]
        assert {ax.get_title() for ax in shown} == panels
        assert overlapping(fig, fig.legends, shown) == []         # three panels in a row: the legend beside them
        trained = [r for r in doc["candidates"] if r.get("state") in ("complete", "pruned")]
        lr = next(ax for ax in shown if ax.get_title() == "learning_rate")
        assert len(lr.get_lines()) == len(trained)                # the retried trial is no point: it has no figure
