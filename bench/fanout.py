"""B2 SSH fan-out: wall time of `up` (preflight → push → image → start, until every container
runs) against 1, 2, 4 and 8 sshd hosts on loopback, all hosts at once versus `--parallel 1`,
then the second `up` with nothing changed: its time and the bytes it ships.

    BASE_IMAGE=tf-offline-base:cpu python bench/fanout.py [REPEATS]
    python bench/fanout.py --report          # re-render docs from docs/fanout.json

The containers run an idle `run:` script, so training is not in the numbers.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from common import DOC, IMAGE, build_image, busy_cpu_seconds, machine, summary, write_section  # noqa: E402
from support.common import free_ports  # noqa: E402
from support.sshd import SshdFarm, write_inventory  # noqa: E402

from launcher.inventory.load import load_cluster  # noqa: E402
from launcher.stages import down, status, up  # noqa: E402

SIZES = (1, 2, 4, 8)
MODES = {"all at once": None, "--parallel 1": 1}
STAGES = ("preflight", "push", "image", "start")
RAW = DOC.parent / "fanout.json"


class StageClock:
    """A Reporter that notes when the first host enters each stage (stages are barriers across hosts)."""

    def __init__(self):
        self.t0, self.first, self._lock = time.monotonic(), {}, threading.Lock()

    def stage(self, host: str, stage: str, detail: str = "") -> None:
        with self._lock:
            self.first.setdefault(stage, time.monotonic() - self.t0)

    def warn(self, host, message) -> None:
        pass

    def transfer(self, host, what, done, total, elapsed_s) -> None:
        pass

    def local(self, what, done, total, elapsed_s) -> None:
        pass

    def split(self, total: float) -> dict[str, float]:
        marks = [0.0] + [self.first[s] for s in ("push", "image", "start")] + [self.first.get("running", total)]
        return {name: round(marks[i + 1] - marks[i], 3) for i, name in enumerate(STAGES)}


def timed_up(cluster, parallel) -> dict:
    cpu0, own0 = busy_cpu_seconds(), time.process_time()
    clock = StageClock()
    report = up.up(cluster, clock, parallel)
    total = time.monotonic() - clock.t0
    cpu, own = busy_cpu_seconds() - cpu0, time.process_time() - own0
    pushed = sum(report.bytes_pushed.values())
    shipped = sum(o["bytes_sent"] for o in report.images.values())
    return {"seconds": round(total, 3), "stages": clock.split(total), "cpu_busy_s": round(cpu, 2),
            "launcher_cpu_s": round(own, 2), "bytes_pushed": pushed, "bytes_image": shipped,
            "started": sorted(set(report.started.values()))}


def one_case(farm: SshdFarm, root: Path, hosts, parallel, base: str) -> dict:
    inv = write_inventory(farm, root / "inv.yaml", f"fan-{uuid.uuid4().hex[:6]}", hosts, image=IMAGE, base_image=base,
                          run={"command": ["python3", "idle.py"], "code_dir": str(root / "code")})
    cluster = load_cluster(inv)
    try:
        first = timed_up(cluster, parallel)
        states = {st.host: st.state for st in status.status(cluster)}
        if set(states.values()) != {"running"}:
            raise SystemExit(f"after up, not every container runs: {states}")
        second = timed_up(cluster, parallel)
    finally:
        down.down(cluster, with_purge=True)
    return {"first": first, "second": second}


def main(repeats: int) -> None:
    base = build_image()
    root = Path(tempfile.mkdtemp(prefix="tfc-fanout-"))
    (root / "ssh").mkdir()
    (root / "code").mkdir()
    # Idle, and leave at once on SIGTERM so `down` is quick.
    (root / "code" / "idle.py").write_text("import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
                                           "print('idle', flush=True)\ntime.sleep(3600)\n")
    farm = SshdFarm(root / "ssh")
    ports = free_ports(2 * max(SIZES))
    hosts = [farm.start(f"h{i}", ports[2 * i], ports[2 * i + 1]) for i in range(max(SIZES))]
    farm.known_hosts()
    results: dict[str, dict[str, list]] = {mode: {str(n): [] for n in SIZES} for mode in MODES}
    try:
        one_case(farm, root, hosts[:1], None, base)  # warm-up: the code layer is built once, then cached
        for rep in range(repeats):
            for n in SIZES:
                for mode, parallel in MODES.items():  # interleaved: drift on a shared machine hits every case
                    if n == 1 and parallel == 1:
                        continue  # the same thing as all-at-once with one host
                    results[mode][str(n)].append(one_case(farm, root, hosts[:n], parallel, base))
                    print(f"rep {rep + 1}/{repeats} hosts={n} {mode}: "
                          f"{results[mode][str(n)][-1]['first']['seconds']:.1f} s", flush=True)
    finally:
        farm.stop()
    results["--parallel 1"]["1"] = results["all at once"]["1"]
    RAW.write_text(json.dumps({"repeats": repeats, "machine": machine(), "results": results}, indent=1) + "\n")
    report()


def median_of(runs: list[dict], which: str, key: str = "seconds") -> float:
    return summary([r[which][key] for r in runs])[0]


def table(results: dict) -> str:
    rows = ["| hosts | mode | first `up` median s | spread s | machine CPU s | launcher CPU s | second `up` median s "
            "| second `up` bytes shipped |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for n in SIZES:
        for mode in MODES:
            if n == 1 and mode != "all at once":
                continue
            runs = results[mode][str(n)]
            med, spread = summary([r["first"]["seconds"] for r in runs])
            shipped = max(r["second"]["bytes_pushed"] + r["second"]["bytes_image"] for r in runs)
            rows.append(f"| {n} | {mode} | {med:.2f} | {spread:.2f} | {median_of(runs, 'first', 'cpu_busy_s'):.2f} | "
                        f"{median_of(runs, 'first', 'launcher_cpu_s'):.2f} | {median_of(runs, 'second'):.2f} | {shipped} |")
    return "\n".join(rows)


def stage_table(results: dict) -> str:
    rows = ["| hosts | " + " | ".join(STAGES) + " |", "|---:|" + "---:|" * len(STAGES)]
    for n in SIZES:
        runs = results["all at once"][str(n)]
        cells = [f"{summary([r['first']['stages'][s] for r in runs])[0]:.2f}" for s in STAGES]
        rows.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def plot(results: dict) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for mode in MODES:
        left.plot(SIZES, [median_of(results[mode][str(n)], "first") for n in SIZES], marker="o", label=f"first up, {mode}")
    left.plot(SIZES, [median_of(results["all at once"][str(n)], "second") for n in SIZES], marker="s", ls="--",
              label="second up, all at once")
    cores = os.cpu_count() or 1
    left.plot(SIZES, [median_of(results["all at once"][str(n)], "first", "cpu_busy_s") / cores for n in SIZES], ls=":",
              color="grey", label=f"CPU floor: machine CPU s / {cores} cores")
    left.set_xlabel("hosts")
    left.set_ylabel("seconds until every container runs")
    left.set_xticks(SIZES)
    left.legend(fontsize=8)
    bottom = [0.0] * len(SIZES)
    for stage in STAGES:
        heights = [summary([r["first"]["stages"][stage] for r in results["all at once"][str(n)]])[0] for n in SIZES]
        right.bar([str(n) for n in SIZES], heights, bottom=bottom, label=stage)
        bottom = [b + h for b, h in zip(bottom, heights)]
    right.set_xlabel("hosts (all at once)")
    right.set_ylabel("seconds, first up")
    right.legend(fontsize=8)
    fig.suptitle("tfcompose up over SSH: sshd hosts on loopback, one Docker engine")
    fig.tight_layout()
    fig.savefig(DOC.parent / "fanout.png", dpi=110)


def report() -> None:
    doc = json.loads(RAW.read_text())
    results, repeats = doc["results"], doc["repeats"]
    plot(results)
    par = {n: results["all at once"][str(n)] for n in SIZES}
    one, eight = median_of(par[1], "first"), median_of(par[8], "first")
    cpu_one, cpu_eight = median_of(par[1], "first", "cpu_busy_s"), median_of(par[8], "first", "cpu_busy_s")
    cores = os.cpu_count() or 1
    second_bytes = max(r["second"]["bytes_pushed"] + r["second"]["bytes_image"]
                       for mode in MODES for runs in results[mode].values() for r in runs)
    write_section("fanout", ANALYSIS.format(
        machine=doc["machine"], repeats=repeats, table=table(results), stages=stage_table(results),
        one=one, eight=eight, ratio=eight / one, serial_ratio=median_of(results["--parallel 1"]["8"], "first") / one,
        second_bytes=second_bytes, first_push=summary([r["first"]["bytes_pushed"] for r in par[1]])[0],
        cpu_per_host=cpu_eight / 8, cpu_one=cpu_one, floor=cpu_eight / cores,
        floor_ratio=cpu_eight / cores / one, own=median_of(par[8], "first", "launcher_cpu_s"), cores=cores))


ANALYSIS = """
## B2 SSH fan-out: `up` on 1, 2, 4 and 8 hosts

