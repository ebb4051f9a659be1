"""Leases on a box shared with another account (#37): real sshd hosts, this machine's own lease
folder under /var/tmp, and a second local account, the neighbour, acting on it as any user of the
box may (tests/support/accounts.py). What the neighbour does, it does with its own uid, through
the kernel's permission checks; what tfcompose does, it does through `tfcompose up` over SSH.

The neighbour may refuse a host to others (fill the folder, plant a folder at a lease's name): it
must never make an `up` go on holding nothing, take what another holds, or jump the queue. And
Ctrl-C pressed again and again while an `up --queue` cleans up leaves no ticket and no traceback.
"""
from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import pytest

from launcher.inventory.load import load_cluster
from launcher.plan import make
from launcher.ssh.group import Group
from launcher.leases import take as leases
from support import accounts
from support.cluster import CliProcess, cli
from support.common import free_ports
from support.sshd import write_inventory

pytestmark = pytest.mark.integration
SLOW_CLOCK = "import time\n_real = time.time\ntime.time = lambda: _real() - 3600   # this launcher's clock: an hour slow"


@pytest.fixture
def box(tmp_path):
    """A place on this machine every account reaches and writes in (pytest's folders are root's
    alone), root's and sticky as /var/tmp is (where the default lease_dir is); removed afterwards."""
    root = Path(f"/var/tmp/tfcompose-test-{os.environ.get('TFC_LAB_NET', '213')}-{uuid.uuid4().hex[:8]}")
    root.mkdir()
    root.chmod(0o1777)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def hosts(sshd_farm):
    ports = free_ports(4)
    made = [sshd_farm.start(f"h{i}", ports[2 * i], ports[2 * i + 1]) for i in range(2)]
    sshd_farm.known_hosts()
    return made


def inventory(farm, tmp_path: Path, name: str, hosts, lease_dir: Path, gpus=0) -> Path:
    """A cluster on the hosts; `gpus` other than 0 makes preflight stop it (this machine has no
    GPU): its lease is taken, then given back. No image is needed: nothing gets that far."""
    return write_inventory(farm, tmp_path / f"{name}.yaml", name, hosts, image_mode="pull",
                           defaults={"lease_dir": str(lease_dir), "gpus": gpus})


def up(capsys, inv: Path, *flags: str) -> tuple[int, str]:
    code, out, err = cli(capsys, "up", "-i", str(inv), *flags)
    assert "Traceback" not in out + err
    return code, out + err


def test_in_a_root_folder_the_neighbour_can_neither_remove_a_lease_nor_move_the_folder(
        sshd_farm, hosts, box, neighbour, tmp_path, capsys):
    # The refusals (a folder the neighbour made first, one not sticky, one inside a folder they own,
    # a folder planted at a lease's name, 600 junk lease files) are hostile cases
    # (tests/integration/test_hostile.py, `lease-…`); here, what a folder as the README asks for holds.
    folder = box / "leases"
    folder.mkdir()
    folder.chmod(0o1777)                                   # sudo install -d -o root -g root -m 1777
    holder = load_cluster(inventory(sshd_farm, tmp_path, "lsholder", hosts, folder))
    with Group(holder) as group:
        leases.take(group, make(holder))
        (lease,) = folder.glob(f"lsholder.h0.{os.getuid()}.lease")
        assert neighbour.run("rm", "-f", str(lease), check=False).returncode != 0 and lease.exists()
        assert neighbour.run("mv", str(folder), str(box / "moved"), check=False).returncode != 0 and lease.exists()
        assert neighbour.sh('echo x > "$1"', str(lease), check=False).returncode != 0
        code, said = up(capsys, inventory(sshd_farm, tmp_path, "lsother", hosts, folder, gpus=[0]))
        assert code == 1 and "in use by root's cluster lsholder" in said, said      # refused: the lease holds
        leases.release(group)
    code, said = up(capsys, inventory(sshd_farm, tmp_path, "lsother", hosts, folder, gpus=[0]))
    assert code == 1 and "gpus requested but Docker has no nvidia runtime" in said, said     # past the leases
    assert said.count("h0: connect\n") == 1 and "h0: preflight" in said      # connected once, said once
    assert not list(folder.glob(f"*.{os.getuid()}.lease"))                   # given back


def test_a_launcher_whose_clock_is_an_hour_slow_does_not_jump_the_queue(sshd_farm, hosts, box, tmp_path, capsys):
    folder = box / "leases"
    folder.mkdir()
    folder.chmod(0o1777)
    holder = load_cluster(inventory(sshd_farm, tmp_path, "lsholder", hosts, folder))
    waiters = []
    try:
        with Group(holder) as group:
            leases.take(group, make(holder))
            early = CliProcess("up", "-i", str(inventory(sshd_farm, tmp_path, "lsearly", hosts, folder, gpus=[0])),
                               "--queue")
            waiters.append(early)
            early.wait_for(r"^h0: queued ")
            late = CliProcess("up", "-i", str(inventory(sshd_farm, tmp_path, "lslate", hosts, folder, gpus=[0])),
                              "--queue", prelude=SLOW_CLOCK)
            waiters.append(late)
            late.wait_for(r"^h0: queued ")
            leases.release(group)
        first = None
        deadline = time.monotonic() + 60
        while first is None and time.monotonic() < deadline:
            found = {p.name.split(".")[0] for p in folder.glob("*.h0.*.lease")}
            first = next(iter(found), None) if len(found) == 1 else ("both" if found else None)
            time.sleep(0.02)
        assert first == "lsearly", (first, early.output, late.output)
        assert early.finish() == 1 and late.finish() == 1              # each took its turn: no GPU here
        assert "Traceback" not in early.output + late.output
        assert not list(folder.glob("*.ticket")) and not list(folder.glob("*.lease"))
    finally:
        for waiter in waiters:
            if waiter.proc.poll() is None:
                waiter.proc.kill()
                waiter.finish()


def test_ctrl_c_pressed_again_and_again_while_a_queued_up_cleans_up_leaves_nothing(
        sshd_farm, hosts, box, tmp_path, capsys):
    folder = box / "leases"
    holder = load_cluster(inventory(sshd_farm, tmp_path, "lsholder", hosts, folder))
    waiting_inv = inventory(sshd_farm, tmp_path, "lswaiting", hosts, folder)
    with Group(holder) as group:
        leases.take(group, make(holder))
        sessions = len(list(folder.glob("*.session")))           # the holder's own
        for attempt, gap in enumerate((0.02, 0.12)):
            waiting = CliProcess("up", "-i", str(waiting_inv), "--queue")
            waiting.wait_for(r"^h1: queued ")
            for _ in range(12):                       # Ctrl-C, and again while it cleans up
                if waiting.proc.poll() is not None:
                    break
                waiting.proc.send_signal(signal.SIGINT)
                time.sleep(gap)
            code = waiting.finish()
            assert "Traceback" not in waiting.output and "RuntimeError" not in waiting.output, waiting.output
            assert not list(folder.glob("*.ticket")), (attempt, waiting.output)
            assert code == 130, waiting.output
            assert eventually(lambda: len(list(folder.glob("*.session"))) == sessions)
        assert {p.name.split(".")[0] for p in folder.glob("*.lease")} == {"lsholder"}
        leases.release(group)


def eventually(condition, seconds: float = 15) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()

