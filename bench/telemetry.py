"""B13 telemetry: what sampling the hardware costs, and how soon an idle GPU is named.

    BASE_IMAGE=tf-offline-base:cpu python bench/telemetry.py [REPEATS] [launcher,memory,training]

Every sampler's own CPU is measured from the host side, by cgroup (bench/cgroups.py): right after
a sampler starts, the whole tree its SSH command started on the host (the login shell, `timeout`,
the sh loop; all they start later is born inside) is moved into a cgroup v2 folder of the bench's,
and the stand-in nvidia-smi (a sh script here, not what a real host runs) into one of its own;
their cpu.stat counts every CPU-µs, processes that ended included. Removed on the way out.

1. Overhead on step time, interleaved in one run: one sshd host on loopback trains `small_cnn`
   (one worker, its container given 1 CPU, synthetic 32×32 images) while the launcher samples it
   (period 1 s, a stand-in nvidia-smi of 2 GPUs) in some blocks of BLOCK epochs and not in others,
   in the order ON, OFF, OFF, ON (a drift over the run weighs on both alike), for OVERHEAD_S; the
   first epoch of each block dropped (the sampler starts or stops in it). Step time: the trainer's
   own training images/s per epoch (validation and backups are timed apart). The blocks are cut
   into REPEATS consecutive repetitions of whole ON-OFF-OFF-ON groups; each gives an overhead
   (1 − median ON / median OFF): their median and spread.
2. From a GPU going idle to the warning: in the same run, IDLE_REPEATS times, the stand-in's
   utilisation drops from 90 % to 2 % (its file written: the moment counted from); the time until
   the launcher warns, with the rule's default window (telemetry.warn_after_s).
3. The launcher's CPU and memory with 1 and 8 hosts sampling (sshd hosts on loopback, each a
   stand-in with 8 GPUs, period 1 s), against the same connections held idle, and each host's
   sampler's own CPU. Then its memory every 30 s over five minutes of 8 hosts sampling.

This machine is shared (other agents' tests and trainers run beside it): the load average is
recorded with each part, and only ratios within one run are compared.
"""
from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cgroups import Meter, argv, parent, pids, tree_moves  # noqa: E402
from common import REPO, build_image, machine, summary, write_section  # noqa: E402
from support import nvidia_smi  # noqa: E402
from support.common import free_ports  # noqa: E402
from support.sshd import SshdFarm, write_inventory  # noqa: E402

from launcher.inventory.load import load_cluster  # noqa: E402
from launcher.plan import complete, make, named  # noqa: E402
from launcher.reporter import RecordingReporter  # noqa: E402
from launcher.runs import RUN_FILE  # noqa: E402
from launcher.ssh.group import Group  # noqa: E402
from launcher.stages.wait import read_progress  # noqa: E402
from launcher.telemetry import rules  # noqa: E402
from launcher.telemetry import session as telemetry  # noqa: E402

IMAGE_BASE = os.environ.setdefault("BASE_IMAGE", "tf-offline-base:cpu")
BLOCK = 4                         # epochs per block, the first dropped
ORDER = (True, False, False, True)  # sampled or not, block after block
OVERHEAD_S = 600.0                # blocks for this long, then to the end of the ORDER group
IDLE_REPEATS = 5
SETTLE_S = 45.0                   # GPUs busy this long before going idle: the last warning's episode is over
WARM_S = 10.0                     # launcher part: connected, samplers started, then measured
LAUNCHER_S = 30.0
CGROUPS = ("sampler", "stand-in")
TRAIN = {"dataset": {"kind": "synthetic", "image_size": [32, 32], "per_class": 1024}, "candidates": ["small_cnn"],
         "epochs": 5000, "batch_per_replica": 32, "join_timeout_s": 120}


def load() -> float:
    return os.getloadavg()[0]


