"""`tfcompose tensorboard` through a real sshd host and Docker engine: the live run's scalars on a
port of this machine; nothing left on the host after Ctrl-C, after the launcher is killed (kill -9)
or falls silent (stopped: no heartbeat, the SSH connection still open); a TensorBoard whose keeper
is gone removed by the next start and by `down`; a collected run served from this machine."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from launcher.stages.tensorboard import SILENCE_S
from support.cluster import TRAIN, cli, up_wait, wait_for_log
from support.common import REPO

pytestmark = pytest.mark.integration

# One host, one trial, epochs enough to still be training when the test is done with it (about 10
# epochs a second here; `down` ends it).
LONG = {**TRAIN, "candidates": ["small_cnn"], "epochs": 20000}


class Served:
    """`tfcompose tensorboard …` in a child process, its stdout read as it comes."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "launcher", "tensorboard", *args],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")), daemon=True).start()

    def url(self, seconds: float = 150) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if "http://127.0.0.1:" in line:
                    return line.split(": ", 1)[1].split()[0]
            assert self.proc.poll() is None, (self.lines, self.proc.stderr.read())
            time.sleep(0.2)
        raise AssertionError(f"no URL within {seconds} s: {self.lines}")

    def end(self, sig: int, seconds: float = 60) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        code = self.proc.wait(seconds)
        time.sleep(0.2)                       # the reader thread takes the last lines
        return code, "".join(self.lines), self.proc.stderr.read()


def scalar_tags(url: str, seconds: float = 90) -> dict:
    """TensorBoard's scalars, run → tags, once a run with an epoch's accuracy is there."""
    deadline = time.monotonic() + seconds
    while True:
        with urllib.request.urlopen(url + "data/plugin/scalars/tags", timeout=20) as answer:
            tags = json.loads(answer.read())
        if any("epoch_accuracy" in run_tags for run_tags in tags.values()) or time.monotonic() > deadline:
            return tags
        time.sleep(2)


def training(cluster: str) -> bool:
    return bool(subprocess.run(["docker", "ps", "-q", "--filter", f"label=tfcompose.cluster={cluster}",
                                "--filter", "status=running"], capture_output=True, text=True).stdout.split())


def boards(cluster: str) -> list[str]:
    """The cluster's TensorBoard containers on this machine's engine (every sshd host's), any state."""
    return subprocess.run(["docker", "ps", "-aq", "--filter", f"label=tfcompose.tensorboard={cluster}"],
                          capture_output=True, text=True).stdout.split()


def keepers(cluster: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"tfcompose-tensorboard {cluster} "], capture_output=True, text=True).stdout.split()


def gone_within(cluster: str, seconds: float) -> float:
    started = time.monotonic()
    while boards(cluster) or keepers(cluster):
        assert time.monotonic() - started < seconds, (boards(cluster), keepers(cluster))
        time.sleep(0.5)
    return time.monotonic() - started


def orphan(cluster: str, image: str) -> str:
    """A TensorBoard container whose keeper is gone (its keeper killed on the host, say)."""
    return subprocess.run(["docker", "run", "-d", "--label", f"tfcompose.tensorboard={cluster}", "--label", "tfcompose.host=h0",
                           "--label", "tfcompose.keeper=tfcompose-tb-" + "0" * 16, "--entrypoint", "sleep", image, "600"],
                          capture_output=True, text=True, check=True).stdout.strip()


def refused(url: str) -> bool:
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


def test_the_live_runs_scalars_through_ssh_and_nothing_left_on_the_host_however_it_ends(cluster_env, capsys,
                                                                                      trainer_image):
    name, inv, _ = cluster_env(n=1, train=LONG)
    assert cli(capsys, "up", "-i", str(inv))[0] == 0
    assert wait_for_log(capsys, inv, "h0", "epoch 2/", seconds=180)
    left_before = orphan(name, trainer_image)
    serve_until_ctrl_c(name, str(inv), left_before)

    killed = Served("-i", str(inv), "--port", "0")
    killed.url()
    killed.end(signal.SIGKILL)                                 # no clean-up of its own: the SSH session ends
    assert gone_within(name, 15) < 15

    frozen = Served("-i", str(inv), "--port", "0")
    frozen.url()
    frozen.proc.send_signal(signal.SIGSTOP)                    # silent, its connection still open: a lost network
    try:
        assert gone_within(name, SILENCE_S + 20) > SILENCE_S - 10
    finally:
        frozen.proc.kill()
        frozen.proc.wait()

    orphan(name, trainer_image)
    code, out, _ = cli(capsys, "down", "-i", str(inv))
    assert code == 0 and "and 1 TensorBoard" in out and boards(name) == []


def serve_until_ctrl_c(name: str, inv: str, left_before: str) -> None:
    """The scalars while it trains; the orphan removed at the start; nothing left after Ctrl-C."""
    served = Served("-i", inv, "--port", "0")
    url = served.url()
    tags = scalar_tags(url)
    assert any("small_cnn" in run and "epoch_accuracy" in run_tags for run, run_tags in tags.items()), tags
    assert training(name)
    assert not any(left_before.startswith(c) for c in boards(name))      # the orphan went: its keeper was gone
    assert len(boards(name)) == 1 and keepers(name)
    code, out, err = served.end(signal.SIGINT)                 # Ctrl-C
    assert code == 0 and "stopped TensorBoard on h0; nothing left running there" in out, (out, err)
    assert boards(name) == [] and keepers(name) == [] and refused(url)


def test_a_collected_run_is_served_from_this_machine(cluster_env, capsys, tmp_path):
    name, inv, _ = cluster_env(n=1, train={**TRAIN, "candidates": ["small_cnn"], "epochs": 2})
    _, latest = up_wait(capsys, inv, name, tmp_path / "runs")
    served = Served(str(latest), "--port", "0")
    tags = scalar_tags(served.url())
    assert any("small_cnn" in run and "epoch_accuracy" in run_tags for run, run_tags in tags.items()), tags
    code, out, err = served.end(signal.SIGINT)
    assert code == 0 and "stopped TensorBoard" in out and refused(served.url()), (out, err)

    killed = Served(str(latest), "--port", "0")
    url = killed.url()
    killed.end(signal.SIGKILL)                 # its TensorBoard child sees its stdin close
    deadline = time.monotonic() + 15
    while not refused(url):
        assert time.monotonic() < deadline, "TensorBoard outlived the launcher"
        time.sleep(0.5)
    assert cli(capsys, "down", "-i", str(inv))[0] == 0
