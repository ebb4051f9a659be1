"""The inventory's schema: every field, its default and what it expects (pydantic); the value
types the fields take, and their wording, are fields.py's.

inventory.example.yaml documents each field (a test checks it); inventory.py loads a file into
these models and resolves every host.
"""
from __future__ import annotations

import ipaddress
from typing import Annotated, List, Literal, Optional

from pydantic import StringConstraints, field_validator

from launcher.inventory.fields import (GPUS, IMAGE_RE, JUMP, LEASE_DIR, NIC, PORT, SHM, USER, USER_RE, WORKDIR,
                                       WORKDIR_OWN, Gpus, JumpChain, LocalPath, Name, PlainText, Port, RemotePath, WorkDir)
from launcher.inventory.patterns import HOSTNAME_RE  # jumps.py reads it too
from trainer.spec.config import TrainConfig
from trainer.spec.validation import StrictFloatT, StrictIntT, StrictModel as _Strict, field

class SSHSettings(_Strict):
    user: Optional[str] = field(None, expected=USER, pattern=USER_RE)
    """Login user on every host (default: ~/.ssh/config's User, else your local user name)."""
    port: Port = field(22, expected=PORT)
    """SSH port on every host."""
    identity_file: Optional[LocalPath] = field(None, expected="a path to a private key file")
    """Private key; without it, the SSH agent and ~/.ssh/config's IdentityFile are used."""
    host_key_policy: Literal["strict", "accept-new"] = field("strict", expected="'strict' or 'accept-new'")
    """strict: the host key must already be in known_hosts. accept-new: record unknown keys once."""
    known_hosts: LocalPath = field("~/.ssh/known_hosts", expected="a path to a known_hosts file")
    """Where host keys are checked (and, with accept-new, recorded)."""
    config_file: LocalPath = field("~/.ssh/config", expected="a path to an ssh_config file")
    """OpenSSH client config consulted for Host aliases (HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand)."""
    proxy_jump: Optional[JumpChain] = field(None, expected=JUMP)
    """The bastion (jump host) SSH reaches every host through, as OpenSSH's ProxyJump: [user@]host[:port], a chain as
    bastion1,bastion2; default: the ssh config's ProxyJump or ProxyCommand for the host."""
    connect_timeout_s: StrictFloatT = field(10.0, expected="a number of seconds 1–300", ge=1, le=300)
    """Seconds to wait for a host to answer."""
    command_timeout_s: StrictFloatT = field(120.0, expected="a number of seconds 2–3600", ge=2, le=3600)
    """Seconds any one remote command may take (a wedged dockerd is reported, not waited on forever)."""
    lost_after_s: StrictFloatT = field(30.0, expected="a number of seconds 5–3600", ge=5, le=3600)
    """While `up --wait` and `watch` run: a host that has not answered for this long is lost (in a parallel
    search its trial goes to another host at once; in sync mode the run stops)."""


class Defaults(_Strict):
    tf_port: Port = field(2222, expected=PORT)
    """Port of the TensorFlow gRPC server on every host (host networking)."""
    workdir: WorkDir = field("/opt/tfcompose", expected=WORKDIR_OWN)
    """Folder on each host that receives <cluster>/ with the compose bundle, results and backups."""
    gpus: Gpus = field("all", expected=GPUS)
    """GPUs for the container."""
    data_dir: Optional[RemotePath] = field(None, expected=WORKDIR.replace("absolute path", "absolute path of a folder"))
    """Image folder on each host, mounted read-only at /data."""
    nic: Optional[str] = field(None, expected=NIC, pattern=r"^[A-Za-z0-9^=_.,:-]{1,64}$")
    """NCCL_SOCKET_IFNAME: the NIC that carries cross-host traffic."""
    shm_size: str = field("2g", expected=SHM, pattern=r"^(?:[0-9]{1,6}[bkmg]?|host)$")
    """/dev/shm for NCCL (Docker's 64 MB default has crashed it)."""
    restart_retries: StrictIntT = field(2, expected="an integer 0–10", ge=0, le=10)
    """Times Docker restarts a failed container (restart: on-failure:N)."""
    lease_dir: WorkDir = field("/var/tmp/tfcompose-leases", expected=LEASE_DIR)
    """Where a host keeps its leases (which cluster holds which GPUs and ports): the same folder for everyone, root's
    and 1777 on a box several accounts use (made when absent: 1777 by root, else the user's alone); one another
    account could empty is refused."""


