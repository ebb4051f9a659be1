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
    return out
