"""The inventory: a YAML file of hosts, validated into one typed model, then resolved per host.

Every problem is reported at once, one line each, as
`inventory.yaml:12:5: hosts[1].tf_port: Received 70000. Expected an integer 1–65535.`
"""
from __future__ import annotations

import getpass
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, List, Literal, Optional, Union

import paramiko
import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from launcher.errors import InventoryError
from trainer.config import TrainConfig
from trainer.validation import InvalidInput, Problem, StrictIntT, field, read_utf8, validate, yaml_problem

NAME_RE = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"
HOSTNAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
IMAGE_RE = (r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]{1,5})?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
            r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Name = Annotated[str, StringConstraints(pattern=NAME_RE)]
Port = Annotated[StrictIntT, Field(ge=1, le=65535)]
def _no_dot_dot(path: str) -> str:
    if ".." in path.split("/"):
        raise ValueError("no '..' component")
    return path


RemotePath = Annotated[str, StringConstraints(pattern=r"^/(?:[A-Za-z0-9._@+-]+/?)*$", max_length=1024),
                       AfterValidator(_no_dot_dot)]
LocalPath = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[^\x00\n]*$")]
GpuList = Annotated[List[Annotated[StrictIntT, Field(ge=0, le=1023)]], Field(min_length=1, max_length=64)]
Gpus = Union[Literal["all"], Annotated[StrictIntT, Field(ge=0, le=1024)], GpuList]