class Watcher:
    """Keeps the session's Observer told what the wait loop would tell it, and collects each epoch's
    images/s as the trainer reports it."""

    def __init__(self, group, plan, host):
        self.group, self.plan, self.host, self.epochs, self.latest = group, plan, host, {}, None

    def poll(self, observer=None) -> None:
        found = read_progress(self.group, self.plan)[0].get(self.host.name)
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


# --- the samplers' own CPU, by cgroup ------------------------------------------------------------
def stand_in_cgroup(args: list[str]) -> str | None:
    """The stand-in nvidia-smi (run by its path: `/bin/sh <folder>/nvidia-smi …`) has a cgroup of its own."""
    return "stand-in" if any(Path(a).name == "nvidia-smi" for a in args[:2]) else None


def top_of(tag: str) -> int:
    """The process the launcher's SSH command with this tag is on the host (the login shell sshd
    started), 0 while there is none: the process with the tag as an argument, then up while the
    parent's command line holds it."""
    pid = next((p for p in pids() if tag in argv(p)), 0)
    while pid and (up := parent(pid)) and any(tag in a for a in argv(up)):
        pid = up
    return pid


def samplers_into(meter: Meter, session, timeout_s: float = 20.0) -> None:
    """Each of the session's samplers, once it runs with its stand-in, into the meter: the tree its
    SSH command started into "sampler", the stand-in and what it runs into "stand-in" (what each
    starts afterwards is born there). Twice: a child born while its parent moved stays behind once."""
    tags, deadline = [s.tag for s in session.samplers.values()], time.monotonic() + timeout_s
    while True:
        tops = [top_of(tag) for tag in tags]
        if all(tops) and all(any(n == "stand-in" for _, n in tree_moves([t], stand_in_cgroup)) for t in tops):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the samplers were not all running with their stand-in after {timeout_s:g} s")
        time.sleep(0.1)
    for _ in range(2):
        for pid, name in tree_moves(tops, stand_in_cgroup):
            meter.move(pid, name)


def container_cpu_seconds(container: str) -> float:
    """The trainer container's CPU seconds so far (cgroup v1 cpuacct, or v2 cpu.stat)."""
    for path in (f"/sys/fs/cgroup/cpuacct/docker/{container}/cpuacct.usage",
                 f"/sys/fs/cgroup/cpu,cpuacct/docker/{container}/cpuacct.usage"):
        if Path(path).exists():
            return int(Path(path).read_text()) / 1e9
    stat = Path(f"/sys/fs/cgroup/system.slice/docker-{container}.scope/cpu.stat")
    return int(stat.read_text().split()[1]) / 1e6 if stat.exists() else 0.0


def cpu_now(meter: Meter, container: str = "") -> dict:
    return {"sampler_cpu_s": meter.cpu_s("sampler"), "stand_in_cpu_s": meter.cpu_s("stand-in"),
            "container_cpu_s": container_cpu_seconds(container) if container else 0.0, "on_s": time.monotonic()}


# --- 1. overhead, 2. idle GPU to warning ------------------------------------------------------------
def overhead(group, plan, watcher: Watcher, run_dir: Path, container: str, meter: Meter) -> dict:
    """Images/s per epoch with and without the sampler, blocks of BLOCK epochs in ORDER for OVERHEAD_S;
    and what the sampler, the stand-in and the container used in the sampled blocks' kept epochs."""
    kept = {"blocks": [], "sampler_cpu_s": 0.0, "stand_in_cpu_s": 0.0, "container_cpu_s": 0.0, "on_s": 0.0}
    done, end = watcher.wait_epoch(0), time.monotonic() + OVERHEAD_S
    while time.monotonic() < end or len(kept["blocks"]) % len(ORDER):
        on = ORDER[len(kept["blocks"]) % len(ORDER)]
        session = telemetry.Session(group, plan, run_dir, 1.0) if on else None
        if session:
            session.start()
            samplers_into(meter, session)
        first = done
        done = watcher.wait_epoch(done)                    # the block's first epoch saw the switch
        before = cpu_now(meter, container)
        for _ in range(BLOCK - 1):
            done = watcher.wait_epoch(done)
        after = cpu_now(meter, container)
        kept["blocks"].append({"on": on, "images_per_s": [watcher.epochs[e] for e in range(first + 2, done + 1)]})
        if session:
            for key in after:
                kept[key] += after[key] - before[key]
            session.stop()
    return kept


