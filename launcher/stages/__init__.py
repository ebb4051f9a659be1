"""The steps of `up` (up.py composes them, in order) and the commands beside it.

    up.py           the composition: leases, preflight, image, dataset, links, push, start, wait, collect
    preflight.py    every host checked at once; cluster_rules.py what the facts mean across hosts
    render.py       the plan into each host's files (compose/templates/)
    links.py        every host reaches every other's TensorFlow port, each link measured
    push.py         each host's bundle, atomically and private
    start.py        every host's container, all or nothing
    wait.py         until the run ends, each host looked at on its own thread (looks.py)
    wait_rules.py   when a run has ended, failed or goes on without a host (pure)
    collect.py      results, logs and telemetry into runs/<cluster>/<run>/
    down.py         containers (and TensorBoards) removed; --purge the folders tfcompose made
    status.py, logs.py, watch.py, tensorboard.py, hooks.py   the commands beside `up`
    tensorboard_source.py   which host, folder and image `tensorboard` serves (pure)
"""