PORT = "an integer 1–65535"
GPUS = "'all', a GPU count (0 for CPU only), or a list of GPU ids like [0, 1]"
WORKDIR = "an absolute path of letters, digits and ._@+- (no '..', spaces or ':')"
NIC = "a network interface name or NCCL filter such as eth0, =eth0 or ^docker,lo"
SHM = "a size such as 2g or 512m, or 'host' (ipc: host)"
USER = "a user name of lowercase letters, digits, _ and -"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SSHSettings(_Strict):
    # Login user on every host (default: ~/.ssh/config's User, else your local user name).
    user: Optional[str] = field(None, expected=USER, pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    # SSH port on every host.
    port: Port = field(22, expected=PORT)
    # Private key; without it, the SSH agent and ~/.ssh/config's IdentityFile are used.
    identity_file: Optional[LocalPath] = field(None, expected="a path to a private key file")
    # strict: the host key must already be in known_hosts. accept-new: record unknown keys once.
    host_key_policy: Literal["strict", "accept-new"] = field("strict", expected="'strict' or 'accept-new'")
    # Where host keys are checked (and, with accept-new, recorded).
    known_hosts: LocalPath = field("~/.ssh/known_hosts", expected="a path to a known_hosts file")
    # OpenSSH client config consulted for Host aliases (HostName, User, Port, IdentityFile).
    config_file: LocalPath = field("~/.ssh/config", expected="a path to an ssh_config file")
    # Seconds to wait for a host to answer.
    connect_timeout_s: float = field(10.0, expected="a number of seconds 1–300", ge=1, le=300)


class Defaults(_Strict):
    # Port of the TensorFlow gRPC server on every host (host networking).
    tf_port: Port = field(2222, expected=PORT)
    # Folder on each host that receives <cluster>/ with the compose bundle, results and backups.
    workdir: RemotePath = field("/opt/tfcompose", expected=WORKDIR)
    # GPUs for the container.
    gpus: Gpus = field("all", expected=GPUS)
    # Image folder on each host, mounted read-only at /data.
    data_dir: Optional[RemotePath] = field(None, expected=WORKDIR.replace("absolute path", "absolute path of a folder"))
    # NCCL_SOCKET_IFNAME: the NIC that carries cross-host traffic.
    nic: Optional[str] = field(None, expected=NIC, pattern=r"^[A-Za-z0-9^=_.,:-]{1,64}$")
    # /dev/shm for NCCL (Docker's 64 MB default has crashed it).
    shm_size: str = field("2g", expected=SHM, pattern=r"^(?:[0-9]{1,6}[bkmg]?|host)$")
    # Times Docker restarts a failed container (restart: on-failure:N).
    restart_retries: StrictIntT = field(2, expected="an integer 0–10", ge=0, le=10)


class HostEntry(_Strict):
    # Names the host's container, folder and log: lowercase letters, digits, '-'.
    name: Name = field(..., expected="a name of lowercase letters, digits and '-', at most 40 characters")
    # IP address or DNS name (or a ~/.ssh/config Host alias) the other hosts reach it at.
    address: str = field(..., expected="an IP address or host name", min_length=1, max_length=253)
    # The chief (worker 0) writes results; default: the first host.
    chief: bool = field(False, expected="true or false", strict=True)
    ssh_user: Optional[str] = field(None, expected=USER, pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    ssh_port: Optional[Port] = field(None, expected=PORT)
    identity_file: Optional[LocalPath] = field(None, expected="a path to a private key file")
    tf_port: Optional[Port] = field(None, expected=PORT)
    workdir: Optional[RemotePath] = field(None, expected=WORKDIR)
    gpus: Optional[Gpus] = field(None, expected=GPUS)
    data_dir: Optional[RemotePath] = field(None, expected=WORKDIR.replace("absolute path", "absolute path of a folder"))
    nic: Optional[str] = field(None, expected=NIC, pattern=r"^[A-Za-z0-9^=_.,:-]{1,64}$")
    shm_size: Optional[str] = field(None, expected=SHM, pattern=r"^(?:[0-9]{1,6}[bkmg]?|host)$")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
            return value
        except ValueError:
            if HOSTNAME_RE.match(value):
                return value
        raise ValueError("an IP address or host name")


EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]


class RunSpec(_Strict):
    # Your own MultiWorkerMirroredStrategy program, instead of the built-in model search.
    # The command, as an argv list, run in code_dir (mounted at /workspace) in every container.
    command: List[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] = field(
        ..., expected="a non-empty list of arguments, like [python, train.py]", min_length=1, max_length=256)
    # Local folder with your code; baked into an image layer on top of `image`.
    code_dir: LocalPath = field(..., expected="a folder with your code")
    # A requirements file inside code_dir, installed when the image is built (not at every start).
    requirements: Optional[str] = field(None, expected="a file name inside code_dir, like requirements.txt",
                                        pattern=r"^[A-Za-z0-9._/-]+$", max_length=255)
    # Extra environment variables for the program.
    env: dict[EnvName, str] = field({}, expected="a mapping of NAME: value")
    # Where the program writes what `collect` brings back from the chief.
    results_dir: RemotePath = field("/results", expected=WORKDIR)
    # The launcher stops everything when a host's TensorFlow port is not open this long after the start.
    join_timeout_s: float = field(300.0, expected="a number of seconds 1–86400", ge=1, le=86400)
    # The launcher stops everything when the chief has not finished this long after the start.
    deadline_s: float = field(86400.0, expected="a number of seconds 1–2592000", ge=1, le=2_592_000)


class Inventory(_Strict):
    # Names compose projects, containers and folders: lowercase letters, digits, '-', ≤ 40.
    cluster: Name = field(..., expected="a name of lowercase letters, digits and '-', at most 40 characters")
    # The trainer image every host runs.
    image: str = field("tfcompose-trainer:latest", expected="a Docker image reference like tfcompose-trainer:latest",
                       pattern=IMAGE_RE, max_length=255)
    # What `ship` and `build` build the image on.
    base_image: str = field("tensorflow/tensorflow:latest-gpu", expected="a Docker image reference",
                            pattern=IMAGE_RE, max_length=255)
    # ship: build here, copy to hosts lacking it; pull: docker pull on each host; build: build on each host.
    image_mode: Literal["ship", "pull", "build"] = field("ship", expected="'ship', 'pull' or 'build'")
    ssh: SSHSettings = field(SSHSettings(), expected="a mapping")
    defaults: Defaults = field(Defaults(), expected="a mapping")
    # The trainer's configuration (see README: the trainer).
    train: Optional[TrainConfig] = field(None, expected="a mapping of trainer settings")
    # Or your own MWMS program instead of the trainer (exactly one of train and run).
    run: Optional[RunSpec] = field(None, expected="a mapping with command and code_dir")
    hosts: List[HostEntry] = field(..., expected="a list of 1–256 hosts", min_length=1, max_length=256)

    @property
    def training(self) -> TrainConfig:
        """The built-in trainer's settings (defaults when the inventory has neither train nor run)."""
        return self.train or TrainConfig()


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

    @property
    def tf_address(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.tf_port}"


@dataclass(frozen=True)
class Cluster:
    path: Path
    spec: Inventory
    hosts: tuple[Host, ...]   # chief first, then inventory order

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


# --- loading ----------------------------------------------------------------------------------

def load(path: str | os.PathLike, environ: dict[str, str] | None = None) -> Cluster:
    """Read, validate and resolve an inventory; raises InventoryError with every problem."""
    path = Path(path)
    environ = dict(os.environ if environ is None else environ)
    root, data = _parse(path)
    where = _Locator(path, root)
    data, env_problems = _expand_env(data, environ)
    if env_problems:
        raise InventoryError([p.line(where(p.loc)) for p in env_problems])
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: (top level): Received {type(data).__name__ if data is not None else 'an empty file'}. "
                             "Expected a mapping with cluster, hosts and the other inventory keys.")
    # Names and chiefs are checked on the raw data too, so they are reported with field errors.
    lines = [p.line(where(p.loc)) for p in _name_and_chief_checks(data.get("hosts"))]
    try:
        spec = validate(Inventory, data, str(path), locate=where)
    except InvalidInput as exc:
        raise InventoryError(_by_position(lines + exc.lines)) from None
    cluster = _resolve(path, spec, environ)
    lines += [p.line(where(p.loc)) for p in _cross_checks(cluster)]
    if lines:
        raise InventoryError(_by_position(lines))
    return cluster


