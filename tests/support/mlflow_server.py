"""A real `mlflow server` on loopback for the tracking tests: its SQLite store and its artifacts in
the test's folder; stopped (killed, to play a tracker that dies) and started again on the same port
and store. MLflow's telemetry is off: it sends nothing anywhere."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from support.common import free_ports


class MlflowServer:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.port = free_ports(1)[0]
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, seconds: float = 180) -> "MlflowServer":
        # No job runner (its workers are for GenAI jobs): a lighter server on a shared machine.
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
               "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        log = open(self.folder / "server.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
             "--artifacts-destination", str(self.folder / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError("mlflow server exited:\n" + (self.folder / "server.log").read_text()[-3000:])
            if self.healthy():
                return self
            time.sleep(0.5)
        raise AssertionError("mlflow server did not answer:\n" + (self.folder / "server.log").read_text()[-3000:])

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    def kill(self) -> None:
        """The tracker dies at once (SIGKILL to its whole process group), as a crashed server would."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def client(self):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        from mlflow import MlflowClient
        return MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
