"""The report: what a collected run looks like to a person (`tfcompose report`, `runs`, `compare`):
report.md and its pictures, drawn on this machine from the run folder's files (matplotlib, imported
where it draws).

    build.py      report.md, the leaderboard, the curves and the confusion matrix
    search.py     the part for a search the study drove (sampler, pruner: its rungs, its picture)
    elastic.py    an elastic run's re-forms: a section, and a mark on the curves where the cluster changed
    telemetry.py  the hardware part: each host's figures, the warnings replayed, telemetry.png
    epochs.py     a trial's history CSV read and checked (no matplotlib: the tracking mapping reads it too)
    history.py    every run of a cluster (`runs`) and two runs side by side (`compare`)
    outcome.py    outcome.json: how a run ended, for a run that left no results
    values.py     searched values as a person reads them
    axes.py       what the pictures share (their style, their labels)
"""
