"""Render compose files from the templates in compose/templates/ (jinja2).

The container definition lives once, in `service.yaml.j2`; the simulation's root compose.yaml
and every cluster host's compose.yaml are renderings of it. Output is byte-stable.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import jinja2
import yaml

from launcher import inventory
from trainer import trials

REPO = Path(__file__).resolve().parent.parent
TEMPLATES = REPO / "compose" / "templates"
TF_PORT = 2222
STOP_GRACE = "5s"


@dataclass(frozen=True)
class GpuRequest:
    count: Optional[str | int] = None          # "all" or a number
    device_ids: Optional[tuple[str, ...]] = None


@dataclass(frozen=True)
class ServiceSpec:
    """Everything the template needs for one trainer container."""

    name: str
    image: str
    command: list[str] | str    # a string is split by compose (and may hold ${VAR} defaults)
    environment: dict[str, str]
    volumes: list[str]
    labels: dict[str, str]
    hostname: Optional[str] = None
    build: Optional[dict] = None
    network_mode: Optional[str] = None
    cpus: Optional[str] = None
    gpus: Optional[GpuRequest] = None
    shm_size: Optional[str] = None
    ipc: Optional[str] = None
    nccl_ulimits: bool = False
    stop_grace_period: str = STOP_GRACE
    restart: str = "no"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=False, autoescape=False)
    # Compact, key-order-preserving JSON: valid YAML scalars and flow sequences.
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "ensure_ascii": False}
    return env


def tf_config(workers: list[str], index: int) -> str:
    """TF_CONFIG with every training task as a `worker`; worker 0 is the chief."""
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}},
                      separators=(", ", ": "))


# --- the simulation -------------------------------------------------------------------------

SIM_SETTINGS = {  # environment variable a user sets → the trainer field it overrides
    "EPOCHS": "EPOCHS", "CANDIDATES": "CANDIDATES", "BATCH_PER_REPLICA": "BATCH_PER_REPLICA",
    "LEARNING_RATE": "LEARNING_RATE", "IMAGE_SIZE": "DATASET__IMAGE_SIZE", "JOIN_TIMEOUT_S": "JOIN_TIMEOUT_S",
    "TRAIN_DIR": "DATASET__TRAIN_DIR", "VAL_DIR": "DATASET__VAL_DIR",
}
SIM_SERVICES = ("chief", "worker")


def simulation_services() -> list[ServiceSpec]:
    workers = [f"{name}:{TF_PORT}" for name in SIM_SERVICES]
    specs = []
    for index, name in enumerate(SIM_SERVICES):
        env = {"TF_CONFIG": tf_config(workers, index), "TFC_TASK_TYPE": "worker", "TFC_TASK_INDEX": str(index),
               "TFC_NUM_WORKERS": str(len(SIM_SERVICES)), "TFC_IS_CHIEF": "1" if index == 0 else "0",
               "TFC_CHIEF_ADDR": workers[0], "TFC_RESULTS_DIR": "/runs/local", "TFC_RUN_ID": "local",
               "TFC_CLUSTER": "local", "TFC_HOST": name, "TFC_EXPECT_GPUS": "0",
               # image_folder when DATA_DIR is set, else the config file's synthetic kind
               "TFC_TRAIN_DATASET__KIND": "${DATA_DIR:+image_folder}"}
        env.update({f"TFC_TRAIN_{field}": f"${{{var}:-}}" for var, field in SIM_SETTINGS.items()})
        specs.append(ServiceSpec(
            name=name, hostname=name, image="${TFC_IMAGE:-tfcompose-trainer:latest}",
            build={"context": ".", "base_image": "${BASE_IMAGE:-tensorflow/tensorflow:latest}"},
            # RUN_COMMAND (with RUN_DIR mounted at /workspace) runs your own script instead.
            command="${RUN_COMMAND:-python3 -m trainer --config /config/train.yaml}",
            environment=env,
            volumes=["${TRAIN_CONFIG:-./compose/simulation-train.yaml}:/config/train.yaml:ro",
                     "${DATA_DIR:-tfcompose-nodata}:/data:ro", "${RUN_DIR:-./compose/no-user-code}:/workspace:ro",
                     "./runs:/runs"],
            labels={"tfcompose.cluster": "local", "tfcompose.host": name, "tfcompose.run": "local"},
            cpus="1.0"))
    return specs


def render_simulation() -> str:
    return environment().get_template("simulation.yaml.j2").render(project="tfcompose-sim",
                                                                  services=simulation_services())


# --- a cluster host ---------------------------------------------------------------------------

def run_id(cluster) -> str:
    """A content hash of the inventory (and of `run:` code): the same inventory is the same run."""
    doc = {"spec": cluster.spec.model_dump(mode="json"), "code": code_hash(cluster),
           "hosts": [vars(h) | {"identity_file": None} for h in cluster.hosts]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:12]


def code_hash(cluster) -> str:
    """Hash of every file under run.code_dir (names and bytes); empty without `run:`."""
    folder = inventory.code_dir(cluster)
    if folder is None or not folder.is_dir():
        return ""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def container_image(cluster) -> str:
    """The image the containers run: `image`, or with `run:` the code layer built on top of it."""
    if cluster.spec.run is None:
        return cluster.spec.image
    repo = cluster.spec.image.rsplit(":", 1)[0] if ":" in cluster.spec.image.rsplit("/", 1)[-1] else cluster.spec.image
    return f"{repo}:run-{code_hash(cluster)[:12]}"


def parallel(cluster) -> bool:
    return cluster.spec.run is None and cluster.spec.training.search.mode == "parallel"


def placement(cluster) -> dict[str, list[str]]:
    """search.mode parallel: which trials each host trains (balanced by parameters × images)."""
    cfg = cluster.spec.training
    channels = 1 if cfg.dataset.color_mode == "grayscale" else 3
    classes = cfg.dataset.classes if cfg.dataset.kind == "synthetic" else 2  # the head barely matters
    return trials.place(trials.expand(cfg, only=False), [h.name for h in cluster.hosts], cfg, channels, classes)


def train_config(cluster, host=None):
    """The trainer's config on a host: the inventory's, the backup in its own mount, and in
    parallel mode only that host's share of the trials."""
    cfg = cluster.spec.training
    update = {} if cfg.backup_dir else {"backup_dir": "/backup"}
    if host is not None and parallel(cluster):
        update["search"] = cfg.search.model_copy(update={"only": placement(cluster)[host.name]})
    return cfg.model_copy(update=update) if update else cfg