def _by_position(lines: list[str]) -> list[str]:
    def key(line: str):
        m = re.match(r"^.*?:(\d+):(\d+): ", line)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return sorted(dict.fromkeys(lines), key=key)


def _parse(path: Path):
    try:
        text = read_utf8(path, "the inventory")
    except InvalidInput as exc:
        raise InventoryError(exc.lines) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        duplicates = list(_duplicate_keys(root)) if root is not None else []
        if duplicates:
            raise InventoryError([f"{path}:{n.start_mark.line + 1}:{n.start_mark.column + 1}: {key}: "
                                  f"Received a second {n.value!r}. Expected each key once." for key, n in duplicates])
        data = yaml.SafeLoader("").construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        raise InventoryError(yaml_problem(exc, str(path))) from None
    return root, data


def _duplicate_keys(node, path=""):
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                yield (f"{path}.{name}" if path else name), key
            seen.add(name)
            yield from _duplicate_keys(value, f"{path}.{name}" if path else name)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, f"{path}[{i}]")


class _Locator:
    """file:line:col of a field path, from the YAML node tree."""

    def __init__(self, path: Path, root):
        self.path, self.root = path, root

    def __call__(self, loc: tuple) -> str:
        node, mark = self.root, getattr(self.root, "start_mark", None)
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                hit = next(((k, v) for k, v in node.value if k.value == part), None)
                if hit is None:
                    break
                mark, node = hit[0].start_mark, hit[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                mark = node.start_mark
            else:
                break
        return f"{self.path}:{mark.line + 1}:{mark.column + 1}" if mark else str(self.path)


def _expand_env(data: Any, environ: dict[str, str], loc: tuple = ()) -> tuple[Any, list[Problem]]:
    """Replace ${NAME} and ${NAME:-default} in every string; unset names are problems."""
    if isinstance(data, dict):
        out, problems = {}, []
        for key, value in data.items():
            out[key], found = _expand_env(value, environ, loc + (key,))
            problems += found
        return out, problems
    if isinstance(data, list):
        pairs = [_expand_env(v, environ, loc + (i,)) for i, v in enumerate(data)]
        return [v for v, _ in pairs], [p for _, found in pairs for p in found]
    if not isinstance(data, str) or "${" not in data:
        return data, []
    missing = [m.group(1) for m in ENV_REF.finditer(data) if m.group(1) not in environ and m.group(2) is None]
    if missing:
        return data, [Problem(loc, f"Received {data!r}", f"the environment variable {missing[0]} to be set")]
    return ENV_REF.sub(lambda m: environ.get(m.group(1), m.group(2) or ""), data), []


def _local_path(value: str, base: Path) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else (base / path).resolve()


def _ssh_config(spec: Inventory, base: Path) -> paramiko.SSHConfig:
    path = _local_path(spec.ssh.config_file, base)
    return paramiko.SSHConfig.from_path(str(path)) if path.is_file() else paramiko.SSHConfig()


def _resolve(path: Path, spec: Inventory, environ: dict[str, str]) -> Cluster:
    base, ssh_cfg, d = path.resolve().parent, _ssh_config(spec, path.resolve().parent), spec.defaults
    ordered = sorted(enumerate(spec.hosts), key=lambda ih: not _is_chief(spec, ih[0]))
    hosts = []
    for index, (pos, entry) in enumerate(ordered):
        alias = ssh_cfg.lookup(entry.address)
        explicit_ssh = spec.ssh.model_fields_set
        identity = entry.identity_file or (spec.ssh.identity_file if "identity_file" in explicit_ssh else None) \
            or next(iter(alias.get("identityfile", [])), None)
        workdir = (entry.workdir or d.workdir).rstrip("/") or "/"
        hosts.append(Host(
            name=entry.name, address=alias.get("hostname", entry.address),
            ssh_user=entry.ssh_user or (spec.ssh.user if spec.ssh.user else None) or alias.get("user") or _local_user(environ),
            ssh_port=entry.ssh_port or (spec.ssh.port if "port" in explicit_ssh else None) or int(alias.get("port", spec.ssh.port)),
            identity_file=_local_path(identity, base) if identity else None,
            tf_port=entry.tf_port or d.tf_port, workdir=workdir,
            gpus=entry.gpus if entry.gpus is not None else d.gpus,
            data_dir=entry.data_dir or d.data_dir, nic=entry.nic or d.nic, shm_size=entry.shm_size or d.shm_size,
            chief=index == 0, index=index, bundle_dir=f"{workdir.rstrip('/')}/{spec.cluster}"))
    return Cluster(path, spec, tuple(hosts))


def _is_chief(spec: Inventory, pos: int) -> bool:
    marked = [i for i, h in enumerate(spec.hosts) if h.chief]
    return pos == (marked[0] if marked else 0)


def _local_user(environ: dict[str, str]) -> str:
    return environ.get("USER") or getpass.getuser()


def _host_loc(cluster: Cluster, host: Host, key: str) -> tuple:
    pos = next(i for i, e in enumerate(cluster.spec.hosts) if e.name == host.name)
    return ("hosts", pos, key)


def _name_and_chief_checks(hosts: Any) -> list[Problem]:
    if not isinstance(hosts, list):
        return []
    entries = [(i, h) for i, h in enumerate(hosts) if isinstance(h, dict)]
    problems = []
    chiefs = [i for i, h in entries if h.get("chief") is True]
    for i in chiefs[1:]:
        problems.append(Problem(("hosts", i, "chief"), f"Received a second chief (hosts[{chiefs[0]}] is one)",
                                "exactly one host with chief: true, or none (the first host is then the chief)"))
    seen: dict[str, int] = {}
    for i, entry in entries:
        name = entry.get("name")
        if isinstance(name, str) and name in seen:
            problems.append(Problem(("hosts", i, "name"), f"Received {name!r} again (hosts[{seen[name]}])",
                                    "each host name once"))
        if isinstance(name, str):
            seen.setdefault(name, i)
    return problems


def _cross_checks(cluster: Cluster) -> list[Problem]:
    problems, seen_ports = [], {}
    for host in cluster.hosts:
        loc = _host_loc(cluster, host, "tf_port")
        if host.tf_address in seen_ports:
            problems.append(Problem(loc, f"Received {host.tf_address} again (host {seen_ports[host.tf_address]})",
                                    "each address:tf_port once: two containers cannot share a port"))
        seen_ports.setdefault(host.tf_address, host.name)
    problems += _loopback_checks(cluster) + _file_checks(cluster) + _run_checks(cluster) + _parallel_checks(cluster)
    return problems


def code_dir(cluster: Cluster) -> Optional[Path]:
    run = cluster.spec.run
    return _local_path(run.code_dir, cluster.path.resolve().parent) if run else None


def _parallel_checks(cluster: Cluster) -> list[Problem]:
    from trainer.trials import expand
    train = cluster.spec.train
    if train is None or train.search.mode != "parallel":
        return []
    count = len(expand(train, only=False))
    if count < len(cluster.hosts):
        return [Problem(("train", "search", "mode"), f"Received 'parallel' with {count} trial(s) for {len(cluster.hosts)} hosts",
                        "at least one trial per host (add candidates, learning_rates or batch sizes)")]
    return []


def _run_checks(cluster: Cluster) -> list[Problem]:
    spec = cluster.spec
    if spec.run is None:
        return []
    if spec.train is not None:
        return [Problem(("run",), "Received both train and run", "exactly one of them: the built-in trainer "
                        "(train) or your own program (run)")]
    problems, folder = [], code_dir(cluster)
    if not folder.is_dir():
        problems.append(Problem(("run", "code_dir"), f"Received {str(folder)!r}", "an existing folder with your code"))
    elif spec.run.requirements and not (folder / spec.run.requirements).is_file():
        problems.append(Problem(("run", "requirements"), f"Received {spec.run.requirements!r}", f"a file inside {folder}"))
    if spec.image_mode != "ship":
        problems.append(Problem(("image_mode",), f"Received {spec.image_mode!r} with run",
                                "'ship': your code is baked into an image layer built on this machine"))
    return problems


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def _loopback_checks(cluster: Cluster) -> list[Problem]:
    # 'localhost' in TF_CONFIG across machines is a classic mistake (tensorflow#57372).
    loopback = [h for h in cluster.hosts if _is_loopback(h.address)]
    if not loopback or len(loopback) == len(cluster.hosts):
        return []
    return [Problem(_host_loc(cluster, h, "address"), f"Received {h.address!r}",
                    "an address the other hosts can reach: loopback works only when every host is this machine")
            for h in loopback]


def _file_checks(cluster: Cluster) -> list[Problem]:
    problems = []
    for host in cluster.hosts:
        if host.identity_file and not host.identity_file.is_file():
            entry = next(e for e in cluster.spec.hosts if e.name == host.name)
            loc = _host_loc(cluster, host, "identity_file") if entry.identity_file else ("ssh", "identity_file")
            problems.append(Problem(loc, f"Received {str(host.identity_file)!r}", "an existing private key file"))
        if cluster.spec.train and cluster.spec.train.dataset.kind == "image_folder" and not host.data_dir:
            loc = _host_loc(cluster, host, "data_dir")
            problems.append(Problem(loc, "Missing", "defaults.data_dir or this host's data_dir (mounted at /data) "
                                    "when train.dataset.kind is image_folder"))
    unique = {p.loc: p for p in problems}
    return list(unique.values())
