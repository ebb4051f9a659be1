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


BASE_IMAGE = os.environ.get("TFC_TEST_BASE_IMAGE", "tf-offline-base:cpu")
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
