"""B13 telemetry: what sampling the hardware costs, and how soon an idle GPU is named.

    BASE_IMAGE=tf-offline-base:cpu python bench/telemetry.py [REPEATS] [launcher,memory,training]

1. Overhead on step time, interleaved in one run: one sshd host on loopback trains `small_cnn`
   (one worker, its container given 1 CPU, synthetic 32×32 images) for many epochs while the
   launcher samples it (the sampler on the host, period 1 s, with a stand-in nvidia-smi of 2 GPUs)
   during some blocks of epochs and not in others: ON, OFF, ON, OFF…, each block 3 epochs, the
   first epoch of each block dropped (the sampler starts or stops in it). Step time: the trainer's
   own training images/s per epoch (validation and backups are timed apart).
2. From a GPU going idle to the warning: in the same run, the stand-in's utilisation drops from
   90 % to 2 % (its file written: the moment counted from); the time until the launcher warns.
3. The launcher's CPU and memory with 8 hosts sampling (8 sshd hosts on loopback, each a stand-in
   with 8 GPUs, period 1 s), against the same 8 connections held idle; and each host's sampler's
   own CPU (the sh process and everything it ran, from /proc). Then its memory every 30 s over
   five minutes of 8 hosts sampling: bounded, or growing.

This machine is shared (other agents' tests and trainers run beside it): the load average is
recorded with each part, and only ratios within one run are compared.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import REPO, build_image, machine, summary, write_section  # noqa: E402
from support import nvidia_smi  # noqa: E402
from support.common import free_ports  # noqa: E402
from support.sshd import SshdFarm, write_inventory  # noqa: E402

from launcher.inventory.load import load_cluster  # noqa: E402
from launcher.plan import complete, make  # noqa: E402
from launcher.reporter import RecordingReporter  # noqa: E402
from launcher.ssh.group import Group  # noqa: E402
from launcher.stages.wait import read_progress  # noqa: E402
from launcher.telemetry import session as telemetry  # noqa: E402

IMAGE_BASE = os.environ.setdefault("BASE_IMAGE", "tf-offline-base:cpu")
BLOCK = 3
WARM_S = 20.0
BLOCKS = 24              # 12 ON and 12 OFF blocks: 24 epochs kept of each
TRAIN = {"dataset": {"kind": "synthetic", "image_size": [32, 32], "per_class": 256}, "candidates": ["small_cnn"],
         "epochs": 400, "batch_per_replica": 32, "join_timeout_s": 120}


def load() -> float:
    return os.getloadavg()[0]


class Watcher:
    """Keeps the session's Observer told what the wait loop would tell it, and collects each epoch's
    images/s as the trainer reports it."""

    def __init__(self, group, host):
        self.group, self.host, self.epochs, self.latest = group, host, {}, None

    def poll(self, observer=None) -> None:
        found = read_progress(self.group).get(self.host.name)
        if found is None:
            return
        self.latest = found
        for trial_index, _, epoch, _, *_, ips in found.recent:
            self.epochs.setdefault(epoch, ips)
        if observer is not None:
            observer.stage(self.host.name, "running")
            observer.progress(self.host.name, found)

    def wait_epoch(self, after: int, observer=None) -> int:
        while True:
            self.poll(observer)
            done = max(self.epochs, default=0)
            if done > after:
                return done
            time.sleep(0.3)


def overhead(group, plan, watcher: Watcher, run_dir: Path, blocks: int, container: str) -> dict:
    """Images/s per epoch with and without the sampler, interleaved in blocks of BLOCK epochs."""
    kept, done = {"on": [], "off": [], "sampler_cpu_s": 0.0, "container_cpu_s": 0.0, "on_s": 0.0}, watcher.wait_epoch(0)
    for block in range(blocks):
        on = block % 2 == 0
        session = telemetry.Session(group, plan, run_dir, 1.0) if on else None
        if session:
            session.start()
        first = done
        done = watcher.wait_epoch(done)
        host0, box0, t0 = sampler_cpu_seconds("tbench"), container_cpu_seconds(container), time.monotonic()
        for _ in range(BLOCK - 1):
            done = watcher.wait_epoch(done)
        for epoch in range(first + 2, done + 1):           # the block's first epoch saw the switch
            kept["on" if on else "off"].append(watcher.epochs[epoch])
        if session:
            kept["sampler_cpu_s"] += sampler_cpu_seconds("tbench") - host0
            kept["container_cpu_s"] += container_cpu_seconds(container) - box0
            kept["on_s"] += time.monotonic() - t0
            session.stop()
    return kept


def container_cpu_seconds(container: str) -> float:
    """The trainer container's CPU seconds so far (cgroup v1 cpuacct, or v2 cpu.stat)."""
    for path in (f"/sys/fs/cgroup/cpuacct/docker/{container}/cpuacct.usage",
                 f"/sys/fs/cgroup/cpu,cpuacct/docker/{container}/cpuacct.usage"):
        if Path(path).exists():
            return int(Path(path).read_text()) / 1e9
    stat = Path(f"/sys/fs/cgroup/system.slice/docker-{container}.scope/cpu.stat")
    return int(stat.read_text().split()[1]) / 1e6 if stat.exists() else 0.0


