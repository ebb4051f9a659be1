"""Hardware telemetry through the real thing.

On LAN-lab hosts (tests/support/lab.py: each its own network namespace, sshd and Docker engine,
links shaped to 100 Mbit/s): a container labelled as the cluster's on each host burns CPU under a
quota, and one host sends to the other; `status` and `watch` show each host's real CPU (against
its quota), memory (against its limit) and link (near the shaped rate), with GPUs from a stand-in
nvidia-smi on one host's PATH. The stand-in then misbehaves (garbage, silence, a crash mid-run, a
flood): `watch` says so, keeps going with bounded memory, and Ctrl-C leaves nothing on the hosts.

With real TensorFlow (two sshd hosts on this machine's engine, which holds the trainer image: the
lab's engines would need it loaded, over three minutes here): a sync search with one worker held
to a third of a CPU. `watch`, told the other worker has GPUs, names that worker's idle stand-in
GPUs and the throttled worker as the straggler; `up --wait` then shows each host's hardware live
and collects telemetry/<host>.csv, the per-trial figures in results.json and the report's picture.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from support import nvidia_smi
from support.cluster import TRAIN, CliProcess, cli, labelled
from support.common import require
from support.lab import Lab, available, enter
from support.sshd import write_inventory

pytestmark = pytest.mark.integration
BURN = ["sh", "-c", "while :; do :; done"]


@pytest.fixture(scope="module")
def lab(engine_template):
    ok, why = available()
    require(ok, why)
    # Its own /24 (10.213.71; TFC_LAB_NET moves it): the other labs may be up at the same time. Its
    # engines start with the trainer image (the run's engine template), whose shell runs the burners.
    built = Lab(tag=f"tm{os.getpid() % 1000}", subnet="10.213.71", template=engine_template).up(2, rate="100mbit")
    try:
        yield built
    finally:
        built.down()


def gpu_inventory(path: Path, gpus: dict) -> Path:
    """The inventory with these hosts' `gpus` (this machine has no GPU: the stand-in answers for them)."""
    doc = yaml.safe_load(path.read_text())
    for entry in doc["hosts"]:
        entry.update({"gpus": gpus[entry["name"]]} if entry["name"] in gpus else {})
    out = path.with_name(path.stem + "-gpus.yaml")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@pytest.fixture
def burning(lab, tmp_path, trainer_image):
    """A cluster whose `container` on h0 burns CPU under a 0.5-CPU quota and 256 MiB, on h1 under 0.25."""
    name = f"tm{uuid.uuid4().hex[:8]}"
    inv = write_inventory(lab, tmp_path / "inv.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), train=TRAIN,
                          image=trainer_image)
    for host, cpus in zip(lab.hosts, ("0.5", "0.25")):
        host.docker("run", "-d", "--label", f"tfcompose.cluster={name}", "--label", f"tfcompose.host={host.name}",
                    "--label", "tfcompose.run=0123456789ab", "--cpus", cpus, "-m", "256m", "--entrypoint", "", trainer_image, *BURN)
    yield name, gpu_inventory(inv, {"h1": [0, 1]})
    clear_lab(lab, name)


class Transfer:
    """h0 sends to h1 as fast as the shaped link takes, for `seconds`."""

    def __init__(self, lab: Lab, seconds: float):
        receive = "import socket\ns=socket.socket();s.bind(('0.0.0.0',5301));s.listen();c,_=s.accept()\nwhile c.recv(1<<16): pass"
        send = (f"import socket,time\nc=socket.create_connection(('{lab.hosts[1].address}',5301));b=b'x'*65536\n"
                f"end=time.time()+{seconds}\nwhile time.time()<end: c.sendall(b)")
        self.procs = [subprocess.Popen([*enter(lab.hosts[1].ns), sys.executable, "-c", receive])]
        time.sleep(0.5)
        self.procs.append(subprocess.Popen([*enter(lab.hosts[0].ns), sys.executable, "-c", send]))
        time.sleep(1.5)                          # past the link's first burst

    def stop(self):
        for proc in reversed(self.procs):
            proc.kill()
            proc.wait()