def idle_to_warning(group, plan, watcher: Watcher, run_dir: Path, stand_in: Path) -> tuple[list[float], float]:
    """Seconds from the stand-in's GPUs going idle to the launcher's warning, IDLE_REPEATS times;
    and the rule's window (the default telemetry.warn_after_s)."""
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

    stop = threading.Event()
    threading.Thread(target=watch_warnings, daemon=True).start()
    latencies = []
    try:
        for _ in range(IDLE_REPEATS):
            latency = one_idle(watcher, session, stand_in, first_after)
            if latency is not None:
                latencies.append(latency)
    finally:
        stop.set()
        session.stop()
    return latencies, session.span_s


def one_idle(watcher: Watcher, session, stand_in: Path, first_after: dict) -> float | None:
    nvidia_smi.set_mode(stand_in, "good", 90)
    settle = time.monotonic() + SETTLE_S
    while time.monotonic() < settle:
        watcher.poll(session.observer)
        time.sleep(0.5)
    before = len(first_after)
    nvidia_smi.set_mode(stand_in, "good", 2)
    idle_at = time.monotonic()
    while len(first_after) == before and time.monotonic() - idle_at < 180:
        watcher.poll(session.observer)
        time.sleep(0.5)
    return first_after[before] - idle_at if len(first_after) > before else None


# --- 3. the launcher with 1 and 8 hosts -----------------------------------------------------------
def launcher_cost(tmp: Path, hosts_n: int, tag: str, meter: Meter) -> dict:
    """Launcher CPU seconds per second and memory: `hosts_n` hosts sampled, against them held idle."""
    (tmp / "ssh").mkdir(parents=True)
    farm = SshdFarm(tmp / "ssh")
    try:
        cluster = start_hosts(farm, tmp, hosts_n, tag)
        plan = complete(make(cluster), {}, {h.name: "all" for h in cluster.hosts})
        with Group(cluster, RecordingReporter()) as group:
            group.run("connect", lambda h, c: c.run(["true"])).raise_if_failed()
            return {mode: measure_launcher(group, plan, tmp / f"run{hosts_n}", meter, mode == "sampling")
                    for mode in ("idle", "sampling")}
    finally:
        farm.stop()


def start_hosts(farm: SshdFarm, tmp: Path, hosts_n: int, tag: str):
    """`hosts_n` sshd hosts, each with a stand-in nvidia-smi of 8 GPUs on its PATH: their cluster."""
    ports = free_ports(2 * hosts_n)
    hosts = []
    for i in range(hosts_n):
        folder = tmp / f"b{i}"
        nvidia_smi.install(folder, util=50, gpus=8)
        hosts.append(farm.start(f"{tag}x{i}", ports[2 * i], ports[2 * i + 1],
                                env={"PATH": f"{folder}:{os.environ['PATH']}"}))
    farm.known_hosts()
    return load_cluster(write_inventory(farm, tmp / f"{tag}.yaml", tag, hosts, train={}))


