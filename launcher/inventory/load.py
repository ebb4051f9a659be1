"""Loading an inventory: a YAML file of hosts, validated into one typed model (schema.py), then
resolved per host and every local path resolved against the file's folder (model.py).

Every problem is reported at once, one line each, as
`inventory.yaml:12:5: hosts[1].tf_port: Received 70000. Expected an integer 1–65535.`
"""
from __future__ import annotations

import getpass
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from launcher.errors import InventoryError
from launcher.inventory import checks, jumps, tracking
from launcher.inventory.model import Cluster, Host
from launcher.inventory.fields import JUMP
from launcher.inventory.schema import Inventory
from launcher.inventory.ssh_config import SshConfig
from trainer.spec import yamlfile
from trainer.spec.validation import Problem, validate

# ${NAME} and ${NAME:-default}; $$ is a literal $ (as in compose files).
ENV_REF = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_cluster(path: str | os.PathLike, environ: dict[str, str] | None = None) -> Cluster:
    """Read, validate and resolve an inventory; raises InventoryError with every problem."""
    path = Path(path)
    environ = dict(os.environ if environ is None else environ)
    doc = yamlfile.load(path, "the inventory", InventoryError)
    data, env_problems = _expand_env(doc.data, environ)
    if env_problems:
        raise InventoryError([p.line(doc.locate(p.loc)) for p in env_problems])
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: (top level): Received {type(data).__name__ if data is not None else 'an empty file'}. "
                             "Expected a mapping with cluster, hosts and the other inventory keys.")
    # Names and chiefs are checked on the raw data too, so they are reported with field errors.
    lines = [p.line(doc.locate(p.loc)) for p in checks.names_and_chiefs(data.get("hosts"))]
    try:
        spec = validate(Inventory, data, str(path), locate=doc.locate, error=InventoryError)
    except InventoryError as exc:
        raise InventoryError(_by_position(lines + exc.lines)) from None
    cluster, found = _resolve(path, spec, environ)
    settings, found_tracking = tracking.resolve(spec, environ)
    cluster, found = replace(cluster, tracking=settings), found + found_tracking
    lines += [p.line(doc.locate(p.loc)) for p in found + checks.cross_checks(cluster)]
    if lines:
        raise InventoryError(_by_position(lines))
    return cluster


def _by_position(lines: list[str]) -> list[str]:
    def key(line: str):
        m = re.match(r"^.*?:(\d+):(\d+): ", line)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return sorted(dict.fromkeys(lines), key=key)


def _expand_env(data: Any, environ: dict[str, str], loc: tuple = ()) -> tuple[Any, list[Problem]]:
    """Replace ${NAME} and ${NAME:-default} in every string, $$ by $; unset names are problems."""
    if isinstance(data, dict):
        out, problems = {}, []
        for key, value in data.items():
            out[key], found = _expand_env(value, environ, loc + (key,))
            problems += found
        return out, problems
    if isinstance(data, list):
        pairs = [_expand_env(v, environ, loc + (i,)) for i, v in enumerate(data)]
        return [v for v, _ in pairs], [p for _, found in pairs for p in found]
    if not isinstance(data, str) or "$" not in data:
        return data, []
    missing = [m.group(1) for m in ENV_REF.finditer(data)
               if m.group(1) and m.group(1) not in environ and m.group(2) is None]
    if missing:
        return data, [Problem(loc, f"Received {data!r}", f"the environment variable {missing[0]} to be set "
                              "(or $$ for a literal $)")]
    return ENV_REF.sub(lambda m: "$" if m.group(0) == "$$" else environ.get(m.group(1), m.group(2) or ""), data), []


def _local_path(value: str, base: Path) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else (base / path).resolve()