def samplers_left(cluster: str) -> list[str]:
    """This cluster's samplers still running on this machine (where the lab's hosts run)."""
    found = subprocess.run(["pgrep", "-af", "tfcompose-telemetry"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line and f" {cluster} " in line]


def test_status_shows_each_lab_hosts_real_cpu_memory_and_link_and_the_stand_in_gpus(lab, burning, capsys):
    name, inv = burning
    nvidia_smi.install(lab.hosts[1].bin, util=3)
    transfer = Transfer(lab, 25)
    try:
        code, out, err = cli(capsys, "status", "-i", str(inv), "--json")
        assert code == 0, out + err
        code, table, err = cli(capsys, "status", "-i", str(inv))
        assert code == 0, table + err
    finally:
        transfer.stop()
    hw = {st["host"]: st["hardware"] for st in json.loads(out)}
    assert hw["h0"]["cpu_limit_cores"] == 0.5 and hw["h1"]["cpu_limit_cores"] == 0.25
    # The burners get what this shared machine leaves them, never more than their quota.
    assert 0.01 <= hw["h0"]["cpu_cores"] <= 0.5 * 1.15 and 0.01 <= hw["h1"]["cpu_cores"] <= 0.25 * 1.15, hw
    assert all(h["mem_limit_mib"] == 256 and 0 < h["mem_mib"] < 64 for h in hw.values()), hw
    # Near the 100 Mbit/s the link is shaped to (what a Python sender on this crowded machine gets through).
    assert 30 <= hw["h0"]["net_out_mbit_s"] <= 110 and 30 <= hw["h1"]["net_in_mbit_s"] <= 110, hw
    assert hw["h0"]["gpus"] == [] and [(g["index"], g["util_pct"], g["power_w"]) for g in hw["h1"]["gpus"]] == \
           [(0, 3.0, 55.5), (1, 3.0, 55.5)]
    assert "hardware now" in table
    assert re.search(r"h1 .*2 GPUs 3% 2\.0/32\.0 GiB 111 W, CPU 0\.\d of 0\.25, mem [\d.]+ MiB of 256 MiB, net in \d+ out \d+",
                     table), table
    assert samplers_left(name) == []


def test_watch_shows_the_hardware_live_and_outlives_a_misbehaving_nvidia_smi(lab, burning, tmp_path):
    name, inv = burning
    stand_in = nvidia_smi.install(lab.hosts[1].bin, util=3, ignore_term=True)
    watch = CliProcess("watch", "-i", str(inv), "--runs", str(tmp_path / "runs"))
    try:
        watch.wait_for(r"^h1: hardware: 2 GPUs 3% .*CPU 0\.\d+ of 0\.25", 60)
        watch.wait_for(r"^h0: hardware: CPU 0\.\d+ of 0\.5, mem [\d.]+ MiB of 256 MiB, net in \d+ out \d+ Mbit/s$", 10)
        rss = [memory_kb(watch.proc.pid)]
        nvidia_smi.set_mode(stand_in, "garbage")
        watch.wait_for(r"warning: h1: telemetry: ignored what is not a sample \(first: '0, 50, 1024, 16384, 55\.5, 41"
                       r"\\\\x1b\]52;c", 40)
        nvidia_smi.set_mode(stand_in, "silent")           # a wedged driver: nvidia-smi says nothing, and lives
        time.sleep(3)
        silent = (time.time() + 4, time.time() + 9)      # by then its last readings are stale
        time.sleep(10)
        for mode, says in (("crash", r"warning: h1: telemetry: nvidia-smi ended \(exit 139\); started again in 10 s"),
                           ("flood", r"warning: h1: telemetry stopped: the host sent more than 256 KiB or 4096 lines "
                                     r"in a second, which no sampler does")):
            subprocess.run(["pkill", "-KILL", "-f", str(stand_in)], capture_output=True)   # the silent one (it ignores TERM)
            nvidia_smi.set_mode(stand_in, mode)
            watch.wait_for(says, 40)
            rss.append(memory_kb(watch.proc.pid))
        nvidia_smi.set_mode(stand_in, "silent")
        assert watch.proc.poll() is None and max(rss) - rss[0] < 30_000, rss     # the flood did not grow it
        started = time.monotonic()
        watch.proc.send_signal(signal.SIGINT)
        assert watch.finish(30) == 130 and time.monotonic() - started < 10, watch.output
    finally:
        if watch.proc.poll() is None:
            watch.proc.kill()
    assert "Traceback" not in watch.output and "\x1b" not in watch.output
    time.sleep(2)
    assert samplers_left(name) == [] and nvidia_smi.running(stand_in) == []
    import csv as csv_mod
    rows = list(csv_mod.DictReader((tmp_path / "runs" / name / "0123456789ab" / "telemetry" / "h1.csv").open()))
    assert {"gpu0_util_pct", "gpu1_power_w", "cpu_cores", "net_in_mbit_s"} <= set(rows[0])
    assert rows[2]["gpu0_util_pct"] == "3" and rows[2]["cpu_limit_cores"] == "0.25"
    quiet = [r for r in rows if silent[0] <= float(r["time"]) <= silent[1]]
    assert quiet and all(r["gpu0_util_pct"] == "" and r["cpu_cores"] != "" for r in quiet), quiet   # no stale GPU figures


def test_a_killed_watch_leaves_no_sampler_on_the_hosts_and_collect_keeps_what_it_sampled(lab, burning, tmp_path,
                                                                                         capsys):
    name, inv = burning
    runs = tmp_path / "runs"
    watch = CliProcess("watch", "-i", str(inv), "--runs", str(runs))
    try:
        watch.wait_for(r"^h1: hardware: CPU", 60)
        time.sleep(3)
        assert samplers_left(name)
        watch.proc.kill()                        # kill -9: no clean-up runs in the launcher
        watch.finish(10)
    finally:
        if watch.proc.poll() is None:
            watch.proc.kill()
    deadline = time.monotonic() + 15              # their SSH channels closed: each sampler ends itself
    while samplers_left(name) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert samplers_left(name) == []
    spools = list((runs / name / "0123456789ab" / "telemetry" / ".spool").glob("*.jsonl"))
    assert sorted(p.name.split(".")[0] for p in spools) == ["h0", "h1"]
    code, out, err = cli(capsys, "collect", "-i", str(inv), "--runs", str(runs))
    assert code == 0, out + err                  # the burners wrote no results: a warning, not a failure
    for host in ("h0", "h1"):
        rows = (runs / name / "0123456789ab" / "telemetry" / f"{host}.csv").read_text().splitlines()
        assert len(rows) >= 3 and rows[0].startswith("time,training,trial,epoch,cpu_cores")
    assert not (runs / name / "0123456789ab" / "telemetry" / ".spool").exists()


def memory_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1))


