"""Render compose files from the templates in compose/templates/ (jinja2).

The container definition lives once, in `service.yaml.j2`; the simulation's root compose.yaml
and every cluster host's compose.yaml are renderings of it. Output is byte-stable.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import jinja2

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
    command: list[str]
    environment: dict[str, str]
    volumes: list[str]
    labels: dict[str, str]
    hostname: Optional[str] = None
    build: Optional[dict] = None
    network_mode: Optional[str] = None
    cpus: Optional[str] = None
    gpus: Optional[GpuRequest] = None
    shm_size: Optional[str] = None
    nccl_ulimits: bool = False
    stop_grace_period: str = STOP_GRACE
    restart: str = "no"
    extra: dict = field(default_factory=dict)


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
        env = {"TF_CONFIG": tf_config(workers, index), "TFC_EXPECT_GPUS": "0",
               "TFC_RESULTS_DIR": "/runs/local",
               # image_folder when DATA_DIR is set, else the config file's synthetic kind
               "TFC_TRAIN_DATASET__KIND": "${DATA_DIR:+image_folder}"}
        env.update({f"TFC_TRAIN_{field}": f"${{{var}:-}}" for var, field in SIM_SETTINGS.items()})
        specs.append(ServiceSpec(
            name=name, hostname=name, image="${TFC_IMAGE:-tfcompose-trainer:latest}",
            build={"context": ".", "base_image": "${BASE_IMAGE:-tensorflow/tensorflow:latest}"},
            command=["python3", "-m", "trainer", "--config", "/config/train.yaml"],
            environment=env,
            volumes=["${TRAIN_CONFIG:-./compose/simulation-train.yaml}:/config/train.yaml:ro",
                     "${DATA_DIR:-tfcompose-nodata}:/data:ro", "./runs:/runs"],
            labels={"tfcompose.cluster": "local", "tfcompose.host": name, "tfcompose.run": "local"},
            cpus="1.0"))
    return specs


def render_simulation() -> str:
    return environment().get_template("simulation.yaml.j2").render(project="tfcompose-sim",
                                                                  services=simulation_services())


def main() -> None:
    """`python -m launcher.render` rewrites the simulation's root compose.yaml."""
    (REPO / "compose.yaml").write_text(render_simulation())


if __name__ == "__main__":
    main()
