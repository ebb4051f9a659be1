"""The command line's frame: the typer app, the options and helpers its commands share, and `main`,
where exceptions become exit codes (here and only here).

Heavy libraries (paramiko, the docker SDK, matplotlib, jinja2, rich's live view) are imported by
the command that needs them, so `--help` and `validate` start fast.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from launcher.errors import BadInput, ExitCode, InventoryError, TfcError
from launcher.runfiles import RunFileError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and compare TensorFlow models across the GPU boxes of an inventory.")

InventoryOpt = typer.Option(Path("inventory.yaml"), "--inventory", "-i", help="the inventory YAML", dir_okay=False)
ParallelOpt = typer.Option(None, "--parallel", min=1, help="hosts worked on at once (default: all)")
RunsOpt = typer.Option(Path("runs"), "--runs", help="where results go")


@app.callback()
def _global(debug: bool = typer.Option(False, "--debug", help="show tracebacks")) -> None:
    """--debug is read by main(); declared here so that typer accepts it."""


def load_inventory(path: Path):
    from launcher.inventory.load import load_cluster
    cluster = load_cluster(path)
    if cluster.tracking is not None:        # its password or token masked in all this process prints
        from launcher.tracking.secrets import remember
        remember(cluster.tracking.uri)
    return cluster


def load_tracked(path: Path):
    """An inventory for a command that may send to its tracker: MLflow's client must be here."""
    from launcher.tracking.client import require_client
    cluster = load_inventory(path)
    require_client(cluster)
    return cluster


def say_tracking(run_dir: Path) -> None:
    from launcher.tracking.ledger import summary
    line = summary(run_dir)
    if line:
        say(line)


def say(text: str) -> None:
    from launcher.view import say as view_say
    view_say(text)



def print_error(text: str) -> None:
    from launcher.view import shout
    shout(text)


# What Ctrl-C leaves behind, by command: only `up` starts containers; `logs` and `watch` only read.
INTERRUPTED = {"up": "containers already started keep running: `tfcompose down` stops them",
               "logs": "stopped following the logs; nothing was changed on the hosts",
               "watch": "stopped watching; the run goes on (`tfcompose watch` attaches again)",
               "down": "`tfcompose down` again removes what is left",
               "collect": "`tfcompose collect` again brings back what is missing"}


def _interrupted(argv: list[str]) -> int:
    # Its clean-up has run: Ctrl-C pressed yet again changes nothing now, and must not turn the
    # exit into a death by signal, or a traceback from the interpreter's shutdown (the command's
    # own process only: a test calling `main` keeps its handler).
    if _PROCESS["own"]:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    command = next((a for a in argv if not a.startswith("-")), "")
    note = INTERRUPTED.get(command)
    print_error("tfcompose: interrupted" + (f" ({note})" if note else ""))
    return int(ExitCode.INTERRUPTED)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        result = app(args=argv, prog_name="tfcompose", standalone_mode=False)
        if result == ExitCode.INTERRUPTED:    # typer answers Ctrl-C by returning 130, silently
            return _interrupted(argv)
        return int(result or ExitCode.OK)
    except BadInput as exc:
        if debug:
            raise
        for line in exc.lines:  # already `file:line:col: field: …`
            print_error(line)
        if isinstance(exc, InventoryError):
            print_error(f"tfcompose: {len(exc.lines)} problem(s) in the inventory; nothing was contacted.")
        return int(exc.exit_code)
    except TfcError as exc:
        if debug:
            raise
        print_error(f"tfcompose: {exc}")
        return int(exc.exit_code)
    except RunFileError as exc:   # a link, a FIFO or a device in a run folder: bad input, said as such
        if debug:
            raise
        print_error(exc.line)
        return int(ExitCode.BAD_INPUT)
    except OSError as exc:        # this machine's files: a folder not writable, a disk full
        if debug:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        print_error(f"tfcompose: cannot use{where}: {exc.strerror or exc}")
        return int(ExitCode.FAILED)
    except (KeyboardInterrupt, typer.Abort):
        return _interrupted(argv)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: unknown option, missing argument...
        exc.show()
        return int(ExitCode.BAD_INPUT)


_PROCESS = {"own": False}     # `run`: this process is the command's own


def run() -> None:
    _PROCESS["own"] = True
    sys.exit(main())