def measure_launcher(group, plan, run_dir: Path, meter: Meter, sampling: bool) -> dict:
    hosts_n = len(plan.cluster.hosts)
    session = telemetry.Session(group, plan, run_dir, 1.0) if sampling else None
    if session:
        session.start()
        samplers_into(meter, session)
    time.sleep(WARM_S)
    rss0, cpu0, host0 = rss_kb(), time.process_time(), cpu_now(meter)
    samples0 = sum(session.counts.values()) if session else 0
    time.sleep(LAUNCHER_S)
    cpu, rss, host = time.process_time() - cpu0, rss_kb(), cpu_now(meter)
    elapsed = host["on_s"] - host0["on_s"]
    samples = sum(session.counts.values()) - samples0 if session else 0
    if session:
        session.stop()
        if samples < 0.5 * hosts_n * LAUNCHER_S:          # a bench of samplers that did not sample proves nothing
            raise SystemExit(f"{hosts_n} host(s) gave {samples} samples in {LAUNCHER_S:g} s: "
                             f"{group.reporter.warnings[-3:]}")
    per_host = {key: (host[key] - host0[key]) / elapsed / hosts_n if session else 0.0
                for key in ("sampler_cpu_s", "stand_in_cpu_s")}
    return {"cpu_per_s": cpu / elapsed, "rss_mb": rss / 1024, "rss_growth_mb": (rss - rss0) / 1024,
            "samples_per_s": samples / elapsed, "host_sampler_cpu_per_s": per_host["sampler_cpu_s"],
            "host_stand_in_cpu_per_s": per_host["stand_in_cpu_s"]}


def memory_over_time(tmp: Path, hosts_n: int, minutes: int) -> list[float]:
    """The launcher's resident memory (MB) each 30 s while `hosts_n` hosts are sampled for `minutes`."""
    (tmp / "ssh").mkdir(parents=True)
    farm = SshdFarm(tmp / "ssh")
    try:
        cluster = start_hosts(farm, tmp, hosts_n, "long")
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


# --- running the parts ------------------------------------------------------------------------------
def main(repeats: int, parts: list[str]) -> None:
    """The parts asked for (launcher, memory, training), in that order, into the results of the parts run before."""
    out = REPO / "docs" / "telemetry_bench.json"
    results: dict = json.loads(out.read_text()) if out.exists() else {}
    results.update({"machine": machine()})
    results.setdefault("load", {})
    results.setdefault("repeats", {})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))      # so that every host and cgroup goes on the way out
    with tempfile.TemporaryDirectory() as tmp_name, Meter(CGROUPS) as meter:
        tmp = Path(tmp_name)
        for part in [p for p in parts if p in PARTS]:             # in the order asked for
            results["load"][part] = load()
            results["repeats"][part] = repeats
            results.update(PARTS[part](tmp / part, repeats, meter))
            results["load"][f"{part}_end"] = load()
            out.write_text(json.dumps(results, indent=1))
    write_section("telemetry", report(results))


def launcher_part(tmp: Path, repeats: int, meter: Meter) -> dict:
    return {"launcher": {str(n): [launcher_cost(tmp / f"c{n}-{r}", n, f"r{r}m{n}", meter) for r in range(repeats)]
                         for n in (1, 8)}}


def memory_part(tmp: Path, repeats: int, meter: Meter) -> dict:
    return {"memory_mb": memory_over_time(tmp, 8, 5)}


def training_part(tmp: Path, repeats: int, meter: Meter) -> dict:
    (tmp / "ssh").mkdir(parents=True)
    farm = SshdFarm(tmp / "ssh")
    try:
        return training_parts(farm, tmp, build_image() and "tfcompose-trainer:bench", meter)
    finally:
        farm.stop()


PARTS = {"launcher": launcher_part, "memory": memory_part, "training": training_part}