# --- with real TensorFlow ---------------------------------------------------------------------------
# Tiny epochs (4 steps, a second or so each, held to 0.1 CPU or not), enough of them that the run is
# surely still going when `up --wait` comes; the rules warn after 10 s (telemetry.warn_after_s), so
# the test waits seconds, not minutes, for them.
SEARCH = {**TRAIN, "dataset": {"kind": "synthetic", "image_size": [32, 32], "per_class": 32},
          "candidates": ["small_cnn"], "search": {"learning_rates": [0.01, 0.001]}, "epochs": 12}


@pytest.fixture
def training(lab, tmp_path, trainer_image):
    """A sync search inventory for the lab's two hosts (each its own engine), h1 with stand-in GPUs
    on its PATH; the cluster's containers removed after."""
    name = f"tt{uuid.uuid4().hex[:8]}"
    inv = write_inventory(lab, tmp_path / "inv.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), train=SEARCH,
                          image=trainer_image, telemetry={"warn_after_s": 10})
    nvidia_smi.install(lab.hosts[1].bin, util=2)
    yield name, inv
    clear_lab(lab, name)


def container_on(host, name: str) -> str:
    return host.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={name}").stdout.split()[0]


def test_idle_gpus_an_input_bound_straggler_are_named_live_and_the_run_brings_its_telemetry_back(lab, training,
                                                                                                 capsys, tmp_path):
    """Real training on two lab hosts. `watch`, told h1 has (stand-in) GPUs, names them idle and h1
    input-bound and the straggler once h1's container is held to a tenth of a CPU; `up --wait` onto
    the running cluster shows each host's hardware live, and the run it collects carries its
    telemetry: per-host CSVs, per-trial CPU-hours (GPU-hours and energy for the trials watch saw
    h1's GPUs in), the report's picture and its warnings."""
    name, inv = training
    h1 = lab.hosts[1]
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0, out + err
    watch = CliProcess("watch", "-i", str(gpu_inventory(inv, {"h1": [0, 1]})), "--runs", str(runs))
    try:
        watch.wait_for(r"^h1: hardware: 2 GPUs 2% 2\.0/32\.0 GiB 111 W, CPU [\d.]+ of 2, mem", 120)
        watch.wait_for(r"^h1: trial 1/2 \S+ epoch 1/12 ", 300)          # training: its progress says so
        # h1 held to a tenth of a CPU: h0 waits for it at every step; h1's (stand-in) GPUs idle meanwhile.
        h1.docker("update", "--cpus", "0.1", container_on(h1, name))
        for gpu in (0, 1):
            watch.wait_for(rf"warning: h1: GPU {gpu} under 10 % busy for 10 s while h1 trains \(mean 2 %\)", 120)
        watch.wait_for(r"warning: h1: input-bound: GPUs 0, 1 averaged 2 % for 10 s while the container wanted "
                       r"[\d.]+ of its 0\.1 CPUs", 120)
        straggler = watch.wait_for(r"warning: h1: straggler: for 10 s its container wanted [\d.]+× the 0\.1 CPUs", 120)
        assert "warning: h0" not in watch.output, watch.output
        watch.proc.send_signal(signal.SIGINT)
        assert watch.finish(30) == 130, watch.output
    finally:
        if watch.proc.poll() is None:
            watch.proc.kill()
    share, others = map(float, re.search(r"wanted ([\d.]+)× .* the other workers ([\d.]+)×", straggler).groups())
    assert share >= 0.8 and share > 1.3 * others, straggler

    # `up --wait` onto the running cluster (h1 still held back: it surely runs): it goes on with it,
    # shows each host's hardware, then h1 is let go and the run ends and is collected.
    waiting = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    try:
        waiting.wait_for(r"^h0: hardware: CPU \d+\.\d of 2, mem [\d.]+ (GiB|MiB) of [\d.]+ GiB, net in \d+ out \d+ "
                         r"Mbit/s$", 120)
        h1.docker("update", "--cpus", "2", container_on(h1, name))
        assert waiting.finish(600) == 0, waiting.output
    finally:
        if waiting.proc.poll() is None:
            waiting.proc.kill()
    out = waiting.output
    assert re.search(r"^run \S+: already running, left as it is", out, re.M), out     # the same run, watched
    assert "GPU" not in "".join(line for line in out.splitlines() if "hardware:" in line)      # gpus: 0 here
    assert "CPU h" in out                                       # the leaderboard up prints
    latest = runs / name / "latest"
    doc = json.loads((latest / "results.json").read_text())
    trials = doc["candidates"]
    assert all(t["started_at"] < t["ended_at"] and t["cpu_hours"] > 0 and 0 < t["telemetry_coverage"] <= 1
               for t in trials), trials
    watched = [t for t in trials if "gpu_hours" in t]          # the trial(s) `watch` saw h1's stand-in GPUs in
    assert watched and all(t["gpu_utilization"] == 2.0 and t["energy_wh"] > 0 for t in watched), trials
    for host in ("h0", "h1"):
        rows = (latest / "telemetry" / f"{host}.csv").read_text().splitlines()
        assert len(rows) > 20 and rows[0].startswith("time,training,trial,epoch,cpu_cores")
    report = (latest / "report.md").read_text()
    assert "![telemetry](telemetry.png)" in report and "| GPU h | GPU % | GPU Wh | CPU h | host |" in report
    warned = [line for line in report.splitlines() if line.startswith("- h")]
    assert "- h1: straggler:" in report and "- h1: GPU 0 under 10 % busy for 10 s" in report, warned
    assert "- h1: input-bound:" in report, warned


def clear_lab(lab, name: str) -> None:
    """After a test on the shared lab: the cluster's containers and the stand-ins in each host's bin gone."""
    for host in lab.hosts:
        ids = host.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={name}").stdout.split()
        if ids:
            host.docker("rm", "-f", *ids, check=False)
        for leftover in host.bin.iterdir():
            leftover.unlink()