class HostEntry(_Strict):
    name: Name = field(..., expected="a name of lowercase letters, digits and '-', at most 40 characters")
    """Names the host's container, folder and log: lowercase letters, digits, '-'."""
    address: str = field(..., expected="an IP address or host name", min_length=1, max_length=253)
    """IP address or DNS name (or a ~/.ssh/config Host alias) the other hosts reach it at."""
    chief: bool = field(False, expected="true or false", strict=True)
    """The chief (worker 0) writes results; default: the first host."""
    ssh_user: Optional[str] = field(None, expected=USER, pattern=USER_RE)
    """This host's login user, instead of ssh.user."""
    ssh_port: Optional[Port] = field(None, expected=PORT)
    """This host's SSH port, instead of ssh.port."""
    identity_file: Optional[LocalPath] = field(None, expected="a path to a private key file")
    """This host's private key, instead of ssh.identity_file."""
    proxy_jump: Optional[JumpChain] = field(None, expected=JUMP)
    """This host's bastion(s), instead of ssh.proxy_jump; none: this host is reached directly."""
    tf_port: Optional[Port] = field(None, expected=PORT)
    """This host's TensorFlow port, instead of defaults.tf_port."""
    workdir: Optional[WorkDir] = field(None, expected=WORKDIR_OWN)
    """This host's workdir, instead of defaults.workdir."""
    gpus: Optional[Gpus] = field(None, expected=GPUS)
    """This host's GPUs, instead of defaults.gpus: 'all', a count (0: CPU only) or a list of ids."""
    data_dir: Optional[RemotePath] = field(None, expected=WORKDIR.replace("absolute path", "absolute path of a folder"))
    """This host's dataset folder, instead of defaults.data_dir."""
    nic: Optional[str] = field(None, expected=NIC, pattern=r"^[A-Za-z0-9^=_.,:-]{1,64}$")
    """This host's NIC for NCCL, instead of defaults.nic (unset: the one the route to the peers leaves by)."""
    shm_size: Optional[str] = field(None, expected=SHM, pattern=r"^(?:[0-9]{1,6}[bkmg]?|host)$")
    """This host's /dev/shm size, instead of defaults.shm_size."""
    lease_dir: Optional[WorkDir] = field(None, expected=LEASE_DIR)
    """This host's lease folder, instead of defaults.lease_dir."""

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
            if "%" not in value:  # a zone id (fe80::1%eth0) means nothing to the other hosts
                return value
        except ValueError:
            if HOSTNAME_RE.match(value):
                return value
        raise ValueError("an IP address (without a %zone) or host name")


EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]


class RunSpec(_Strict):
    """Your own MultiWorkerMirroredStrategy program, instead of the built-in model search."""
    command: List[Annotated[PlainText, StringConstraints(min_length=1)]] = field(
        ..., expected="a non-empty list of arguments, like [python, train.py]", min_length=1, max_length=256)
    """The command, as an argv list, run in code_dir (mounted at /workspace) in every container."""
    code_dir: LocalPath = field(..., expected="a folder with your code")
    """Local folder with your code; baked into an image layer on top of `image`."""
    requirements: Optional[str] = field(None, expected="a file name inside code_dir, like requirements.txt",
                                        pattern=r"^[A-Za-z0-9._/-]+$", max_length=255)
    """A requirements file inside code_dir, installed when the image is built (not at every start)."""
    env: dict[EnvName, PlainText] = field({}, expected="a mapping of NAME: value (text without control characters)")
    """Extra environment variables for the program."""
    results_dir: RemotePath = field("/results", expected=WORKDIR)
    """Where the program writes what `collect` brings back from the chief."""
    join_timeout_s: StrictFloatT = field(300.0, expected="a number of seconds 1–86400", ge=1, le=86400)
    """The launcher stops everything when a host's TensorFlow port is not open this long after the start."""
    deadline_s: StrictFloatT = field(86400.0, expected="a number of seconds 1–2592000", ge=1, le=2_592_000)
    """The launcher stops everything when the chief has not finished this long after the start."""


