"""Runs: which run an `up` starts or resumes, where each run lives on a host, and the run's keys.

**A run is a unit.** Everything a run writes on a host lives under `<workdir>/<cluster>/runs/<run>/`
(`results/`, `backup/`, the queue's key, the `finished` mark), so a second run on the same hosts
never sees the first one's results, backups, study, progress or TensorBoard files, and `collect`
brings back only its own. The bundle's `.tfcompose-run` names the host's current run and the
configuration it runs (the content hash of inventory, code, image and data: `plan.config_id`).

**Which run** (`choose`, pure): the chief's current run goes on when it runs this very
configuration and has not finished — still running (`up` restarts nothing) or stopped before its
end (a chief that died, a `down` mid-run: `up` resumes it from its backups); anything else — a
finished run, a changed configuration, `up --new-run` — is a new run with a new id, so a collected
run is never overwritten. Ids sort by time: `20261125-140233-3f2a1b2c` (when, and the configuration).

**The queue's keys.** A parallel search's queue takes calls only from the run's hosts, each proving
its name with a key made for that run from a secret of this machine's (`~/.local/state/tfcompose/
queue-secret`, mode 600): the chief gets the run's key, every other host its own (trainer/spec/keys.py).
"""
from __future__ import annotations

import datetime as dt
import os
import re
import secrets
from dataclasses import dataclass
from typing import Optional

from launcher.files import state_root, write_atomic
from launcher.host_facts import HostFacts
from trainer.spec.keys import host_key, run_key

RUN_FILE = ".tfcompose-run"
FINISHED = "finished"
KEY_FILE = "queue.key"
RUN_ID_RE = re.compile(r"^(?:\d{8}-\d{6}-[0-9a-f]{8}|[0-9a-f]{12}|local)$")
CONFIG_RE = re.compile(r"^[0-9a-f]{12}$")


@dataclass(frozen=True)
class HostRun:
    """What a host says of its current run (preflight's probe); every field checked."""
    run: str = ""            # "" : none yet
    config: str = ""
    finished: bool = False   # its results or the launcher's mark say it ended well
    running: bool = False    # a container of it runs (or Docker is restarting one)


def host_run(facts: HostFacts) -> HostRun:
    """The probe's `run*` facts, as a HostRun; what is not what tfcompose writes is no run."""
    run, config = facts.run, facts.run_config
    if not RUN_ID_RE.match(run) or not CONFIG_RE.match(config):
        return HostRun()
    state = facts.run_state
    finished = facts.run_finished or state.startswith("Exited (0)")
    return HostRun(run, config, finished, state.startswith(("Up", "Restarting")))


def new_run_id(config: str, now: Optional[dt.datetime] = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{config[:8]}"


def choose(config: str, chief: HostRun, new_run: bool = False, now: Optional[dt.datetime] = None) -> tuple[str, str]:
    """(the run id, what `up` does with it: `running`, `resumed` or `new`)."""
    if chief.run and chief.config == config and not new_run and RUN_ID_RE.match(chief.run):
        if chief.running:
            return chief.run, "running"
        if not chief.finished:
            return chief.run, "resumed"
    run = new_run_id(config, now)
    if run == chief.run:        # the same configuration again within the same second
        run = new_run_id(config, (now or dt.datetime.now(dt.timezone.utc)) + dt.timedelta(seconds=1))
    return run, "new"


def run_file_text(run: str, config: str) -> str:
    return f"run={run}\nconfig={config}\n"


def run_dir(bundle_dir: str, run: str) -> str:
    """Where a run lives on a host."""
    return f"{bundle_dir}/runs/{run}"


# --- the queue's keys ------------------------------------------------------------------------------

def launcher_secret() -> bytes:
    """This machine's own secret (made once, mode 600): every run's keys are made from it."""
    path = state_root() / "queue-secret"
    try:
        text = path.read_text(encoding="ascii").strip()
        if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
            return bytes.fromhex(text)
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret = secrets.token_bytes(32)
    write_atomic(path, secret.hex().encode() + b"\n", mode=0o600)
    os.chmod(path, 0o600)
    return secret


def queue_keys(cluster, run: str) -> dict[str, str]:
    """Each host's key file text for the run: the run's key on the chief, its own elsewhere."""
    key = run_key(launcher_secret(), cluster.name, run)
    return {h.name: (key if h.chief else host_key(key, h.name)).hex() + "\n" for h in cluster.hosts}