def task_environment(cluster, host, run: str, results_dir: str) -> dict[str, str]:
    """TF_CONFIG and plain variables a script can use without parsing JSON (like SkyPilot's)."""
    return {"TF_CONFIG": tf_config([h.tf_address for h in cluster.hosts], host.index),
            "TFC_TASK_TYPE": "worker", "TFC_TASK_INDEX": str(host.index), "TFC_NUM_WORKERS": str(len(cluster.hosts)),
            "TFC_IS_CHIEF": "1" if host.chief else "0", "TFC_CHIEF_ADDR": cluster.chief.tf_address,
            "TFC_RESULTS_DIR": results_dir, "TFC_RUN_ID": run, "TFC_CLUSTER": cluster.name, "TFC_HOST": host.name}


def gpu_request(gpus) -> Optional[GpuRequest]:
    if gpus == 0:
        return None
    if isinstance(gpus, list):
        return GpuRequest(device_ids=tuple(str(g) for g in gpus))
    return GpuRequest(count=gpus)


def expect_gpus(gpus) -> str:
    return ",".join(map(str, gpus)) if isinstance(gpus, list) else str(gpus)


def host_service(cluster, host, run: str) -> ServiceSpec:
    user = cluster.spec.run
    results_dir = user.results_dir if user else train_config(cluster).results_dir
    config = "/config/run.yaml" if user else "/config/train.yaml"
    env = {**task_environment(cluster, host, run, results_dir), "TFC_EXPECT_GPUS": expect_gpus(host.gpus),
           "TFC_OWNER_OF": config}
    if parallel(cluster):  # every host trains alone: no shared cluster
        del env["TF_CONFIG"]
    if host.nic:
        env["NCCL_SOCKET_IFNAME"] = host.nic
    volumes = [f"./{config.rsplit('/', 1)[1]}:{config}:ro"]
    if host.data_dir:
        volumes.append(f"{host.data_dir}:/data:ro")
    volumes.append(f"./results:{results_dir}")
    if user:
        env.update(user.env)
        command = list(user.command)
    else:
        volumes.append(f"./backup:{train_config(cluster).backup_dir}")
        command = ["python3", "-m", "trainer", "--config", config]
    retries = cluster.spec.defaults.restart_retries
    return ServiceSpec(
        name=host.name, image=container_image(cluster), command=command,
        environment=env, volumes=volumes,
        labels={"tfcompose.cluster": cluster.name, "tfcompose.host": host.name, "tfcompose.run": run},
        network_mode="host", gpus=gpu_request(host.gpus),
        shm_size=None if host.shm_size == "host" else host.shm_size, ipc="host" if host.shm_size == "host" else None,
        nccl_ulimits=host.gpus != 0, restart=f"on-failure:{retries}" if retries else "no")


def render_host(cluster, host, run: str | None = None) -> dict[str, str]:
    """The files of one host's bundle, name → text."""
    run = run or run_id(cluster)
    spec = host_service(cluster, host, run)
    compose = environment().get_template("host.yaml.j2").render(
        cluster=cluster.name, host=host, workers=len(cluster.hosts), service=spec)
    tf_conf = (json.dumps(json.loads(spec.environment["TF_CONFIG"]), indent=2) + "\n" if "TF_CONFIG" in spec.environment
               else '{"note": "search.mode parallel: this host trains its own trials alone, with no TF_CONFIG"}\n')
    dotenv = (f"# Lets `docker compose ps|logs` work in this folder. No secrets here.\n"
              f"COMPOSE_PROJECT_NAME={cluster.name}\n")
    if cluster.spec.run:
        config_name, config = "run.yaml", ("# Your program on this host (from the inventory's `run:` section).\n"
                                           + yaml.safe_dump(cluster.spec.run.model_dump(mode="json"), sort_keys=False))
    else:
        config_name, config = "train.yaml", ("# The trainer's configuration on this host (from the inventory's `train:` section).\n"
                                             + yaml.safe_dump(train_config(cluster, host).model_dump(mode="json"), sort_keys=False))
    return {"compose.yaml": compose, "tf_config.json": tf_conf, config_name: config, ".env": dotenv}


def render_cluster(cluster) -> dict[str, dict[str, str]]:
    run = run_id(cluster)
    return {host.name: render_host(cluster, host, run) for host in cluster.hosts}


def write_bundles(cluster, out_dir: Path) -> list[Path]:
    """Write build/<cluster>/<host>/{compose.yaml, tf_config.json, train.yaml, .env}."""
    written = []
    for host, files in render_cluster(cluster).items():
        folder = Path(out_dir) / cluster.name / host
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
            written.append(folder / name)
    return written


def main() -> None:
    """`python -m launcher.render` rewrites the simulation's root compose.yaml."""
    (REPO / "compose.yaml").write_text(render_simulation())


if __name__ == "__main__":
    main()