def idle_to_warning(group, plan, watcher: Watcher, run_dir: Path, stand_in: Path, repeats: int) -> list[float]:
    """Seconds from the stand-in's GPUs going idle to the launcher's warning, `repeats` times."""
    reporter = RecordingReporter()
    group.reporter = reporter
    session = telemetry.Session(group, plan, run_dir, 1.0)
    session.start()
    first_after: dict[int, float] = {}          # warnings seen → when the count first passed it

    def watch_warnings():
        while not stop.is_set():
            count = sum(1 for _, m in reporter.warnings if "under 10 % busy" in m)
            for n in range(count):
                first_after.setdefault(n, time.monotonic())
            time.sleep(0.05)

    def seen() -> int:
        return len(first_after)

    stop = threading.Event()
    threading.Thread(target=watch_warnings, daemon=True).start()
    latencies = []
    try:
        for _ in range(repeats):
            nvidia_smi.set_mode(stand_in, "good", 90)
            settle = time.monotonic() + 45                 # busy long enough for the last episode to end
            while time.monotonic() < settle:
                watcher.poll(session.observer)
                time.sleep(0.5)
            before = seen()
            nvidia_smi.set_mode(stand_in, "good", 2)
            idle_at = time.monotonic()
            while seen() == before and time.monotonic() - idle_at < 180:
                watcher.poll(session.observer)
                time.sleep(0.5)
            if seen() > before:
                latencies.append(first_after[before] - idle_at)
    finally:
        stop.set()
        session.stop()
    return latencies


def launcher_cost(tmp: Path, hosts_n: int, seconds: float, tag: str) -> dict:
    """Launcher CPU seconds per second and memory: `hosts_n` hosts sampled, against them held idle."""
    (tmp / "ssh").mkdir(parents=True)
    farm = SshdFarm(tmp / "ssh")
    try:
        return measure_launcher(farm, tmp, hosts_n, seconds, tag)
    finally:
        farm.stop()


