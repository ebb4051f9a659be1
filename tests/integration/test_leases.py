"""Host leases and the queue on real sshd hosts and a real Docker engine: two clusters on the same
two hosts, refused, queued, side by side, stale and broken.

What is real and what is not: every `up`, `down` and `status` here is the CLI over SSH, with the
lease folder, its locks and the host script on the hosts, and the containers on Docker. This
machine has no GPU, so a cluster that *runs* is CPU-only (`gpus: 0`, an empty GPU set) and clashes
on its ports; the GPU id lists are exercised by the lease stage itself: a holder whose `up` is at
work (its lease live through its session, as during a long image shipment), and `up`s that are
refused by it or, free of it, stopped by preflight for want of a GPU, their leases given back.
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from launcher.inventory.load import load_cluster
from launcher.plan import make
from launcher.ssh.group import Group
from launcher.leases import take as leases
from support.cluster import CliProcess, cli, labelled
from support.common import free_ports
from support.sshd import write_inventory

pytestmark = pytest.mark.integration

SLEEPER = "import time\nprint('sleeping', flush=True)\ntime.sleep(900)\n"


@pytest.fixture
def two_hosts(sshd_farm, tmp_path, trainer_image):
    """Two sshd hosts and a function writing an inventory of another cluster on them: a `run:`
    program that only sleeps (its containers live, at no CPU cost), on the hosts' tf_ports or on
    `ports`, with `gpus`. Every container is removed afterwards."""
    ports = free_ports(4)
    hosts = [sshd_farm.start(f"h{i}", ports[2 * i], ports[2 * i + 1]) for i in range(2)]
    sshd_farm.known_hosts()
    code = tmp_path / "sleeper"
    code.mkdir()
    (code / "sleep.py").write_text(SLEEPER)
    made: list[str] = []

    def inventory(name: str, ports: list[int] | None = None, gpus=0) -> Path:
        made.append(name)
        on = [replace(h, tf_port=p) for h, p in zip(hosts, ports)] if ports else hosts
        run = {"command": ["python", "sleep.py"], "code_dir": str(code)}
        return write_inventory(sshd_farm, tmp_path / f"{name}.yaml", name, on, image=trainer_image, run=run,
                               defaults={"gpus": gpus})

    yield hosts, inventory, sshd_farm.root / "leases"
    for name in made:
        ids = labelled(name)
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)


def up(capsys, inv: Path, *flags: str) -> tuple[int, str]:
    code, out, err = cli(capsys, "up", "-i", str(inv), *flags)
    return code, out + err


def lease_rows(capsys, inv: Path) -> list[dict]:
    code, out, _ = cli(capsys, "status", "-i", str(inv), "--json")
    assert code == 0, out
    return [dict(lease, at=st["host"]) for st in json.loads(out) for lease in st["leases"]]


def waiting_lists(capsys, inv: Path) -> list[list[str]]:
    code, out, _ = cli(capsys, "status", "-i", str(inv), "--json")
    return [st["waiting"] for st in json.loads(out)]


def running(name: str) -> int:
    return len(subprocess.run(["docker", "ps", "-q", "--filter", f"label=tfcompose.cluster={name}"],
                              capture_output=True, text=True).stdout.split())


def test_a_cluster_on_held_ports_is_refused_naming_the_holder_then_queued_until_its_down(two_hosts, capsys):
    hosts, inventory, folder = two_hosts
    first, second = inventory("lsfirst"), inventory("lssecond")
    code, said = up(capsys, first)
    assert code == 0, said
    run = re.search(r"cluster lsfirst, run (\d{8}-\d{6}-[0-9a-f]{8})", said).group(1)

    code, said = up(capsys, second)
    assert code == 1, said
    assert "leases refused on 2 of 2 host(s); nothing was started (`up --queue` waits for them):" in said
    holder = rf"in use by \S+'s cluster lsfirst \(run {run}, from \S+\) since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+:\d\d:\d\d ago\)"
    assert re.search(rf"^  h0: {holder}: port {hosts[0].tf_port}$", said, re.M), said
    assert re.search(rf"^  h1: {holder}: port {hosts[1].tf_port}$", said, re.M), said
    assert running("lssecond") == 0 and "preflight" not in said

    rows = lease_rows(capsys, first)
    assert {(r["at"], r["cluster"], r["own"], r["state"]) for r in rows} >= {
        ("h0", "lsfirst", True, "live: its containers run"), ("h1", "lsfirst", True, "live: its containers run")}

    # Ctrl-C while queued: exit 130, and no ticket or session is left in the lease folder.
    waiting = CliProcess("up", "-i", str(second), "--queue")
    waiting.wait_for(r"^h0: queued \(waiting: in use by \S+'s cluster lsfirst")
    waiting.proc.send_signal(signal.SIGINT)
    assert waiting.finish() == 130, waiting.output
    assert eventually(lambda: not list(folder.glob("*.ticket")) and not list(folder.glob("*.session")))

    # A queued `up` killed outright (no clean-up at all): its tickets stay, but count for nothing
    # once its SSH connections are gone, and the next one to take the hosts clears them.
    killed = CliProcess("up", "-i", str(second), "--queue")
    killed.wait_for(r"^h0: queued \(waiting: ")
    killed.proc.kill()
    killed.finish()
    assert len(list(folder.glob("*.ticket"))) == 2
    assert eventually(lambda: not list(folder.glob("*.session")))
    assert all(st == [] for st in waiting_lists(capsys, first))

    # Queued again: it starts once the first cluster is down, not before.
    waiting = CliProcess("up", "-i", str(second), "--queue")
    line = waiting.wait_for(r"^h1: queued \(waiting: ")
    assert re.fullmatch(rf"h1: queued \(waiting: {holder.split(' since')[0]} since [\d: -]+: port {hosts[1].tf_port}\)\n",
                        line), line
    time.sleep(3)                                       # it keeps waiting, and says it once (no terminal)
    assert waiting.proc.poll() is None and running("lssecond") == 0
    assert sum(x.startswith("h1: queued (waiting") for x in waiting.lines) == 1, waiting.output
    code, out, _ = cli(capsys, "down", "-i", str(first))
    assert code == 0 and "h0: removed 1 container(s), gave back its lease" in out, out
    assert waiting.finish() == 0, waiting.output
    assert running("lssecond") == 2 and "started; follow with" in waiting.output
    assert not list(folder.glob("*.ticket"))

    rows = lease_rows(capsys, first)
    assert {(r["at"], r["cluster"], r["own"]) for r in rows} == {("h0", "lssecond", False), ("h1", "lssecond", False)}
    code, out, _ = cli(capsys, "down", "-i", str(second))
    assert code == 0 and lease_rows(capsys, second) == []


def test_disjoint_ports_run_side_by_side_and_a_lease_whose_containers_are_gone_is_stale_until_broken(two_hosts, capsys):
    hosts, inventory, folder = two_hosts
    first, beside, after = inventory("lsone"), inventory("lsbeside", ports=free_ports(2)), inventory("lsafter")
    assert up(capsys, first)[0] == 0
    code, said = up(capsys, beside)
    assert code == 0, said
    assert running("lsone") == 2 and running("lsbeside") == 2
    rows = lease_rows(capsys, first)
    assert {(r["cluster"], r["own"], r["live"]) for r in rows} == {("lsone", True, True), ("lsbeside", False, True)}

    # lsone's containers go behind tfcompose's back: its lease is stale, and still in the way.
    subprocess.run(["docker", "rm", "-f", *labelled("lsone")], capture_output=True, check=True)
    rows = lease_rows(capsys, beside)
    # Each host lists its folder; these two hosts share one machine, so each lists both of lsone's.
    stale = {(r["at"], r["host"], r["state"], r["live"]) for r in rows if r["cluster"] == "lsone"}
    assert stale == {(at, of, "stale: its containers are gone", False) for at in ("h0", "h1") for of in ("h0", "h1")}
    code, said = up(capsys, after)
    assert code == 1, said
    assert re.search(rf"h0: held by \S+'s cluster lsone \(run \d{{8}}-\d{{6}}-[0-9a-f]{{8}}, from \S+\) since [^;]+ for port "
                     rf"{hosts[0].tf_port}; stale: its containers are gone \(`up --break-lease` takes it\)", said), said

    code, said = up(capsys, after, "--break-lease")
    assert code == 0, said
    assert running("lsafter") == 2 and running("lsbeside") == 2
    rows = lease_rows(capsys, after)
    assert {r["cluster"] for r in rows if r["live"]} == {"lsafter", "lsbeside"}
    assert all(r["state"].startswith("broken by ") for r in rows if r["cluster"] == "lsone")
    # A live lease is never broken, with or without the flag.
    code, said = up(capsys, inventory("lsnever", ports=[hosts[0].tf_port, hosts[1].tf_port]), "--break-lease")
    assert code == 1 and "in use by" in said and "lsafter" in said, said
    for inv in (beside, after):
        assert cli(capsys, "down", "-i", str(inv))[0] == 0


def test_gpu_id_lists_clash_only_where_they_overlap_and_waiters_take_their_turn_in_order(two_hosts, capsys):
    hosts, inventory, folder = two_hosts
    holder = load_cluster(inventory("lsholder", ports=free_ports(2), gpus=[0, 1]))
    events: list[str] = []
    waiters = [load_cluster(inventory(name, ports=free_ports(2), gpus=[0])) for name in ("lsearly", "lslate")]
    groups = [Group(c) for c in waiters]

    def wait_turn(group: Group, cluster) -> None:
        try:
            leases.take(group, make(cluster), queue=True, poll_s=0.3)
            events.append(cluster.name)
        except BaseException as exc:          # seen by the test, not lost in the thread
            events.append(f"{cluster.name} failed: {exc}")

    threads = [threading.Thread(target=wait_turn, args=(g, c)) for g, c in zip(groups, waiters)]
    try:
        with Group(holder) as group:
            leases.take(group, make(holder))          # an `up` at work on GPUs 0 and 1 of both hosts
            overlap = inventory("lsoverlap", ports=free_ports(2), gpus=[1, 2])
            code, said = up(capsys, overlap)
            assert code == 1 and re.search(r"h0: in use by \S+'s cluster lsholder \(from \S+\) since .*: GPUs 1$",
                                           said, re.M), said
            # Disjoint ids take their leases, then preflight stops them: this machine has no GPU.
            # What they took is given back.
            code, said = up(capsys, inventory("lsdisjoint", ports=free_ports(2), gpus=[2, 3]))
            assert code == 1 and "gpus requested but Docker has no nvidia runtime" in said, said
            assert {r["cluster"] for r in lease_rows(capsys, overlap)} == {"lsholder"}

            # Two waiters for GPU 0, the early one asking first.
            threads[0].start()
            assert eventually(lambda: len(list(folder.glob("*.ticket"))) == 2)     # one per host
            threads[1].start()
            assert eventually(lambda: len(list(folder.glob("*.ticket"))) == 4)
            time.sleep(1)
            assert events == []
            leases.release(group)                      # what `down` does
        # The early one takes its turn; the late one waits for it (its lease, its session alive).
        assert eventually(lambda: events == ["lsearly"], seconds=30), events
        time.sleep(1.5)
        assert events == ["lsearly"]
        leases.release(groups[0])
        assert eventually(lambda: events == ["lsearly", "lslate"], seconds=30), events
        assert not list(folder.glob("*.ticket"))
    finally:
        for g in groups:
            g.__exit__(None, None, None)
        for t in threads:
            if t.is_alive() or t.ident:
                t.join(30)


def test_a_run_that_ends_under_up_wait_gives_its_leases_back(two_hosts, capsys, tmp_path):
    hosts, inventory, folder = two_hosts
    inv = inventory("lsended")
    doc = yaml.safe_load(inv.read_text())
    doc["run"]["command"] = ["python", "-c", "print('done at once')"]
    inv.write_text(yaml.safe_dump(doc))
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"))
    assert code == 0 and "chief h0 finished (exit 0)" in out, out + err
    assert not list(folder.glob("*.lease")), out + err
    assert cli(capsys, "down", "-i", str(inv))[0] == 0


def eventually(condition, seconds: float = 15) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.2)
    return condition()
