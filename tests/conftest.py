"""Shared fixtures: free ports, trainer processes started and killed the MWMS-safe way."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DATA = Path(__file__).resolve().parent / "data"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, why: str) -> None:
    """Skip an integration test whose tool is missing — but fail in CI, where .ci/run provides it."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{why} (CI must provide it: see .ci/run)")
    pytest.skip(why)


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


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


@pytest.fixture
def trainers(tmp_path):
    procs = TrainerProcs(tmp_path)
    yield procs
    procs.kill_all()


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """A generated OASIS-layout dataset: train/ and val/ with 4 class folders of 32×32 PNGs."""
    out = tmp_path_factory.mktemp("images")
    # In a child process: the test process itself never imports TensorFlow.
    subprocess.run([sys.executable, "-m", "trainer.synth", str(out), "--classes", "4", "--per-class", "48",
                    "--size", "32"], check=True, cwd=REPO, capture_output=True)
    for path in [out, *out.rglob("*")]:  # readable by the non-root user a container runs as
        path.chmod(0o755 if path.is_dir() else 0o644)
    return out


# --- Docker -----------------------------------------------------------------------------------
BASE_IMAGE = os.environ.get("TFC_TEST_BASE_IMAGE", "tf-offline-base:cpu")
TEST_IMAGE = "tfcompose-trainer:test"


def docker_ok() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def trainer_image() -> str:
    """The trainer image, built the way users build it (`make image`) from the offline base."""
    require(docker_ok(), "no Docker engine answers `docker info`")
    base = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True)
    require(base.returncode == 0, f"base image {BASE_IMAGE} is missing (bash ../shared/ci/build-offline-base.sh)")
    build = subprocess.run(["make", "image", f"BASE_IMAGE={BASE_IMAGE}", f"IMAGE={TEST_IMAGE}"], cwd=REPO,
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return TEST_IMAGE


def compose_leftovers(project: str) -> list[str]:
    """Containers and networks Docker still holds for a compose project."""
    found = []
    for kind in ("ps -a", "network ls"):
        out = subprocess.run(["docker", *kind.split(), "-q", "--filter", f"label=com.docker.compose.project={project}"],
                             capture_output=True, text=True).stdout.split()
        found += [f"{kind.split()[0]}:{x}" for x in out]
    return found


# --- sshd ---------------------------------------------------------------------------------------
@pytest.fixture
def sshd_farm(tmp_path):
    """Start sshd "hosts" with farm.start(name, port, tf_port); all are killed afterwards."""
    from sshd import SSHD, SshdFarm
    require(Path(SSHD).exists(), "OpenSSH's sshd is not installed (apt-get install openssh-server)")
    (tmp_path / "ssh").mkdir()
    farm = SshdFarm(tmp_path / "ssh")
    yield farm
    farm.stop()


@pytest.fixture(scope="session")
def image_cache(tmp_path_factory) -> Path:
    """One XDG cache for the session: the trainer image's layers are split and compressed once."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(scope="session")
def second_engine(tmp_path_factory):
    """A second, empty Docker engine on its own socket (tests/engine.py): a host lacking every image."""
    import shutil
    from engine import SecondEngine
    require(docker_ok(), "no Docker engine answers `docker info`")
    require(shutil.which("dockerd") is not None and shutil.which("ip") is not None and os.getuid() == 0,
            "a second dockerd needs dockerd, iproute2 and root")
    engine = SecondEngine(tmp_path_factory.mktemp("engine2")).start()
    yield engine.sock
    engine.stop()