*Loopback figures: every "host" shares this machine's cores and one Docker engine, with no network in
between. For what a real network does with many hosts (the image to 8 hosts over 100 Mbit/s links,
relayed or not), see "B2 on the LAN lab" below.*

{machine}; {repeats} repetitions, interleaved. Each "host" is a real OpenSSH `sshd` on 127.0.0.1 with its
own host key and workdir (strict host-key checking); all of them drive this machine's one Docker engine.
Timed: `tfcompose up` (the launcher's `cluster.up`) from the start of preflight until every host's
container has been started (checked afterwards with `status`: all `running`), with a fresh cluster
name each time, so every first `up` pushes its bundle. The containers run an idle `run:` script:
training is not in the numbers. Then the second `up` of the same inventory, nothing changed.
"Machine CPU s" is what every process on the machine (sshd, shells, docker, dockerd, the launcher)
spent during the `up`, from `/proc/stat`; "launcher CPU s" is the launcher's own share.

{table}

- **The second `up` ships {second_bytes} bytes** in every run (goal 0): the host's bundle hash
  matches, so nothing is pushed; its image ID matches, so nothing is loaded; the run's containers
  exist, so nothing is started. A first `up` pushes {first_push:.0f} bytes per host (compose file,
  TF_CONFIG, config).
- **8 hosts / 1 host, all at once: {ratio:.2f}×** ({eight:.2f} s vs {one:.2f} s; goal ≤ 1.3×, not met on
  this machine); with `--parallel 1`: {serial_ratio:.2f}×.

Where the time of the first `up` goes, all hosts at once (medians, seconds; each stage ends when
the last host finishes it):

{stages}

### What was fixed, and why the goal is out of reach here

Measured earlier today with the same script, before two fixes: the first `up` took 4.7 s on one
host and 7.8 s on eight (1.66×), and the second `up` 4.4 s, of which 4 s was the `image` stage
on one host. Both were ours:

1. **Every `up` re-fetched the image's wheels.** Ship mode builds the image here before comparing
   IDs, and `docker/fetch-wheels.sh` started a container of the base image and ran `pip download`
   each time (3.6 s), although BuildKit then found every layer cached. The wheels are now reused
   while the base image's ID and the script are unchanged (`docker/wheels.stamp`); the build is
   0.25 s. One host: 4.7 → 0.95 s.
2. **Every SSH command waited on Nagle's algorithm.** paramiko does not set `TCP_NODELAY`; a short
   command's reply sat ~40 ms behind delayed ACKs (82 ms per command on loopback, 36 ms with it;
   OpenSSH sets it too). The launcher now sets it on the SSH socket. The push stage (a few small
   files over SFTP) went 0.22 → 0.10 s per host; one host: 0.95 → {one:.2f} s.

What remains grows with the host count because the eight "hosts" are not eight machines. Per host
an `up` costs about {cpu_per_host:.2f} CPU-seconds on the *remote* side (an sshd session per command,
the shells, the `docker` CLI, `docker compose up -d`, and dockerd creating a container), and the
launcher itself spends {own:.2f} CPU-seconds on all eight (paramiko on a thread per host). Here all
eight hosts' remote work lands on the same {cores} cores and one dockerd: 8 × {cpu_per_host:.2f} CPU-s / {cores} cores
= {floor:.2f} s is a floor no launcher could beat on this machine, already {floor_ratio:.1f}× the one-host
time, before dockerd's own serialisation of container creation (the `start` stage). On real hosts
each runs its share on its own CPUs and engine, and the launcher's part is what stays: the
hosts are worked on concurrently (all at once beats `--parallel 1` at every size here, even
with the shared cores), so the measured ratio is an upper bound for a LAN of real machines.

![fan-out](fanout.png)
"""


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        report()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