K8sName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")]
K8S_NAME = "a Kubernetes name: lowercase letters, digits and '-', at most 63 characters"


class KubernetesTarget(_Strict):
    namespace: Optional[K8sName] = field(None, expected=K8S_NAME)
    """`tfcompose render --target jobset`: the namespace of the JobSet and its ConfigMap."""
    results_claim: Optional[K8sName] = field(None, expected=K8S_NAME)
    """PersistentVolumeClaim (ReadWriteMany) mounted at the results folder; results come back from it."""
    data_claim: Optional[K8sName] = field(None, expected=K8S_NAME)
    """PersistentVolumeClaim holding the dataset, mounted read-only at /data (image_folder datasets)."""
    gpus_per_pod: Optional[StrictIntT] = field(None, expected="an integer 0–64", ge=0, le=64)
    """nvidia.com/gpu per pod; default: the hosts' GPU count when they all name the same number."""
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = field(
        "IfNotPresent", expected="'IfNotPresent', 'Always' or 'Never'")
    """When the cluster pulls the image (it must be in a registry the cluster can pull from)."""


class SlurmTarget(_Strict):
    runtime: Literal["apptainer", "enroot", "docker"] = field(
        "apptainer", expected="'apptainer' (or singularity), 'enroot' (pyxis) or 'docker'")
    """`tfcompose render --target slurm`: how srun runs the image on each node."""
    results_dir: Optional[RemotePath] = field(None, expected=WORKDIR)
    """A folder on the shared filesystem, mounted at the results folder on every node."""
    data_dir: Optional[RemotePath] = field(None, expected=WORKDIR)
    """The dataset on the shared filesystem, mounted read-only at /data."""
    partition: Optional[str] = field(None, expected="a Slurm partition name", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """The Slurm partition the job is submitted to (default: the cluster's default partition)."""
    time_limit: str = field("24:00:00", expected="a Slurm time such as 24:00:00 or 2-00:00:00",
                            pattern=r"^(?:\d{1,3}-)?\d{1,3}:\d{2}:\d{2}$")
    """The job's time limit (sbatch --time)."""
    gpus_per_node: Optional[StrictIntT] = field(None, expected="an integer 0–64", ge=0, le=64)
    """GPUs per node; default: the hosts' GPU count when they all name the same number."""


TRACKER_URI = ("an MLflow tracking URI such as http://mlflow.lab:5000 (https, file: and the database URIs MLflow "
               "takes work too)")


class MlflowTracking(_Strict):
    uri: Optional[str] = field(None, expected=TRACKER_URI, pattern=r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f]*$",
                               max_length=2048, secret=True)
    """The tracking server; default: the MLFLOW_TRACKING_URI environment variable. A token or password in it
    (https://user:token@host) stays on this machine: never rendered, logged or sent to a host."""
    experiment: Optional[PlainText] = field(None, expected="an experiment name (text without control characters)",
                                            min_length=1, max_length=500)
    """The experiment a search is logged in; default: MLFLOW_EXPERIMENT_NAME, else the cluster's name."""
    register_as: Optional[str] = field(None, expected="a model name of letters, digits and ._- (at most 128)",
                                       pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
    """The Model Registry name the best trial's model is registered under (a new version per run); without it the
    model is logged with the best trial's run, not registered."""
    timeout_s: StrictFloatT = field(10.0, expected="a number of seconds 1–300", ge=1, le=300)
    """Seconds any one call to the tracker may take: a tracker down or slower than this is left for later (records
    kept, sent at collect or by `tfcompose track`), never waited on by training."""


class Tracking(_Strict):
    mlflow: MlflowTracking = field(..., expected="a mapping with uri, experiment, register_as and timeout_s (each optional)")
    """MLflow: the search as one parent run, each trial one child run, the best model registered."""


class TelemetrySettings(_Strict):
    enabled: bool = field(True, expected="true or false", strict=True)
    """Sample every host's GPUs (nvidia-smi), its container's CPU and memory, its network and swap while `up --wait`
    and `watch` run: the live view, telemetry/<host>.csv, per-trial figures."""
    period_s: StrictFloatT = field(1.0, expected="a number of seconds 0.5–2", ge=0.5, le=2)
    """Seconds between samples on every host."""
    warn_after_s: StrictFloatT = field(30.0, expected="a number of seconds 10–600", ge=10, le=600)
    """How long a condition (an idle GPU, an input-bound host, a straggler) must last before a warning."""


class ElasticSettings(_Strict):
    min_hosts: StrictIntT = field(1, expected="an integer 1–256", ge=1, le=256)
    """A sync run goes on without a host lost for good while at least this many hosts remain (else it stops, its
    backups kept, and the next `up --wait` resumes it)."""
    lost_after_s: StrictFloatT = field(45.0, expected="a number of seconds 5–3600", ge=5, le=3600)
    """A host whose trainer is gone and which stays silent (or keeps failing) this long is lost for good: the others
    re-form without it, from the last backed-up epoch."""
    batch: Literal["keep_global", "keep_per_replica"] = field("keep_global", expected="'keep_global' or 'keep_per_replica'")
    """keep_global: each replica takes a larger share so the global batch, steps per epoch and schedules stay the
    same (the global batch must divide among every allowed cluster size); keep_per_replica: the global batch shrinks
    with the cluster and the learning rate scales with it."""
    rejoin: bool = field(False, expected="true or false", strict=True)
    """true: a host lost because it stopped answering is taken back once it has answered for `rejoin_after_s`, at the
    next epoch's end (it gets the chief's backups first); false: it stays out of this run, and the log says so. A host
    whose trainer failed for good stays out either way."""
    rejoin_after_s: StrictFloatT = field(60.0, expected="a number of seconds 5–3600", ge=5, le=3600)
    """How long a lost host must answer without a break before it is taken back (elastic.rejoin)."""
    max_reforms_per_hour: StrictIntT = field(6, expected="an integer 1–100", ge=1, le=100)
    """A host is taken back only while the run has re-formed fewer times than this in the last hour: a host that comes
    and goes is left out (the log says so) rather than stopping the others again and again."""


# The releases `tfcompose bootstrap` knows (launcher/bootstrap/facts.py reads them off a host).
RELEASES = ("debian-12", "ubuntu-22.04", "ubuntu-24.04")
Release = Literal["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
ImageRef = Annotated[str, StringConstraints(pattern=IMAGE_RE, max_length=255)]


class BootstrapSettings(_Strict):
    docker: Literal["distro", "docker"] = field("distro", expected="'distro' or 'docker'")
    """`tfcompose bootstrap`: where Docker Engine comes from on a host that has none. distro: the OS's own docker.io,
    with compose v2 from Ubuntu's docker-compose-v2 or, on Debian 12 (which packages none), the next Debian release's
    docker-compose; docker: Docker's apt repository (docker-ce and its compose plugin). An engine already installed is
    kept, whichever it is."""
    offline: bool = field(False, expected="true or false", strict=True)
    """true: the hosts need no network; the .deb files each host lacks are resolved and fetched on this machine and
    sent over SSH (as `tfcompose bootstrap --offline`)."""
    debs: List[LocalPath] = field([], expected="a list of folders holding .deb files", max_length=32)
    """Folders of .deb files you fetched yourself (NVIDIA's toolkit for boxes that cannot reach NVIDIA), offered to
    apt beside the archive's packages and shipped with what a host needs."""
    resolver_images: dict[Release, ImageRef] = field(
        {}, expected="a mapping of release (debian-12, ubuntu-22.04, ubuntu-24.04) to a Docker image reference")
    """offline: the image apt runs in on this machine, per release (default debian:12, ubuntu:22.04, ubuntu:24.04);
    for a machine that cannot pull them, e.g. a `docker import` of a debootstrap."""
    apt_lock_wait_s: StrictFloatT = field(300.0, expected="a number of seconds 0–3600", ge=0, le=3600)
    """How long a host's apt may wait for another apt or dpkg (unattended-upgrades) to let go of its lock."""
    install_timeout_s: StrictFloatT = field(1800.0, expected="a number of seconds 60–14400", ge=60, le=14400)
    """How long one host's installation may take in all."""


class Inventory(_Strict):
    cluster: Name = field(..., expected="a name of lowercase letters, digits and '-', at most 40 characters")
    """Names compose projects, containers and folders: lowercase letters, digits, '-', ≤ 40."""
    image: str = field("tfcompose-trainer:latest", expected="a Docker image reference like tfcompose-trainer:latest",
                       pattern=IMAGE_RE, max_length=255)
    """The trainer image every host runs."""
    base_image: str = field("tensorflow/tensorflow:latest-gpu", expected="a Docker image reference",
                            pattern=IMAGE_RE, max_length=255)
    """What `ship` and `build` build the image on."""
    image_mode: Literal["ship", "pull", "build"] = field("ship", expected="'ship', 'pull' or 'build'")
    """ship: build here, copy to hosts lacking it; pull: docker pull on each host; build: build on each host."""
    image_relay: Literal["auto", "on", "off"] = field("auto", expected="'auto', 'on' or 'off'")
    """ship to many hosts: auto sends the layers once and lets the hosts pass them on among themselves when 3 or more
    hosts lack some (on: 2 or more; off: the launcher sends to each host itself)."""
    gpus_per_host: Literal["equal", "min"] = field("equal", expected="'equal' or 'min'")
    """equal: preflight refuses hosts that would train with different GPU counts (MWMS needs the same number of
    replicas on every host); min: give every host the smallest count instead."""
    ssh: SSHSettings = field(SSHSettings(), expected="a mapping")
    """How the launcher logs into every host (SSH)."""
    defaults: Defaults = field(Defaults(), expected="a mapping")
    """Every host's settings unless the host overrides them."""
    train: Optional[TrainConfig] = field(None, expected="a mapping of trainer settings")
    """The trainer's configuration (see README: the trainer)."""
    run: Optional[RunSpec] = field(None, expected="a mapping with command and code_dir")
    """Or your own MWMS program instead of the trainer (exactly one of train and run)."""
    hosts: List[HostEntry] = field(..., expected="a list of 1–256 hosts", min_length=1, max_length=256)
    """The hosts: the first one, or the one with chief: true, is the chief (task 0)."""
    dataset_source: Optional[LocalPath] = field(None, expected="a folder on this machine with class folders of images")
    """A dataset folder on this machine (<class>/<image> inside): `up` makes every host's data_dir an exact copy of
    it, sending only what changed. Without it, data_dir is copied by hand (and `up` still checks that every host holds
    the same files)."""
    on_finish: Optional[PlainText] = field(None, expected="a shell command (text without control characters)")
    """Commands run on this machine by `up --wait` after the run is collected, with TFC_RUN_DIR, TFC_OUTCOME,
    TFC_MESSAGE, TFC_CLUSTER and TFC_RUN_ID in their environment (sh -c)."""
    on_failure: Optional[PlainText] = field(None, expected="a shell command (text without control characters)")
    """Like on_finish, for a run that failed."""
    tracking: Optional[Tracking] = field(None, expected="a mapping with mlflow: {uri, experiment, register_as}")
    """Experiment tracking on this machine's side (the hosts never reach the tracker): README "Tracking"."""
    elastic: Optional[ElasticSettings] = field(None, expected="a mapping with min_hosts, lost_after_s and batch")
    """A sync run that survives losing a host for good: the others re-form without it (docs: "Losing a host")."""
    telemetry: TelemetrySettings = field(TelemetrySettings(), expected="a mapping")
    """Hardware telemetry while the cluster trains (README: "Is the hardware busy?")."""
    bootstrap: BootstrapSettings = field(BootstrapSettings(), expected="a mapping")
    """How `tfcompose bootstrap` makes bare Debian 12 / Ubuntu 22.04, 24.04 boxes ready hosts."""
    kubernetes: Optional[KubernetesTarget] = field(None, expected="a mapping")
    """When you outgrow SSH: `tfcompose render --target jobset` writes the same cluster as a Kubernetes JobSet."""
    slurm: Optional[SlurmTarget] = field(None, expected="a mapping")
    """When you outgrow SSH: `tfcompose render --target slurm` writes the same cluster as a Slurm batch script."""

    @property
    def train_or_defaults(self) -> TrainConfig:
        """The built-in trainer's settings (defaults when the inventory has neither train nor run)."""
        return self.train or TrainConfig()
