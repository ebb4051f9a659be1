"""Join watchdog: name the peers that never arrived, then end the blocked trainer.

MultiWorkerMirroredStrategy's constructor blocks inside TensorFlow *holding the GIL* while it
waits for peers (measured: a Python watchdog thread never got to run), for up to an hour. So:
- a helper process (`python -m trainer.cluster.watchdog`, no TensorFlow) waits for the deadline, probes
  every peer's address and prints one line naming those that never joined;
- `faulthandler.dump_traceback_later(exit=True)`, a C thread that needs no GIL, ends the trainer
  with exit code 1 a moment later.
Closing the helper's stdin (cluster formed) stops both.
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import select
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

PROBE_SECONDS = 1.0
GRACE_SECONDS = 3.0  # after the deadline: time for the helper to probe and print


def probe(address: str, timeout: float = PROBE_SECONDS) -> str:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return "listening"
    except OSError as exc:
        return (exc.strerror or type(exc).__name__).lower()


def wait_until_gone(address: str, limit_s: float = 30.0, every_s: float = 0.2) -> bool:
    """Whether the task at `address` stopped listening within `limit_s`. A worker that ends before
    its chief makes `docker compose up --exit-code-from chief` stop the chief mid-exit (code 143),
    so the others leave once the chief has; bounded, since a chief may linger on its own work."""
    import time
    deadline = time.monotonic() + limit_s
    while probe(address, timeout=every_s) == "listening":
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def verdict(task: str, timeout_s: float, peers: list[tuple[str, str]]) -> str:
    with ThreadPoolExecutor(max(1, len(peers))) as pool:
        states = dict(zip((n for n, _ in peers), pool.map(probe, (a for _, a in peers))))
    missing = [f"{name} at {addr} ({states[name]})" for name, addr in peers if states[name] != "listening"]
    if missing:
        detail = "never joined: " + ", ".join(missing)
    else:
        detail = "every peer is listening but the cluster did not form (check that TF_CONFIG is the same on every host)"
    return f"tfcompose trainer: [{task}] cluster did not form within {timeout_s:g} s: {detail}."


class JoinWatchdog:
    """Context manager around the strategy's constructor."""

    def __init__(self, task: str, peers: list[tuple[str, str]], timeout_s: float):
        self.task, self.peers, self.timeout_s = task, peers, timeout_s

    def __enter__(self):
        self._sink = open(os.devnull, "w")  # faulthandler's thread dump is not for users
        faulthandler.dump_traceback_later(self.timeout_s + GRACE_SECONDS, exit=True, file=self._sink)
        self._helper = subprocess.Popen(
            [sys.executable, "-m", "trainer.cluster.watchdog", "--task", self.task,
             "--timeout", str(self.timeout_s), "--peers", json.dumps(self.peers)],
            stdin=subprocess.PIPE, start_new_session=False)
        return self

    def __exit__(self, *exc):
        faulthandler.cancel_dump_traceback_later()
        self._helper.stdin.close()  # EOF: the cluster formed, or we are unwinding anyway
        try:
            self._helper.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._helper.kill()
        self._sink.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.cluster.watchdog")
    p.add_argument("--task", required=True)
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--peers", required=True, help="JSON list of [task name, host:port]")
    args = p.parse_args(argv)
    ready, _, _ = select.select([sys.stdin], [], [], args.timeout)
    if ready:  # EOF (or anything) from the trainer: the cluster formed
        return 0
    print(verdict(args.task, args.timeout, [tuple(x) for x in json.loads(args.peers)]), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