def training_parts(farm: SshdFarm, tmp: Path, image: str, meter: Meter) -> dict:
    (tmp / "run").mkdir()
    folder = tmp / "hostbin"
    stand_in = nvidia_smi.install(folder, util=90, gpus=2)
    port, tf_port = free_ports(2)
    host = farm.start("t0", port, tf_port, env={"PATH": f"{folder}:{os.environ['PATH']}"})
    farm.known_hosts()
    inv = write_inventory(farm, tmp / "train.yaml", "tbench", [host], train=TRAIN, image=image)
    cluster = load_cluster(inv)
    cli = [sys.executable, "-m", "launcher"]
    try:
        up = subprocess.run([*cli, "up", "-i", str(inv)], cwd=REPO, capture_output=True, text=True)
        if up.returncode != 0:
            raise SystemExit(up.stdout + up.stderr)
        cid = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", "label=tfcompose.cluster=tbench"],
                             capture_output=True, text=True).stdout.split()[0]
        subprocess.run(["docker", "update", "--cpus", "1", cid], check=True, capture_output=True)
        run = dict(line.split("=", 1) for line in Path(cluster.hosts[0].bundle_dir, RUN_FILE).read_text().split())
        plan = named(complete(make(cluster), {}, {host.name: [0, 1]}), run["run"])     # the run `up` started
        with Group(cluster, RecordingReporter()) as group:
            watcher = Watcher(group, plan, cluster.hosts[0])
            kept = overhead(group, plan, watcher, tmp / "run", cid, meter)
            load_mid = load()
            latencies, window = idle_to_warning(group, plan, watcher, tmp / "run", stand_in)
    finally:
        subprocess.run([*cli, "down", "-i", str(inv)], cwd=REPO, capture_output=True)
    return {"overhead": kept, "idle_to_warning_s": latencies, "idle_window_s": window, "load_training": load_mid}


# --- the section -----------------------------------------------------------------------------------
def report(r: dict) -> str:
    """B13's section from the results so far: the parts not measured yet are said to be missing."""
    repeats = max(r.get("repeats", {}).values(), default=3)
    parts = [f"""
## B13 Telemetry: its cost, an idle GPU named, the launcher with 8 hosts

{r['machine']}; `BASE_IMAGE=tf-offline-base:cpu python bench/telemetry.py {repeats}` (each part
under the machine's heavy-job lock). This machine is shared with other agents' tests and editors
(2 cores): the load average (1 min) is given with each part, and only figures within one part are
compared. Every sampler's own CPU is measured from the host side, by cgroup: the tree the launcher's
SSH command started on the host (login shell, `timeout`, the sh loop and all it runs) moved into a
cgroup v2 folder right after it starts, its `cpu.stat` read (processes that ended included); the
stand-in `nvidia-smi` (a sh script here; a real host runs the real one) into a folder of its own."""]
    parts.append(_training_text(r) if "overhead" in r else
                 "**Not measured yet**: what the sampler costs the training, and how soon an idle GPU is "
                 "named (`python bench/telemetry.py 3 training`).")
    parts.append(_launcher_text(r) if "launcher" in r else
                 "**Not measured yet**: the launcher with 1 and 8 hosts (`python bench/telemetry.py 3 launcher`).")
    parts.append(_memory_text(r) if "memory_mb" in r else
                 "**Not measured yet**: its memory over five minutes of 8 hosts (`python bench/telemetry.py 3 memory`).")
    return "\n\n".join(parts) + "\n"


def pct(x: float) -> str:
    return f"{x * 100:.2f} %"


