"""Paths, the CI rule for tools that are missing, free ports, trainer processes and Docker checks:
what the tests share (fixtures live in conftest.py)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "tests" / "fixtures"
DATA = REPO / "tests" / "data"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, why: str) -> None:
    """Skip an integration test whose tool is missing — but fail in CI, where .ci/run provides it."""
    if condition:
        return
    import pytest   # here: bench/lanlab.py uses this module's helpers in a venv without pytest
    if IN_CI:
        pytest.fail(f"{why} (CI must provide it: see .ci/run)")
    pytest.skip(why)


# Ports the tests listen on come from below the kernel's ephemeral range (32768–60999 here), where
# no outgoing connection (the suite's many SSH sessions) can take one between its pick and its use,
# and each lane has a range of its own, so two lanes never pick the same port.
PORTS_FROM, PORTS_PER_LANE, LANES = 12000, 5000, 4


def free_ports(n: int) -> list[int]:
    """n distinct ports free on every address now, from this lane's range."""
    import random
    lane = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % LANES
    low = PORTS_FROM + lane * PORTS_PER_LANE
    picked: list[int] = []
    while len(picked) < n:
        port = random.randrange(low, low + PORTS_PER_LANE)
        if port not in picked and _bindable(port):
            picked.append(port)
    return picked


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def tf_config(addresses: list[str], index: int, job: str = "worker") -> str:
    return json.dumps({"cluster": {job: addresses}, "task": {"type": job, "index": index}})


class TrainerProcs:
    """Trainer processes in their own process groups; all SIGKILLed at the end (MWMS ignores SIGTERM)."""

    def __init__(self, tmp: Path):
        self.tmp, self.procs = tmp, []

    def start(self, args: list[str], tf_config_json: str | None = None, name: str = "trainer", extra_env=None):
        env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and not k.startswith("TFC_")}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(FIXTURES)])
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        if tf_config_json:
            env["TF_CONFIG"] = tf_config_json
        env.update(extra_env or {})
        log = open(self.tmp / f"{name}.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "trainer", *args], stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=self.tmp, start_new_session=True)
        proc.log_path = self.tmp / f"{name}.log"
        self.procs.append(proc)
        return proc

    def kill_all(self):
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


# The TensorFlow image the tests build the trainer on: TFC_TEST_BASE_IMAGE, else BASE_IMAGE (as
# `make image` takes it), else the offline base when this machine has one (CI builds it: no registry
# there), else Docker Hub's, pulled once: a clone and Docker Hub are enough for `make test`.
OFFLINE_BASE, HUB_BASE = "tf-offline-base:cpu", "tensorflow/tensorflow:latest"


def pick_base_image(environ: dict, have_image) -> str:
    """Which base image: the first of TFC_TEST_BASE_IMAGE, BASE_IMAGE, the offline base if
    `have_image(name)` says it is here, and Docker Hub's tensorflow/tensorflow:latest."""
    chosen = environ.get("TFC_TEST_BASE_IMAGE", "").strip() or environ.get("BASE_IMAGE", "").strip()
    if chosen:
        return chosen
    return OFFLINE_BASE if have_image(OFFLINE_BASE) else HUB_BASE


def have_image(name: str) -> bool:
    try:
        return subprocess.run(["docker", "image", "inspect", name], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_base: list[str] = []


def base_image() -> str:
    """The base image for this session (asked of Docker once)."""
    if not _base:
        _base.append(pick_base_image(os.environ, have_image))
    return _base[0]


def ensure_base_image() -> str:
    """The base image, pulled when it is not here yet (a registry image: Docker Hub's by default)."""
    base = base_image()
    if not have_image(base):
        pulled = subprocess.run(["docker", "pull", base], capture_output=True, text=True, timeout=3600)
        require(pulled.returncode == 0, f"base image {base} is not here and could not be pulled "
                f"({(pulled.stderr or pulled.stdout).strip()[-300:]}); set TFC_TEST_BASE_IMAGE to a TensorFlow image "
                "this machine has")
    return base
# A checkout of its own (a git worktree) can build its own tag: two test runs never share one.
TEST_IMAGE = os.environ.get("TFC_TEST_IMAGE", "tfcompose-trainer:test")


def docker_ok() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def compose_leftovers(project: str) -> list[str]:
    """Containers and networks Docker still holds for a compose project."""
    found = []
    for kind in ("ps -a", "network ls"):
        out = subprocess.run(["docker", *kind.split(), "-q", "--filter", f"label=com.docker.compose.project={project}"],
                             capture_output=True, text=True).stdout.split()
        found += [f"{kind.split()[0]}:{x}" for x in out]
    return found
