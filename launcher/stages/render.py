"""Render: the plan's facts into files, through the templates in compose/templates/ (jinja2).

The container definition lives once, in `service.yaml.j2`; the simulation's root compose.yaml
and every cluster host's compose.yaml are renderings of it. Output is byte-stable. Nothing here
decides anything: what to render comes from the Plan (plan.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.files import REPO, write_atomic, write_folder
from launcher.plan import QUEUE_KEY_IN_CONTAINER, Plan, expect_gpus
from launcher.runs import KEY_FILE, RUN_FILE, run_file_text

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


def environment():
    import jinja2
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


def literal(value: str) -> str:
    """A value compose must pass on byte for byte: compose interpolates `$`, `$$` is a literal `$`."""
    return value.replace("$", "$$")


def host_service(plan: Plan, host) -> ServiceSpec:
    cluster, user = plan.cluster, plan.cluster.spec.run
    results_dir = user.results_dir if user else plan.train_config().results_dir
    config = "/config/run.yaml" if user else "/config/train.yaml"
    gpus = plan.gpus(host)
    env = {**task_environment(cluster, host, plan.run, results_dir), "TFC_EXPECT_GPUS": expect_gpus(gpus),
           "TFC_OWNER_OF": config}
    if plan.parallel:  # every host trains alone: no shared cluster
        del env["TF_CONFIG"]
    if plan.nic(host):
        env["NCCL_SOCKET_IFNAME"] = plan.nic(host)
    if cluster.tracking is not None and not user:   # the best model also in MLflow's format (trainer/train/mlflow_model.py)
        env["TFC_MLFLOW_MODEL"] = "1"
    volumes = [f"./{config.rsplit('/', 1)[1]}:{config}:ro"]
    if host.data_dir:
        volumes.append(f"{host.data_dir}:/data:ro")
    run = f"./runs/{plan.run}"              # each run its own folders (launcher/runs.py)
    volumes.append(f"{run}/results:{results_dir}")
    if user:
        env.update(user.env)
        command = list(user.command)
    else:
        volumes.append(f"{run}/backup:{plan.train_config().backup_dir}")
        command = ["python3", "-m", "trainer", "--config", config]
    if plan.parallel:                       # the queue's key for this run and host, never in a rendered file
        volumes.append(f"{run}/{KEY_FILE}:{QUEUE_KEY_IN_CONTAINER}:ro")
    retries = cluster.spec.defaults.restart_retries
    return ServiceSpec(
        name=host.name, image=plan.container_image, command=[literal(c) for c in command],
        environment={k: literal(v) for k, v in env.items()}, volumes=[literal(v) for v in volumes],
        labels={"tfcompose.cluster": cluster.name, "tfcompose.host": host.name, "tfcompose.run": plan.run,
                "tfcompose.config": plan.config_id},
        network_mode="host", gpus=gpu_request(gpus),
        shm_size=None if host.shm_size == "host" else host.shm_size, ipc="host" if host.shm_size == "host" else None,
        nccl_ulimits=gpus != 0, restart=f"on-failure:{retries}" if retries else "no")


def render_host(plan: Plan, host) -> dict[str, str]:
    """The files of one host's bundle, name → text."""
    import yaml
    cluster, spec = plan.cluster, host_service(plan, host)
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
        train = plan.train_config(host).model_dump(mode="json", exclude={"elastic"} if plan.elastic is None else None)
        config_name, config = "train.yaml", ("# The trainer's configuration on this host (from the inventory's `train:` section).\n"
                                             + yaml.safe_dump(train, sort_keys=False))
    return {"compose.yaml": compose, "tf_config.json": tf_conf, config_name: config, ".env": dotenv,
            RUN_FILE: run_file_text(plan.run, plan.config_id)}


def render_cluster(plan: Plan) -> dict[str, dict[str, str]]:
    return {host.name: render_host(plan, host) for host in plan.cluster.hosts}


def write_bundles(plan: Plan, out_dir: Path) -> list[Path]:
    """Write build/<cluster>/<host>/{compose.yaml, tf_config.json, train.yaml, .env}."""
    return [path for host, files in render_cluster(plan).items()
            for path in write_folder(Path(out_dir) / plan.cluster.name / host, files, out_dir)]


def main() -> None:
    """`python -m launcher.stages.render` rewrites the simulation's root compose.yaml."""
    (REPO / "compose.yaml").write_text(render_simulation())


if __name__ == "__main__":
    main()
