"""A second, empty Docker engine on its own socket: a "remote host" that lacks every image. Used
by the tests (conftest.second_engine) and the benchmarks.

It shares the kernel and network namespace (host networking works across both engines) but not
images or containers, so shipping an image to it is real work."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterable


class SecondEngine:
    def __init__(self, root: Path, bridge: str = ""):
        self.root, self.sock = root, f"unix://{root}/docker.sock"
        # Its own bridge: with --bridge=none, dockerd deletes the default docker0 the first
        # engine uses (measured). The bridge gets a link-local /30 and carries no traffic.
        self.bridge = bridge or f"tfc-e2-{os.getpid() % 100000}"
        self.env = {**os.environ, "DOCKER_HOST": self.sock}
        self.proc = None

    def start(self) -> "SecondEngine":
        if os.environ.get("TFC_TEST_RUN"):       # the run's ledger names it: a killed run's is stopped
            from support import rigs
            rigs.note("engine", root=str(self.root), bridge=self.bridge)
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", "169.254.77.1/30", "dev", self.bridge], check=True)
        log = open(self.root / "dockerd.log", "w")
        r = self.root
        self.proc = subprocess.Popen(["dockerd", "--data-root", f"{r}/data", "--exec-root", f"{r}/exec",
                                      "--pidfile", f"{r}/docker.pid", "-H", self.sock, f"--bridge={self.bridge}",
                                      "--iptables=false", "--ip6tables=false", "--ip-masq=false"],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # Generous: on a machine busy with the other lane, dockerd's own containerd takes its time.
        for _ in range(240):
            if subprocess.run(["docker", "info"], env=self.env, capture_output=True).returncode == 0:
                return self
            assert self.proc.poll() is None, (self.root / "dockerd.log").read_text()[-2000:]
            time.sleep(0.5)
        raise RuntimeError(f"the second dockerd did not answer within 120 s: {(self.root / 'dockerd.log').read_text()[-2000:]}")

    def stop(self) -> None:
        ids = subprocess.run(["docker", "ps", "-aq"], env=self.env, capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], env=self.env, capture_output=True)
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        # dockerd leaves its netns bind mount (exec/netns/default) mounted: unmount before deleting.
        leftovers = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                     if line.split()[1].startswith(str(self.root))]
        for mount in sorted(leftovers, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def empty(self) -> None:
        empty_engine(self.sock)


def empty_engine(sock: str) -> None:
    """Remove every container and image of an engine: a host that has nothing yet."""
    env = {**os.environ, "DOCKER_HOST": sock}
    ids = subprocess.run(["docker", "ps", "-aq"], env=env, capture_output=True, text=True).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], env=env, capture_output=True)
    subprocess.run(["docker", "image", "prune", "-af"], env=env, capture_output=True, check=True)


def make_template(folder: Path, archive: Iterable[bytes]) -> Path:
    """A Docker data root holding an image, made once per run: a dockerd of its own (in a network
    namespace of its own: it runs with --bridge=none) loads `archive` (what `docker load` reads),
    then stops. Lab engines start from a copy of it (`seed`) instead of each loading 3 GB."""
    ns = f"tfcT{os.getpid() % 100000}"
    if os.environ.get("TFC_TEST_RUN"):
        from support import rigs
        rigs.note("netns", name=ns)
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    sock = f"unix://{folder}/docker.sock"
    env = {**os.environ, "DOCKER_HOST": sock}
    log = open(folder / "dockerd.log", "w")
    proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "dockerd", "--data-root", f"{folder}/data",
                             "--exec-root", f"{folder}/exec", "--pidfile", f"{folder}/docker.pid", "-H", sock,
                             "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(240):
            if subprocess.run(["docker", "info"], env=env, capture_output=True).returncode == 0:
                break
            assert proc.poll() is None, (folder / "dockerd.log").read_text()[-2000:]
            time.sleep(0.5)
        load = subprocess.Popen(["docker", "load", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        for chunk in archive:
            load.stdin.write(chunk)
        out, err = load.communicate()
        if load.returncode != 0:
            raise RuntimeError(f"the engine template could not load the image: {err.decode(errors='replace')[-2000:]}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        for mount in sorted((line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                             if line.split()[1].startswith(str(folder))), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return folder / "data"


def seed(template: Path, data_root: Path) -> None:
    """An engine's data root that starts with the template's images: the image layers hard-linked
    (read-only to every engine: a container writes to its own layer above them, and removing an
    image in one engine unlinks only that engine's names), the image metadata copied."""
    data_root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(template / "overlay2"), str(data_root / "overlay2")], check=True)
    subprocess.run(["cp", "-a", str(template / "image"), str(data_root / "image")], check=True)