def measure_launcher(farm: SshdFarm, tmp: Path, hosts_n: int, seconds: float, tag: str) -> dict:
    bins = [tmp / f"b{i}" for i in range(hosts_n)]
    ports = free_ports(2 * hosts_n)
    hosts = []
    for i, folder in enumerate(bins):
        nvidia_smi.install(folder, util=50, gpus=8)
        hosts.append(farm.start(f"{tag}x{i}", ports[2 * i], ports[2 * i + 1],
                                env={"PATH": f"{folder}:{os.environ['PATH']}"}))
    farm.known_hosts()
    tmp.mkdir(parents=True, exist_ok=True)
    inv = write_inventory(farm, tmp / f"{tag}.yaml", tag, hosts, train={})
    cluster = load_cluster(inv)
    plan = complete(make(cluster), {}, {h.name: "all" for h in cluster.hosts})
    out = {}
    with Group(cluster, RecordingReporter()) as group:
        group.run("connect", lambda h, c: c.run(["true"])).raise_if_failed()
        for mode in ("idle", "sampling"):
            session = telemetry.Session(group, plan, tmp / f"run{hosts_n}", 1.0) if mode == "sampling" else None
            if session:
                session.start()
            time.sleep(WARM_S)                     # connected, samplers started: then measured
            rss0, cpu0, t0 = rss_kb(), time.process_time(), time.monotonic()
            host0, samples0 = sampler_cpu_seconds(tag), sum(session.counts.values()) if session else 0
            time.sleep(seconds)
            cpu, elapsed, rss = time.process_time() - cpu0, time.monotonic() - t0, rss_kb()
            host_cpu = sampler_cpu_seconds(tag) - host0 if session else 0.0
            samples = sum(session.counts.values()) - samples0 if session else 0
            if session:
                session.stop()
                if samples < 0.5 * hosts_n * seconds:          # a bench of samplers that did not sample proves nothing
                    raise SystemExit(f"{hosts_n} host(s) gave {samples} samples in {seconds:g} s: "
                                     f"{group.reporter.warnings[-3:]}")
            out[mode] = {"cpu_per_s": cpu / elapsed, "rss_mb": rss / 1024, "rss_growth_mb": (rss - rss0) / 1024,
                         "samples_per_s": samples / elapsed, "host_sampler_cpu_per_s": host_cpu / elapsed / hosts_n}
    return out


def memory_over_time(tmp: Path, hosts_n: int, minutes: int) -> list[float]:
    """The launcher's resident memory (MB) each 30 s while `hosts_n` hosts are sampled for `minutes`."""
    (tmp / "ssh").mkdir(parents=True)
    farm = SshdFarm(tmp / "ssh")
    try:
        ports = free_ports(2 * hosts_n)
        hosts = []
        for i in range(hosts_n):
            folder = tmp / f"b{i}"
            nvidia_smi.install(folder, util=50, gpus=8)
            hosts.append(farm.start(f"long{i}", ports[2 * i], ports[2 * i + 1],
                                    env={"PATH": f"{folder}:{os.environ['PATH']}"}))
        farm.known_hosts()
        cluster = load_cluster(write_inventory(farm, tmp / "long.yaml", "long", hosts, train={}))
        plan = complete(make(cluster), {}, {h.name: "all" for h in cluster.hosts})
        with Group(cluster, RecordingReporter()) as group:
            session = telemetry.Session(group, plan, tmp / "run", 1.0)
            session.start()
            points = [rss_kb() / 1024]
            for _ in range(minutes * 2):
                time.sleep(30)
                points.append(rss_kb() / 1024)
            session.stop()
        return points
    finally:
        farm.stop()


def rss_kb() -> int:
    return int(next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("VmRSS:")))