def _resolve(path: Path, spec: Inventory, environ: dict[str, str]) -> tuple[Cluster, list[Problem]]:
    """Every host resolved; and what is wrong with the ways to them (jump chains that loop)."""
    base, d = path.resolve().parent, spec.defaults
    ssh_cfg = SshConfig(_local_path(spec.ssh.config_file, base))
    ordered = sorted(enumerate(spec.hosts), key=lambda ih: not _is_chief(spec, ih[0]))
    explicit_ssh = spec.ssh.model_fields_set
    hosts, problems = [], []
    for index, (pos, entry) in enumerate(ordered):
        alias = ssh_cfg.lookup(entry.address)
        identity = entry.identity_file or (spec.ssh.identity_file if "identity_file" in explicit_ssh else None) \
            or alias.identity_file
        workdir = (entry.workdir or d.workdir).rstrip("/") or "/"
        host = Host(
            name=entry.name, address=alias.hostname or entry.address,
            ssh_user=entry.ssh_user or spec.ssh.user or alias.user or _local_user(environ),
            ssh_port=entry.ssh_port or (spec.ssh.port if "port" in explicit_ssh else None) or alias.port or spec.ssh.port,
            identity_file=_local_path(identity, base) if identity else None,
            tf_port=entry.tf_port or d.tf_port, workdir=workdir,
            gpus=entry.gpus if entry.gpus is not None else d.gpus,
            data_dir=entry.data_dir or d.data_dir, nic=entry.nic or d.nic, shm_size=entry.shm_size or d.shm_size,
            chief=index == 0, index=index, bundle_dir=f"{workdir.rstrip('/')}/{spec.cluster}",
            lease_dir=(entry.lease_dir or d.lease_dir).rstrip("/"))
        host, found = _way_in(host, pos, entry, alias, spec, ssh_cfg, lambda v: _local_path(v, base), environ)
        hosts.append(host)
        problems += found
    return (Cluster(path, spec, tuple(hosts), folder=base, known_hosts=_local_path(spec.ssh.known_hosts, base),
                    dataset_source=_local_path(spec.dataset_source, base) if spec.dataset_source else None,
                    code_dir=_local_path(spec.run.code_dir, base) if spec.run else None), problems)


def _way_in(host: Host, pos: int, entry, alias, spec: Inventory, ssh_cfg: SshConfig, path_of,
            environ: dict[str, str]) -> tuple[Host, list[Problem]]:
    """The host with the bastions (or the ProxyCommand) SSH reaches it through: its own
    proxy_jump, else ssh.proxy_jump, else the ssh config's ProxyJump or ProxyCommand for it."""
    if entry.proxy_jump is not None or spec.ssh.proxy_jump is not None:
        text = entry.proxy_jump if entry.proxy_jump is not None else spec.ssh.proxy_jump
        loc = ("hosts", pos, "proxy_jump") if entry.proxy_jump is not None else ("ssh", "proxy_jump")
        said, lines = f"Received {text!r}", f"the ProxyJump lines of {ssh_cfg.path}"
    elif alias.proxy_jump is not None:
        text, loc = alias.proxy_jump, ("hosts", pos, "address")
        said, lines = f"Received {entry.address!r}, whose ProxyJump in {ssh_cfg.path} is {text!r}", "the ProxyJump lines there"
    else:
        return replace(host, proxy_command=alias.proxy_command), []
    identity = spec.ssh.identity_file if "identity_file" in spec.ssh.model_fields_set else None
    try:
        bastions = jumps.resolve(text, ssh_cfg.lookup, _local_user(environ), identity, path_of)
    except jumps.Loop as exc:
        return host, [Problem(loc, f"{said}, but {lines} go round in a circle ({exc})", "a chain of jump hosts that ends")]
    except ValueError as exc:
        return host, [Problem(loc, f"{said} ({exc})", JUMP)]
    why = jumps.loop(host.name, host.address, host.ssh_port, bastions)
    if why:
        return host, [Problem(loc, f"{said}, but {why}", "a chain of jump hosts that never comes back to a hop "
                              "or to the host itself")]
    own = path_of(identity) if identity else None     # a missing ssh.identity_file is reported as such
    missing = [b for b in bastions if b.identity_file not in (None, own) and not b.identity_file.is_file()]
    return replace(host, jumps=bastions), [
        Problem(loc, f"{said}; its bastion {b.name}'s key {str(b.identity_file)!r} does not exist",
                "an existing private key file (the ssh config's IdentityFile for it, else ssh.identity_file)")
        for b in missing[:1]]


def _is_chief(spec: Inventory, pos: int) -> bool:
    marked = [i for i, h in enumerate(spec.hosts) if h.chief]
    return pos == (marked[0] if marked else 0)


def _local_user(environ: dict[str, str]) -> str:
    return environ.get("USER") or getpass.getuser()

