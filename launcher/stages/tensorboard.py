"""TensorBoard while it trains: a host's TensorBoard folder served on a port of this machine
through the SSH connection tfcompose holds; or a collected run's, served from this machine.

Live: TensorBoard runs on the host next to the cluster's container, from the very image that
container runs (it has tensorboard: the trainer's HParams summaries need it), over the host's
results folder mounted read-only, listening on the host's loopback only. Nothing is opened on the
host's network: this machine's 127.0.0.1:<port> is carried there over direct-tcpip channels
(ssh/tunnel.py). It lives exactly as long as this process holds it (docker_commands'
TENSORBOARD_KEEPER): Ctrl-C closes the keeper's stdin and the keeper removes the container; this
process killed (kill -9) ends the SSH session, which closes it too; the network lost leaves the
keeper without its heartbeat, and after SILENCE_S it does the same (this process, hearing no
answer to its heartbeat as long, gives up on the host too). What outlives all of that
(the keeper itself killed on the host) is an orphan: the next `tfcompose tensorboard` on that host
removes it, and `tfcompose down` removes every one.

Which host, which folder and which image: tensorboard_source.py.

Collected: the tensorboard installed beside tfcompose (the `tensorboard` extra) in a child
process that ends when its stdin closes, so it goes with this process however that ends.
"""
from __future__ import annotations

import importlib.util
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from launcher import docker_commands as dc
from launcher.errors import BadInput, RemoteError, TfcError, summary
from launcher.inventory.model import Cluster, Host
from launcher.plan import make
from launcher.stages.tensorboard_source import collected_logdir, image_of, logdir, pick_host
from launcher.text import one_line, printable

HEARTBEAT_S = 5.0     # how often the launcher tells the keeper it is still there
SILENCE_S = 30        # the keeper removes TensorBoard after this long without a heartbeat (network lost)
START_S = 90          # TensorBoard's own start (it imports TensorFlow: seconds on a busy host)
STOP_S = 30.0         # the keeper's clean-up after Ctrl-C (its `docker rm -f` is bounded by 20 s)
OUTPUT_KEPT = 16 << 10
ACK = b"\x06"          # the keeper's answer to each heartbeat
URL_RE = re.compile(r"url=http://127\.0\.0\.1:([0-9]{1,5})/")
NOT_INSTALLED = ("TensorBoard is not installed beside tfcompose ({python}): pip install 'tfcompose[tensorboard]' "
                 "(or pip install tensorboard into that environment)")


@dataclass
class Served:
    """What was served (`what`, at `url`) and how it ended."""
    what: str
    url: str = ""
    message: str = ""
    failed: bool = False


OnReady = Callable[[Served], None]


def listen(port: int) -> socket.socket:
    """A listening socket on this machine's loopback (port 0: one the kernel picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(16)
    except OSError as exc:
        sock.close()
        raise BadInput(f"--port: Received {port}, which is in use on this machine ({exc.strerror or exc}). "
                       "Expected a free port (--port 0 picks one).") from None
    return sock


class KeeperOutput:
    """What the keeper prints, read as hostile: bounded, and only `url=` with a real port believed."""

    def __init__(self):
        self.text = bytearray()
        self.port: Optional[int] = None
        self.ready = threading.Event()

    def feed(self, chunk: bytes) -> None:
        chunk = chunk.replace(ACK, b"")         # the keeper's answers to the heartbeat: Held heard them
        self.text.extend(chunk[:max(0, OUTPUT_KEPT - len(self.text))])
        if self.port is None:
            for line in self.lines():
                found = URL_RE.fullmatch(line)
                if found and 0 < int(found[1]) < 65536:
                    self.port = int(found[1])
                    self.ready.set()

    def lines(self) -> list[str]:
        return [line.strip() for line in printable(self.text.decode("utf-8", "replace")).splitlines() if line.strip()]

    @property
    def removed(self) -> bool:
        return "removed" in self.lines()

    def why(self, status: Optional[int], error: Optional[BaseException], stderr: bytes) -> str:
        """Why the keeper ended, in one line."""
        if error is not None:
            return summary(error)
        lines = [line for line in self.lines() if line not in ("removed", "not removed") and not line.startswith("url=")]
        said = lines[-1] if len(lines) > 1 else ""
        if lines and lines[0] == "slow":
            return one_line(f"it did not answer within {START_S} s" + (f"; it said: {said}" if said else ""))
        if lines and lines[0] == "ended":
            return one_line("its container stopped" + (f"; it said: {said}" if said else ""))
        if lines and lines[0] == "gone":
            return "its container was removed (by `tfcompose down`?)"
        err = printable(bytes(stderr).decode("utf-8", "replace")).strip().splitlines()
        return one_line(f"`docker run` failed: {err[-1] if err else f'status {status}'}" if status == 3
                        else f"it ended with status {status}" + (f": {err[-1]}" if err else ""))


# --- live: TensorBoard on a host, through SSH ----------------------------------------------------
def serve_live(cluster: Cluster, host_name: Optional[str], port: int, on_ready: OnReady) -> Served:
    """Serve the host's TensorBoard folder on 127.0.0.1:`port` until Ctrl-C (returns) or until
    TensorBoard ends by itself (returns failed); nothing is left running on the host either way."""
    from launcher.ssh.group import connect
    host = pick_host(cluster, host_name, lambda: make(cluster).parallel)
    listener = listen(port)
    try:
        with connect(cluster, host) as conn:
            return _serve(cluster, host, conn, listener, on_ready)
    finally:
        listener.close()


def _serve(cluster: Cluster, host: Host, conn, listener: socket.socket, on_ready: OnReady) -> Served:
    from launcher.containers import current_run, newest_container, run_label
    from launcher.ssh.tunnel import Forward, Held
    newest = newest_container(conn, cluster.name, host.name)
    image = image_of(newest, host.name)
    run = current_run(conn, host) or run_label(newest)
    if not run:
        raise RemoteError(host.name, reason=f"no run of cluster {cluster.name} here (run `tfcompose up` first)")
    conn.run(dc.remove_tensorboards(cluster.name, host.name, "orphans"))
    tag = dc.KEEPER_PREFIX + secrets.token_hex(8)
    said = KeeperOutput()
    held = Held(conn, dc.tensorboard_keeper(cluster.name, host.name, tag, image, f"{host.bundle_dir}/runs/{run}/results",
                                            logdir(cluster), START_S, SILENCE_S), HEARTBEAT_S, said.feed).start()
    served, forward = Served(f"cluster {cluster.name} ({host.name})"), None
    try:
        forward = Forward(conn, listener, _wait_ready(host, held, said))
        forward.check()
        forward.start()
        served.url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        on_ready(served)
        served.failed, served.message = True, f"{host.name}: " + _serving(held, said)
    except KeyboardInterrupt:
        served.message = f"stopped TensorBoard on {host.name}"
    finally:
        if forward is not None:
            forward.close()
        left = _stop(conn, held, said, cluster, host, tag)
    if left:
        served.failed, served.message = True, f"{served.message}; {left}"
    else:
        served.message += "; nothing left running there"
    return served


def _wait_ready(host: Host, held, said: KeeperOutput) -> int:
    """TensorBoard's port on the host once it answers; RemoteError if the keeper ends first."""
    deadline = time.monotonic() + START_S + 15
    while not said.ready.wait(0.2):
        if held.ended.is_set() and not said.ready.is_set():
            raise RemoteError(host.name, reason="TensorBoard did not start: " + said.why(held.status, held.error, held.stderr))
        if time.monotonic() > deadline:
            raise RemoteError(host.name, reason=f"TensorBoard did not answer within {START_S} s")
    return said.port