def sampler_cpu_seconds(cluster: str) -> float:
    """CPU seconds this cluster's samplers on this machine have used, with the children they waited
    for (other samplers, a test's beside the bench, are not counted)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    found = subprocess.run(["pgrep", "-af", "tfcompose-telemetry"], capture_output=True, text=True).stdout.splitlines()
    for pid in [line.split()[0] for line in found if f" {cluster} " in line]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / ticks        # utime stime cutime cstime
    return total


def main(repeats: int, parts: list[str]) -> None:
    """The parts asked for (launcher, memory, training), into the results of the parts run before."""
    out = REPO / "docs" / "telemetry_bench.json"
    results: dict = json.loads(out.read_text()) if out.exists() else {}
    results.update({"machine": machine()})
    results.setdefault("load", {})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))      # so that every host is stopped on the way out
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if "launcher" in parts:
            results["load"]["launcher"] = load()
            results["launcher"] = {str(n): [launcher_cost(tmp / f"c{n}-{r}", n, 60.0, f"r{r}m{n}")
                                            for r in range(repeats)] for n in (1, 8)}
            out.write_text(json.dumps(results, indent=1))
        if "memory" in parts:
            results["load"]["memory"] = load()
            results["memory_mb"] = memory_over_time(tmp / "mem", 8, 5)
            out.write_text(json.dumps(results, indent=1))
        if "training" in parts:
            (tmp / "ssh").mkdir()
            farm = SshdFarm(tmp / "ssh")
            try:
                results["load"]["training_start"] = load()
                results.update(training_parts(farm, tmp, build_image() and "tfcompose-trainer:bench", repeats))
                results["load"]["training_end"] = load()
            finally:
                farm.stop()
            out.write_text(json.dumps(results, indent=1))
    write_section("telemetry", report(results, repeats))


def training_parts(farm: SshdFarm, tmp: Path, image: str, repeats: int) -> dict:
    (tmp / "run").mkdir()
    folder = tmp / "hostbin"
    stand_in = nvidia_smi.install(folder, util=90, gpus=2)
    port, tf_port = free_ports(2)
    host = farm.start("t0", port, tf_port, env={"PATH": f"{folder}:{os.environ['PATH']}"})
    farm.known_hosts()
    inv = write_inventory(farm, tmp / "train.yaml", "tbench", [host], train=TRAIN, image=image)
    cluster = load_cluster(inv)
    up = subprocess.run([sys.executable, "-c", "from launcher.cli import run; run()", "up", "-i", str(inv)], cwd=REPO,
                        capture_output=True, text=True)
    if up.returncode != 0:
        raise SystemExit(up.stdout + up.stderr)
    cid = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", "label=tfcompose.cluster=tbench"],
                         capture_output=True, text=True).stdout.split()[0]
    subprocess.run(["docker", "update", "--cpus", "1", cid], check=True, capture_output=True)
    plan = complete(make(cluster), {}, {host.name: [0, 1]})
    try:
        with Group(cluster, RecordingReporter()) as group:
            watcher = Watcher(group, cluster.hosts[0])
            kept = overhead(group, plan, watcher, tmp / "run", blocks=BLOCKS, container=cid)
            load_mid = load()
            latencies = idle_to_warning(group, plan, watcher, tmp / "run", stand_in, repeats)
    finally:
        subprocess.run([sys.executable, "-c", "from launcher.cli import run; run()", "down", "-i", str(inv)], cwd=REPO,
                       capture_output=True)
    return {"overhead": kept, "idle_to_warning_s": latencies, "load_training": load_mid}


def report(r: dict, repeats: int) -> str:
    """B13's section from the results so far: the parts not measured yet are said to be missing."""
    loads = r["load"]
    parts = [f"""
## B13 Telemetry: its cost, an idle GPU named, the launcher with 8 hosts

{r['machine']}; `python bench/telemetry.py {repeats}`. This machine is shared with other agents'
tests and trainers (2 cores; load average {loads.get('launcher', loads.get('start', float('nan'))):.1f} when the launcher part began):
only figures within one part are compared."""]
    if "overhead" in r:
        parts.append(_training_text(r))
    else:
        parts.append("**Not measured yet**: what the sampler costs the training, and how soon an idle GPU is "
                     "named (`python bench/telemetry.py 3 training`).")
    parts.append(_launcher_text(r, repeats))
    if "memory_mb" in r:
        memory = r["memory_mb"]
        parts.append(f"Its memory while 8 hosts were sampled for five minutes, every 30 s (MB): "
                     f"{', '.join(f'{m:.1f}' for m in memory)}: what grows is the first 80 s of samples the rules keep "
                     "per host (SPAN + 2 gaps), then it stays.")
    else:
        parts.append("**Not measured yet**: its memory over five minutes of 8 hosts (`python bench/telemetry.py 3 memory`).")
    return "\n\n".join(parts) + "\n"


