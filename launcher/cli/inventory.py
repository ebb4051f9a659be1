"""Commands on an inventory before or beside a run: validate, schema, init, render, preflight, bootstrap."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from launcher.cli.app import InventoryOpt, ParallelOpt, app, load_inventory, load_tracked, print_error, say
from launcher.errors import BadInput, TfcError


@app.command()
def validate(inventory_path: Path = InventoryOpt) -> None:
    """Check the inventory; print the cluster it describes. Contacts nothing, runs nothing."""
    from launcher.plan import expect_gpus
    from launcher.view import out, table
    cluster = load_tracked(inventory_path)
    rows = [[f"{h.index}{' (chief)' if h.chief else ''}", h.name, f"{h.ssh_user}@{h.address}:{h.ssh_port}",
             h.tf_address, expect_gpus(h.gpus), h.bundle_dir] for h in cluster.hosts]
    columns = ["task", "host", "ssh", "TF address", "gpus", "workdir"]
    if any(h.jumps or h.proxy_command for h in cluster.hosts):      # how SSH gets there, first hop first
        columns.insert(3, "via")
        for row, h in zip(rows, cluster.hosts):
            row.insert(3, " → ".join(b.target for b in h.jumps) or ("ProxyCommand" if h.proxy_command else "direct"))
    out.print(table(f"cluster {cluster.name}: {len(cluster.hosts)} host(s), image {cluster.spec.image}", columns, rows))
    if cluster.tracking is not None:
        from launcher.tracking.secrets import shown
        t = cluster.tracking
        say(f"tracking: MLflow at {shown(t.uri)}, experiment {t.experiment!r}"
             + (f", best model registered as {t.register_as}" if t.register_as else ""))
    if cluster.spec.run is None:        # the search it understood: your own program searches as it likes
        from launcher.report.values import space_lines
        for line in space_lines(cluster.spec.train_or_defaults):
            say(line)
    say(f"{inventory_path}: valid")


@app.command("schema")
def schema_cmd() -> None:
    """Print the inventory's JSON Schema (every key, its type, default and description), for editors:
    an inventory whose first line is `# yaml-language-server: $schema=<file>` gets completion and checks."""
    from launcher.inventory.json_schema import text
    sys.stdout.write(text())


@app.command("init")
def init_cmd(hosts: list[str] = typer.Argument(..., help="the hosts: host, user@host, host:port, or ~/.ssh/config aliases"),
             output: Path = typer.Option(Path("inventory.yaml"), "--output", "-o", dir_okay=False,
                                         help="the inventory to write (never overwritten)"),
             cluster: str = typer.Option("lab", "--cluster", help="the cluster's name in it"),
             user: Optional[str] = typer.Option(None, "--user", help="the login user on every host (default: "
                                                "~/.ssh/config's, else yours)"),
             identity_file: Optional[Path] = typer.Option(None, "--identity-file", dir_okay=False,
                                                          help="the private key (default: the agent, ~/.ssh/config)"),
             known_hosts: Optional[Path] = typer.Option(None, "--known-hosts", dir_okay=False,
                                                        help="where host keys are checked (default ~/.ssh/known_hosts)"),
             accept_new: bool = typer.Option(False, "--accept-new", help="record a host key seen for the first time "
                                             "(default: strict, an unknown key is refused)"),
             parallel: Optional[int] = ParallelOpt) -> None:
    """Ask each host, over SSH and read-only, for its OS, Docker, GPUs, network interfaces and free disk,
    and write a commented starter inventory for them (a file that exists is refused)."""
    from launcher.bootstrap.init import SshOptions, init
    from launcher.inventory.json_schema import schema_reference
    from launcher.view import RichReporter
    ssh = SshOptions(user, identity_file.absolute() if identity_file else None,
                     known_hosts.absolute() if known_hosts else None, accept_new)
    names = [f"h{i}" for i in range(len(hosts))]
    with RichReporter(names) as rep:
        written = init(hosts, output, cluster, ssh, schema_reference(output),
                       "tfcompose init " + " ".join(hosts), rep, parallel)
    for name, address, found in written.hosts:
        gpus = f"{len(found.gpus)} GPU(s)" if found.gpus else "no GPU"
        docker = f"Docker {found.engine_version}" if found.engine_version else "no Docker"
        say(f"{name} ({address}): {found.os_name}, {docker}, {gpus}" + (f", route via {found.route_nic}"
                                                                          if found.route_nic else ""))
    say(f"wrote {written.path}; check it with `tfcompose validate -i {written.path}`")


@app.command("render")
def render_cmd(inventory_path: Path = InventoryOpt,
               output: Path = typer.Option(Path("build"), "--output", "-o", help="folder to write into"),
               target: str = typer.Option("compose", "--target", help="compose (what `up` pushes), jobset (Kubernetes) "
                                          "or slurm (an sbatch script)")) -> None:
    """Write exactly what `up` pushes (build/<cluster>/<host>/…), or the cluster as a Kubernetes JobSet
    (build/<cluster>/{jobset,configmap}.yaml) or a Slurm job (build/<cluster>/{tfcompose.sbatch,train.yaml})."""
    from launcher import plan, targets
    from launcher.stages import render
    if target not in ("compose", *targets.TARGETS):
        raise BadInput(f"--target: Received {target!r}. Expected compose, {', '.join(targets.TARGETS)}.")
    made = plan.make(load_inventory(inventory_path))
    paths = render.write_bundles(made, output) if target == "compose" else targets.write(made, target, output)
    for path in paths:
        say(str(path))


@app.command("preflight")
def preflight_cmd(inventory_path: Path = InventoryOpt, parallel: Optional[int] = ParallelOpt) -> None:
    """Check every host at once: SSH, Docker, compose v2, GPUs, tf_port, workdir, disk, data_dir, clock."""
    from launcher.stages import preflight
    from launcher.view import RichReporter
    cluster = load_inventory(inventory_path)
    with RichReporter([h.name for h in cluster.hosts]) as rep:
        found = preflight.run(cluster, rep, parallel)
    for host in cluster.hosts:
        f = found.facts[host.name]
        say(f"{host.name}: ready (docker compose {f.compose}, "
             f"{f.free_kb // 1048576 if f.free_kb is not None else '?'} GB free, nic {found.plan.nic(host) or '?'})")
    say(f"links between hosts ({found.links.port}):\n{found.links.text()}" if found.links else
         "links between hosts: checked by `up` once the image is on every host")
    if cluster.spec.dataset_source:
        say("datasets: `up` makes every data_dir a copy of dataset_source, then checks them")
    elif found.datasets:
        say(f"datasets: the {len(found.datasets)} hosts hold the same files "
             f"({next(iter(found.datasets.values())).summary()})")


@app.command("bootstrap")
def bootstrap_cmd(inventory_path: Path = InventoryOpt,
                  yes: bool = typer.Option(False, "--yes", "-y", help="take the steps (without it: the plan only, nothing "
                                           "changes)"),
                  offline: Optional[bool] = typer.Option(None, "--offline/--online", help="the hosts need no network: "
                                                         "their .debs are resolved here and sent over SSH (default: the "
                                                         "inventory's bootstrap.offline)"),
                  ask_become_pass: bool = typer.Option(False, "--ask-become-pass", "-K", help="ask once for the sudo "
                                                       "password of the hosts' user (given to sudo on stdin only)"),
                  parallel: Optional[int] = ParallelOpt) -> None:
    """Make bare Debian 12 / Ubuntu 22.04, 24.04 boxes ready hosts: Docker with compose v2, you in the
    docker group, the workdir, and on GPU hosts the NVIDIA Container Toolkit. Prints the plan; --yes does it."""
    from launcher.bootstrap.stage import Options, Secret, bootstrap
    from launcher.bootstrap_lines import bootstrap_lines
    from launcher.view import RichReporter
    cluster = load_inventory(inventory_path)
    secret = None
    if ask_become_pass:
        import getpass
        try:
            secret = Secret(getpass.getpass("sudo password on the hosts: "))
        except EOFError:
            raise BadInput("--ask-become-pass: Received no password (its input ended). Expected the sudo password, "
                           "typed at the terminal or given on stdin.") from None
    try:
        with RichReporter([h.name for h in cluster.hosts]) as rep:
            outcome = bootstrap(cluster, rep, Options(yes=yes, offline=offline, become_pass=secret), parallel)
    except KeyboardInterrupt:
        if yes:
            print_error("tfcompose: an installation already started goes on on its host; `tfcompose bootstrap` "
                         "again follows it to its end")
        raise
    for line in bootstrap_lines(outcome):
        say(line)
    if not outcome.ok:
        bad = [f"{r.host} {r.state}" for r in outcome.hosts.values() if not r.ok]
        raise TfcError(f"bootstrap: {len(bad)} of {len(outcome.hosts)} host(s) not ready ({', '.join(bad)})")

