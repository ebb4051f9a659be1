"""What the cluster integration tests share: the default small search, the CLI called in-process,
the containers a cluster left, and waiting for a line in a host's log (the `cluster_env` fixture
that makes sshd hosts and an inventory lives in conftest.py)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from launcher.cli import main

TRAIN = {"dataset": {"kind": "synthetic", "image_size": [32, 32], "per_class": 32},
         "candidates": ["small_cnn", "deep_cnn"], "epochs": 2, "batch_per_replica": 16, "join_timeout_s": 90}


def labelled(cluster: str, engine: str | None = None) -> list[str]:
    """Containers (the cluster's and its TensorBoards) and networks labelled with the cluster on
    this machine's engine (or another)."""
    env = {**os.environ, **({"DOCKER_HOST": engine} if engine else {})}
    out = [cid for label in ("tfcompose.cluster", "tfcompose.tensorboard")
           for cid in subprocess.run(["docker", "ps", "-aq", "--filter", f"label={label}={cluster}"],
                                     capture_output=True, text=True, env=env).stdout.split()]
    nets = subprocess.run(["docker", "network", "ls", "-q", "--filter", f"label=com.docker.compose.project={cluster}"],
                          capture_output=True, text=True, env=env).stdout.split()
    return out + nets


def docker_here(*args: str) -> subprocess.CompletedProcess:
    """`docker <args>` on this machine's engine (the sshd hosts' containers run there)."""
    return subprocess.run(["docker", *args], capture_output=True, text=True)


def throttle_at_start(docker, cluster: str, host: str, up: "CliProcess", cpus: str = "0.3",
                      seconds: float = 300) -> None:
    """The host's container held to `cpus` as soon as it exists; `docker(*args)` runs docker on the
    engine it runs in (docker_here, or a lab host's own)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and up.proc.poll() is None:
        ids = docker("ps", "-q", "--filter", f"label=tfcompose.cluster={cluster}",
                     "--filter", f"label=tfcompose.host={host}").stdout.split()
        if ids and docker("update", "--cpus", cpus, *ids).returncode == 0:
            return
        time.sleep(0.2)


def wait_for_log(capsys, inv: Path, host: str, text: str, seconds: float = 60) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        code, out, _ = cli(capsys, "logs", "-i", str(inv), "--no-follow", "--host", host)
        if text in out:
            return True
        time.sleep(1)
    return False


def run_results(bundle: Path):
    """The results folder of the run a host's bundle names (launcher/runs.py), or None before it has one."""
    try:
        text = (Path(bundle) / ".tfcompose-run").read_text()
    except OSError:
        return None
    run = next((line[4:] for line in text.splitlines() if line.startswith("run=")), "")
    return Path(bundle) / "runs" / run / "results" if run else None


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def up_wait(capsys, inv, cluster: str, runs) -> tuple[str, object]:
    """`up --wait` run to its end, which must succeed: what it printed and the run's folder."""
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code == 0, out + err
    return out, runs / cluster / "latest"


class CliProcess:
    """`tfcompose ARGS` in a child process, off a terminal (as in CI and under nohup): its output
    lines (stdout and stderr) collected as they come, for a command that runs while the test acts."""

    def __init__(self, *args: str, prelude: str = ""):
        """`prelude`: Python run first in that process (a test's stand-in, e.g. a slow clock)."""
        import sys
        import threading
        from support.common import REPO
        self.proc = subprocess.Popen([sys.executable, "-c", prelude + "\nfrom launcher.cli import run; run()", *args],
                                     cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.times: list[float] = []              # when each line came (time.monotonic())

        def read() -> None:
            for line in iter(self.proc.stdout.readline, ""):
                self.times.append(time.monotonic())
                self.lines.append(line)
        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()

    def wait_for(self, pattern: str, seconds: float = 60) -> str:
        """The first line matching the regular expression, waiting for it."""
        import re
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            found = next((line for line in list(self.lines) if re.search(pattern, line)), None)
            if found is not None:
                return found
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r} in:\n{self.output}")

    def time_of(self, line: str) -> float:
        """When that line came (time.monotonic())."""
        return self.times[self.lines.index(line)]

    def finish(self, seconds: float = 120) -> int:
        try:
            code = self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"still running after {seconds:g} s; it said:\n{self.output[-6000:]}") from None
        self._reader.join(10)
        return code

    @property
    def output(self) -> str:
        return "".join(self.lines)