def _training_text(r: dict) -> str:
    on, off = r["overhead"]["on"], r["overhead"]["off"]
    (m_on, s_on), (m_off, s_off) = summary(on), summary(off)
    cost = 1 - m_on / m_off
    sampler_share = r["overhead"]["sampler_cpu_s"] / max(r["overhead"]["container_cpu_s"], 1e-9)
    sampler_core = r["overhead"]["sampler_cpu_s"] / max(r["overhead"]["on_s"], 1e-9)
    lat = r["idle_to_warning_s"]
    return f"""**What the sampler costs the training** (load {r['load_training']:.1f}; one sshd host on loopback,
`small_cnn`, one worker held to 1 CPU, sampled every 1 s with a stand-in nvidia-smi of 2 GPUs; {len(on)} epochs
sampled and {len(off)} not, in blocks of {BLOCK} interleaved in one run, the first epoch of each block dropped):
the sampler's own CPU (its sh loop and everything it ran, from /proc) was **{sampler_core:.2%} of one
core**, **{sampler_share:.2%}** of the CPU the training container used meanwhile: the most it can take
from a step that is CPU-bound (goal ≤ 1 %). Training images/s per epoch, median (spread):
{m_on:.0f} ({s_on:.0f}) sampled, {m_off:.0f} ({s_off:.0f}) not ({cost:+.1%}): on this crowded machine one
epoch's speed varies several-fold from the next, far more than any difference the sampler could
make, so this comparison bounds nothing here.

**From a GPU going idle to the warning**: {len(lat)} times, the stand-in's utilisation written from
90 % to 2 % while the host trained: the warning came after **{statistics.median(lat):.1f} s** (median;
{min(lat):.1f}–{max(lat):.1f} s). The rule is "under 10 % for 60 s", so 60 s is its floor; the rest is
the stand-in's own period (1 s), the sampler's (1 s) and the judge's pace (1 s)."""


def _launcher_text(r: dict, repeats: int) -> str:
    rows = []
    for n, runs in r["launcher"].items():
        for mode in ("idle", "sampling"):
            cpu = [x[mode]["cpu_per_s"] * 100 for x in runs]
            rss = [x[mode]["rss_mb"] for x in runs]
            per_host = [x[mode]["host_sampler_cpu_per_s"] * 100 for x in runs]
            samples = [x[mode]["samples_per_s"] for x in runs]
            rows.append(f"| {n} | {mode} | {statistics.median(cpu):.2f} ({max(cpu) - min(cpu):.2f}) | "
                        f"{statistics.median(rss):.0f} | {statistics.median(samples):.1f} | "
                        + (f"{statistics.median(per_host):.2f} ({max(per_host) - min(per_host):.2f}) |" if mode == "sampling"
                           else "|"))
    return f"""**The launcher with 1 and 8 hosts sampling** (sshd hosts on loopback, stand-ins of 8 GPUs each,
period 1 s; {len(next(iter(r['launcher'].values())))} repetitions of 60 s after 20 s to start; "idle": the same
connections held, no sampler): the launcher's CPU (% of one core, all its threads; spread in brackets), its resident
memory, the samples it took, and each host's sampler's own CPU (% of one core: the sh loop and what
it ran; the stand-in's own CPU left out; a negative figure is /proc's accounting of a child that ended between
two readings).

| hosts | launcher | CPU % (spread) | RSS MB | samples/s | sampler CPU % per host (spread) |
|---:|---|---:|---:|---:|---:|
{chr(10).join(rows)}"""


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:       # re-render docs/benchmarks.md from the last raw results
        saved = json.loads((REPO / "docs" / "telemetry_bench.json").read_text())
        write_section("telemetry", report(saved, len(next(iter(saved["launcher"].values())))))
        raise SystemExit(0)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3,
         sys.argv[2].split(",") if len(sys.argv) > 2 else ["launcher", "memory", "training"])