def repetitions(blocks: list[dict], n: int) -> list[float]:
    """The overhead (1 − median sampled / median not) of each of `n` consecutive runs of whole ORDER groups."""
    groups = [blocks[i:i + len(ORDER)] for i in range(0, len(blocks) - len(ORDER) + 1, len(ORDER))]
    n = min(n, len(groups))
    chunks = [[b for g in groups[k * len(groups) // n:(k + 1) * len(groups) // n] for b in g] for k in range(n)]
    return [overhead_of(chunk) for chunk in chunks]


def overhead_of(blocks: list[dict]) -> float:
    on = [x for b in blocks if b["on"] for x in b["images_per_s"]]
    off = [x for b in blocks if not b["on"] for x in b["images_per_s"]]
    return 1 - statistics.median(on) / statistics.median(off)


def noise(blocks: list[dict], seconds: float, spread_goal: float = 0.01, repeats: int = 3) -> str:
    """What the machine's noise lets this design tell: each ON-OFF-OFF-ON group's own overhead, their
    mean and its standard error, and how many groups a repetition would need for `repeats`
    repetitions to agree within `spread_goal` (the expected range of 3 normal draws is 1.69 σ)."""
    groups = [blocks[i:i + len(ORDER)] for i in range(0, len(blocks) - len(ORDER) + 1, len(ORDER))]
    each = [overhead_of(g) for g in groups]
    if len(each) < 3:
        return ""
    sd = statistics.stdev(each)
    se = sd / math.sqrt(len(each))
    needed = math.ceil((1.69 * sd / spread_goal) ** 2)
    hours = repeats * needed * seconds / len(groups) / 3600
    return (f" The noise is the machine's, group by group: the {len(each)} groups' own overheads have a standard "
            f"deviation of {pct(sd)}; their mean, **{pct(statistics.mean(each))} ± {pct(se)}** (standard error), "
            f"puts the overhead within ±{pct(1.96 * se + abs(statistics.mean(each)))} of nothing (95 %). "
            f"{repeats} repetitions agreeing within {pct(spread_goal)} would need about {needed} groups each, "
            f"{hours:.1f} h of blocks at this pace, not the {seconds / 60:.0f} min run here.")


def _training_text(r: dict) -> str:
    o = r["overhead"]
    on = [x for b in o["blocks"] if b["on"] for x in b["images_per_s"]]
    off = [x for b in o["blocks"] if not b["on"] for x in b["images_per_s"]]
    (m_on, s_on), (m_off, s_off) = summary(on), summary(off)
    reps = repetitions(o["blocks"], r["repeats"]["training"])
    m_rep, s_rep = summary(reps)
    verdict = (f"the {len(reps)} repetitions agree within {pct(s_rep)}, under the 1 % asked for"
               if s_rep < 0.01 else
               f"the {len(reps)} repetitions' spread, {pct(s_rep)}, is not under the 1 % asked for: this run "
               f"cannot tell an overhead smaller than that from the machine's own noise")
    lat, window = r["idle_to_warning_s"], r["idle_window_s"]
    idle = (f"the warning came after **{statistics.median(lat):.1f} s** (median of {len(lat)}; spread "
            f"{max(lat) - min(lat):.1f} s, {min(lat):.1f}–{max(lat):.1f} s)" if lat else "no warning came within 180 s")
    return f"""**What the sampler costs the training** (load {r['load']['training']:.1f} at the start,
{r['load_training']:.1f} after the overhead blocks; one sshd host on loopback, `small_cnn`, one worker held
to 1 CPU, sampled every 1 s with a stand-in nvidia-smi of 2 GPUs; {len(o['blocks'])} blocks of {BLOCK} epochs in
the order sampled, not, not, sampled, the first epoch of each block dropped: {len(on)} epochs sampled and
{len(off)} not). The sampler's own CPU was **{pct(o['sampler_cpu_s'] / o['on_s'])} of one core**
({o['sampler_cpu_s']:.2f} CPU-s in {o['on_s']:.0f} s sampled), **{pct(o['sampler_cpu_s'] / o['container_cpu_s'])}**
of the CPU the training container used meanwhile (the stand-in nvidia-smi used {pct(o['stand_in_cpu_s'] / o['on_s'])}
of one core beside it). Training images/s per epoch, median (spread): {m_on:.0f} ({s_on:.0f}) sampled,
{m_off:.0f} ({s_off:.0f}) not. The overhead, 1 − sampled / not (negative: faster when sampled), over the {len(reps)} repetitions (the
blocks cut into {len(reps)} consecutive runs of whole groups): median **{pct(m_rep)}**, spread {pct(s_rep)}
({', '.join(pct(x) for x in reps)}); over all epochs {pct(overhead_of(o['blocks']))}: {verdict}.{noise(o['blocks'], OVERHEAD_S) if s_rep >= 0.01 else ""}

**From a GPU going idle to the warning** (load {r['load'].get('training_end', float('nan')):.1f} at the end):
{len(lat)} times, in the same run, the stand-in's utilisation written from 90 % to 2 % while the host
trained; the rule's window was the default `telemetry.warn_after_s`, {window:g} s: {idle}. The rule
needs {window:g} s of samples under 10 %, so {window:g} s is its floor; the rest is the stand-in's period
(1 s), the sampler's (1 s) and the judge's pace (1 s)."""


def _launcher_text(r: dict) -> str:
    rows = []
    for n, runs in r["launcher"].items():
        for mode in ("idle", "sampling"):
            cpu = [x[mode]["cpu_per_s"] * 100 for x in runs]
            rss = [x[mode]["rss_mb"] for x in runs]
            samples = [x[mode]["samples_per_s"] for x in runs]
            host = [(x[mode]["host_sampler_cpu_per_s"] * 100, x[mode]["host_stand_in_cpu_per_s"] * 100) for x in runs]
            sampler, stand_in = summary([h[0] for h in host]), summary([h[1] for h in host])
            rows.append(f"| {n} | {mode} | {statistics.median(cpu):.2f} ({max(cpu) - min(cpu):.2f}) | "
                        f"{statistics.median(rss):.0f} | {statistics.median(samples):.1f} | "
                        + (f"{sampler[0]:.2f} ({sampler[1]:.2f}) | {stand_in[0]:.2f} |" if mode == "sampling" else "| |"))
    return f"""**The launcher with 1 and 8 hosts sampling** (load {r['load']['launcher']:.1f} at the start,
{r['load']['launcher_end']:.1f} at the end; sshd hosts on loopback, stand-ins of 8 GPUs each, period 1 s;
{r['repeats']['launcher']} repetitions of {LAUNCHER_S:g} s after {WARM_S:g} s to start; "idle": the same connections
held, no sampler): the launcher's CPU (% of one core, all its threads; spread in brackets), its
resident memory, the samples it took, and on each host the sampler's own CPU and the stand-in
nvidia-smi's (% of one core, by cgroup).

| hosts | launcher | CPU % (spread) | RSS MB | samples/s | sampler CPU % per host (spread) | stand-in CPU % per host |
|---:|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}"""


def _memory_text(r: dict) -> str:
    memory = r["memory_mb"]
    keep = max(rules.SPAN_S, rules.SWAP_SPAN_S) + 2 * rules.MAX_GAP_S
    late = memory[3:]                                 # from 90 s: what the rules keep per host has filled
    growth, minutes = late[-1] - late[0], (len(late) - 1) / 2
    if abs(growth) <= 0.1:
        verdict = "after the first 90 s it did not grow (within 0.1 MB): bounded, over these five minutes"
    else:
        verdict = (f"it rose {late[0] - memory[0]:.1f} MB in the first 90 s, then {growth:+.1f} MB in the next {minutes:g} min "
                   f"({growth / minutes:+.2f} MB a minute): these five minutes do not show whether that stops")
    return f"""**Its memory over five minutes** (load {r['load']['memory']:.1f} at the start, {r['load']['memory_end']:.1f}
at the end): the launcher's resident memory every 30 s while 8 hosts were sampled (MB):
{', '.join(f'{m:.1f}' for m in memory)}. Each host's last {keep:g} s of samples are kept for the rules
(the window, default {rules.SPAN_S:g} s, and two gaps); {verdict}."""


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:       # re-render docs/benchmarks.md from the last raw results
        write_section("telemetry", report(json.loads((REPO / "docs" / "telemetry_bench.json").read_text())))
        raise SystemExit(0)
    asked = sys.argv[2].split(",") if len(sys.argv) > 2 else ["launcher", "memory", "training"]
    if set(asked) - set(PARTS):
        raise SystemExit(f"bench/telemetry.py: unknown part {', '.join(sorted(set(asked) - set(PARTS)))}; "
                         f"expected some of {','.join(PARTS)}")
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, asked)