def _serving(held, said: KeeperOutput) -> str:
    """Wait (until Ctrl-C) while TensorBoard serves; why it stopped by itself, if it does."""
    while not held.ended.wait(0.2):           # in short waits: Ctrl-C is heard
        if time.monotonic() - held.last_heard > SILENCE_S:
            return f"lost: no word from it for {SILENCE_S} s"
    return "TensorBoard ended: " + said.why(held.status, held.error, held.stderr)


def _stop(conn, held, said: KeeperOutput, cluster: Cluster, host: Host, tag: str) -> str:
    """Release the keeper, which removes TensorBoard; if it cannot say it did, remove it by its
    tag; a host lost is not waited for (its keeper removes TensorBoard by itself, in silence).
    Returns what may be left ("" for nothing)."""
    lost = said.ready.is_set() and time.monotonic() - held.last_heard > SILENCE_S
    if held.release(2.0 if lost else STOP_S) and said.removed:
        return ""
    if lost:
        return (f"TensorBoard there removes itself within {SILENCE_S} s of silence, and `tfcompose down` "
                "removes it")
    try:
        conn.run(dc.remove_tensorboards(cluster.name, host.name, tag), timeout=STOP_S)
        return ""
    except TfcError as exc:
        return (f"TensorBoard may still run on {host.name} ({summary(exc)}): it removes itself within "
                f"{SILENCE_S} s without this process, and `tfcompose down` removes it")


# --- collected: TensorBoard on this machine ------------------------------------------------------
# The child: TensorBoard in this Python, ended when its stdin closes (this process ended, however).
CHILD = ("import os, sys, threading\n"
         "threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()\n"
         "from tensorboard.main import run_main\n"
         "sys.argv = ['tensorboard', *sys.argv[1:]]\n"
         "run_main()\n")


def serve_collected(run_dir: Path, host: Optional[str], port: int, on_ready: OnReady) -> Served:
    """Serve a collected run's TensorBoard folder on 127.0.0.1:`port` until Ctrl-C."""
    folder = collected_logdir(Path(run_dir), host)
    if importlib.util.find_spec("tensorboard") is None:
        raise TfcError(NOT_INSTALLED.format(python=sys.executable))
    listener = listen(port)              # refused now if busy; TensorBoard binds it a moment later
    port = listener.getsockname()[1]
    listener.close()
    served = Served(str(run_dir), url=f"http://127.0.0.1:{port}/")
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen([sys.executable, "-c", CHILD, "--logdir", str(folder), "--host", "127.0.0.1",
                                  "--port", str(port)], stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_local(child, port, log)
            on_ready(served)
            while child.poll() is None:
                time.sleep(0.2)
            served.failed, served.message = True, f"TensorBoard ended: {_tail(log)}"
        except KeyboardInterrupt:
            served.message = "stopped TensorBoard"
        finally:
            _end(child)
    return served


def _wait_local(child: subprocess.Popen, port: int, log) -> None:
    deadline = time.monotonic() + START_S
    while True:
        if child.poll() is not None:
            raise TfcError(f"TensorBoard did not start: {_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TfcError(f"TensorBoard did not answer on 127.0.0.1:{port} within {START_S} s") from None
            time.sleep(0.2)


def _tail(log) -> str:
    log.seek(0)
    lines = [line for line in log.read()[-4096:].decode("utf-8", "replace").splitlines() if line.strip()]
    return one_line(lines[-1] if lines else "no output")


def _end(child: subprocess.Popen) -> None:
    """Close its stdin (it exits at once), then TERM, then KILL: a few seconds at most."""
    for step in (child.stdin.close, child.terminate, child.kill):
        try:
            step()
            child.wait(3)
            return
        except (subprocess.TimeoutExpired, OSError):
            continue
