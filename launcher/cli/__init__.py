"""`tfcompose`: the command line. It only parses, prints and exits; the core never prints or exits.

    app.py        the typer app, the shared options and helpers, `main` (exceptions → exit codes) and `run`
    inventory.py  validate, schema, init, render, preflight, bootstrap
    cluster.py    up, status, watch, logs, tensorboard, collect, down
    runs.py       track, runs, compare, report

Importing the package registers every command on the app (each module adds its own), in the order
`--help` lists them: an inventory's first, then a cluster's, then a run's.
"""
from launcher.cli import inventory  # noqa: F401,I001  (the order of these three is the order of --help)
from launcher.cli import cluster  # noqa: F401
from launcher.cli import runs  # noqa: F401
from launcher.cli.app import app, main, run

__all__ = ["app", "main", "run"]
