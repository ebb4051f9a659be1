"""`tfcompose`: parse, dispatch, print. Exceptions become exit codes here and only here."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from launcher import inventory, render
from launcher.errors import ExitCode, InventoryError, TfcError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and compare TensorFlow models across the GPU boxes of an inventory.")
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
STATE = {"debug": False}

InventoryOpt = typer.Option(Path("inventory.yaml"), "--inventory", "-i", help="the inventory YAML",
                            dir_okay=False)


@app.callback()
def _global(debug: bool = typer.Option(False, "--debug", help="show tracebacks")) -> None:
    STATE["debug"] = debug


@app.command()
def validate(inventory_path: Path = InventoryOpt) -> None:
    """Check the inventory; print the cluster it describes. Contacts nothing."""
    cluster = inventory.load(inventory_path)
    table = Table(title=f"cluster {cluster.name}: {len(cluster.hosts)} host(s), image {cluster.spec.image}")
    for column in ("task", "host", "ssh", "TF address", "gpus", "workdir"):
        table.add_column(column)
    for h in cluster.hosts:
        table.add_row(f"{h.index}{' (chief)' if h.chief else ''}", h.name, f"{h.ssh_user}@{h.address}:{h.ssh_port}",
                      h.tf_address, render.expect_gpus(h.gpus), h.bundle_dir)
    out.print(table)
    out.print(f"{inventory_path}: valid", markup=False)


@app.command("render")
def render_cmd(inventory_path: Path = InventoryOpt,
               output: Path = typer.Option(Path("build"), "--output", "-o", help="folder to write into")) -> None:
    """Write exactly what `up` pushes: build/<cluster>/<host>/{compose.yaml, tf_config.json, train.yaml, .env}."""
    cluster = inventory.load(inventory_path)
    for path in render.write_bundles(cluster, output):
        out.print(str(path), markup=False)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        result = app(args=argv, prog_name="tfcompose", standalone_mode=False)
        return int(result or ExitCode.OK)
    except InventoryError as exc:
        if debug:
            raise
        for line in exc.lines:  # already `file:line:col: field: …`
            err.print(line, markup=False, soft_wrap=True)
        err.print(f"tfcompose: {len(exc.lines)} problem(s) in the inventory; nothing was contacted.", markup=False)
        return int(exc.exit_code)
    except TfcError as exc:
        if debug:
            raise
        err.print(f"tfcompose: {exc}", markup=False, soft_wrap=True)
        return int(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err.print("tfcompose: interrupted", markup=False)
        return int(ExitCode.INTERRUPTED)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: unknown option, missing argument...
        exc.show()
        return int(ExitCode.BAD_INPUT)


def run() -> None:
    sys.exit(main())
