"""The search: which trial comes next, on which host, and when one stops. Imports one trial's
training (train/), the cluster and the spec.

    study.py         the Optuna study: the budget, no point trained twice, pruning, retries
    draws.py         a trial asked of Optuna: a fixed point enqueued, a sampled one that may not repeat
    samplers.py      the samplers and pruners by name, as Optuna makes them; a value suggested
    study_file.py    study.db: opened, resumed only for the same search, guarded, copied out
    study_records.py a trial's attributes in study.db, its results.json record, the live counts
    points.py        a search's points without Optuna: names of values, sameness, an untried point
    retries.py       the retries waiting for a host, and which host takes one
    coordinator.py   the chief's side of a parallel search: the study as the hosts see it
    queue.py         the trial queue's transport: HTTP on the chief
    queue_client.py  the queue as a host calls it: over HTTP, or the chief's own loop; heartbeats
    wire.py          what crosses the network: typed messages and the proof a call comes from its host
    trial_loop.py    the one loop: take a trial from a source, train it, report, keep the best
"""
