"""The inventory as the stages see it: every host with every setting resolved (inventory >
~/.ssh/config > defaults) and every local path resolved against the inventory's folder, once,
at load (load.py). Nothing here reads a file or contacts a host."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from launcher.errors import InventoryError
from launcher.inventory.jumps import Bastion  # noqa: F401  (a jump host: resolved in jumps.py, named here too)
from launcher.inventory.schema import Inventory




@dataclass(frozen=True)
class Host:
    """One host with every setting resolved (inventory > ~/.ssh/config > defaults)."""

    name: str
    address: str          # what SSH connects to and TF_CONFIG names
    ssh_user: str
    ssh_port: int
    identity_file: Optional[Path]
    tf_port: int
    workdir: str
    gpus: Any
    data_dir: Optional[str]
    nic: Optional[str]
    shm_size: str
    chief: bool
    index: int            # task index in TF_CONFIG (chief first)
    bundle_dir: str       # <workdir>/<cluster>: compose bundle, results, backups
    jumps: tuple[Bastion, ...] = ()       # the bastions SSH goes through, first hop first
    proxy_command: Optional[str] = None   # or the ssh config's ProxyCommand for it (never both)
    lease_dir: str = "/var/tmp/tfcompose-leases"   # shared by every user of the host (launcher/leases/)

    @property
    def tf_address(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.tf_port}"


@dataclass(frozen=True)
class TrackerSettings:
    """Where a run is tracked: `tracking.mlflow` resolved (inventory > environment > defaults).
    The URI may hold a token or password: launcher/tracking/secrets.py says it without them."""

    uri: str
    experiment: str
    register_as: Optional[str] = None
    timeout_s: float = 10.0


@dataclass(frozen=True)
class Cluster:
    path: Path
    spec: Inventory
    hosts: tuple[Host, ...]   # chief first, then inventory order
    folder: Path = Path(".")              # the inventory's own folder (hooks run there)
    known_hosts: Path = Path("known_hosts")
    dataset_source: Optional[Path] = None
    code_dir: Optional[Path] = None
    tracking: Optional[TrackerSettings] = None   # tracking.mlflow resolved (inventory/tracking.py)

    @property
    def name(self) -> str:
        return self.spec.cluster

    @property
    def chief(self) -> Host:
        return self.hosts[0]

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise InventoryError(f"{self.path}: no host named {name!r}. Expected one of: "
                             + ", ".join(h.name for h in self.hosts) + ".")
