"""B4 start-up: from `docker compose up` to the first training step of the two-container
simulation, split by the trainer's own log lines (timestamped by Docker) and the containers'
start times.

    BASE_IMAGE=tf-offline-base:cpu python bench/startup.py [REPEATS]     (5 by default; root drops the page cache)
    python bench/startup.py --report          # re-render docs from docs/startup.json

Runs in a scratch project directory, so the repository's runs/local is left alone.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from common import DOC, IMAGE, REPO, build_image, machine, summary, write_section  # noqa: E402

PROJECT = "tfc-bench-startup"
RAW = DOC.parent / "startup.json"
# Stage → the log line that ends it (None: the container's StartedAt).
MARKS = {"container start": None, "Python + config": "importing TensorFlow", "TensorFlow import": "joining a cluster",
         "cluster join": "cluster ready", "data": "] data:", "first step": "first training step done"}


def instant(stamp: str) -> float:
    """Docker's RFC 3339 nano timestamps → POSIX seconds (microsecond precision is plenty)."""
    head, _, frac = stamp.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()


def compose(project_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "TFC_IMAGE": IMAGE, "EPOCHS": "1", "CANDIDATES": "small_cnn"}
    return subprocess.run(["docker", "compose", "--ansi", "never", "-f", str(REPO / "compose.yaml"), "--project-directory", str(project_dir),
                           "-p", PROJECT, *args], env=env, capture_output=True, text=True, check=check)


def marks_of(project_dir: Path, service: str, t0: float) -> dict[str, float]:
    """Seconds from `docker compose up` to the end of each stage, for one container."""
    cid = compose(project_dir, "ps", "-aq", service).stdout.strip()
    started = json.loads(subprocess.run(["docker", "inspect", cid], capture_output=True, text=True, check=True).stdout)
    found = {"container start": instant(started[0]["State"]["StartedAt"]) - t0}
    for line in compose(project_dir, "logs", "--timestamps", "--no-color", "--no-log-prefix", service).stdout.splitlines():
        stamp, _, text = line.removeprefix("\x1b[2K").partition(" ")  # an erase-line code compose may emit
        for stage, needle in MARKS.items():
            if needle and needle in text and stage not in found:
                found[stage] = instant(stamp) - t0
    missing = [s for s in MARKS if s not in found]
    if missing:
        raise SystemExit(f"{service}: no log line for {missing}; the log ends:\n{compose(project_dir, 'logs', service).stdout[-1500:]}")
    return found


def one_run(project_dir: Path) -> dict:
    compose(project_dir, "down", "--remove-orphans", check=False)
    t0 = dt.datetime.now(dt.timezone.utc).timestamp()
    proc = compose(project_dir, "up", "--no-build", "--exit-code-from", "chief", check=False)
    try:
        if proc.returncode != 0:
            raise SystemExit(f"the simulation failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-1000:]}")
        return {service: marks_of(project_dir, service, t0) for service in ("chief", "worker")}
    finally:
        compose(project_dir, "down", "--remove-orphans", check=False)


def drop_page_cache() -> bool:
    """Forget cached files (needs root), so the next start reads the image's files from disk, as after a reboot."""
    subprocess.run(["sync"])
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def main(repeats: int) -> None:
    build_image()
    project_dir = Path(tempfile.mkdtemp(prefix="tfc-startup-"))
    (project_dir / "compose").symlink_to(REPO / "compose")
    (project_dir / "runs").mkdir()
    runs: dict[str, list] = {"warm": [], "cold": []}
    for rep in range(repeats):
        for kind in ("cold", "warm"):  # a cold start right after dropping the page cache, then a warm one
            if kind == "cold" and not drop_page_cache():
                continue
            runs[kind].append(one_run(project_dir))
            print(f"rep {rep + 1}/{repeats} {kind}: first step at {runs[kind][-1]['chief']['first step']:.1f} s", flush=True)
    RAW.write_text(json.dumps({"repeats": repeats, "machine": machine(), "runs": runs}, indent=1) + "\n")
    report()


def durations(marks: dict[str, float]) -> dict[str, float]:
    ends = [marks[s] for s in MARKS]
    return {stage: end - start for stage, start, end in zip(MARKS, [0.0] + ends, ends)}


def stage_medians(runs: list[dict], service: str) -> dict[str, tuple[float, float]]:
    return {stage: summary([durations(r[service])[stage] for r in runs]) for stage in MARKS}


def report() -> None:
    doc = json.loads(RAW.read_text())
    runs = {kind: r for kind, r in doc["runs"].items() if r}
    stats = {(kind, svc): stage_medians(r, svc) for kind, r in runs.items() for svc in ("chief", "worker")}
    kinds = list(runs)
    rows = ["| stage (ends at) | " + " | ".join(f"{k}: chief median s | spread s" for k in kinds) + " |",
            "|---|" + "---:|---:|" * len(kinds)]
    for stage, needle in MARKS.items():
        ends = f"`{needle.strip('] ')}` line" if needle else "container's StartedAt"
        rows.append(f"| {stage} ({ends}) | " + " | ".join(
            "{:.2f} | {:.2f}".format(*stats[(k, "chief")][stage]) for k in kinds) + " |")
    totals = {k: summary([r["chief"]["first step"] for r in runs[k]]) for k in kinds}
    rows.append("| **`docker compose up` → first step done** | " + " | ".join(
        f"**{totals[k][0]:.2f}** | {totals[k][1]:.2f}" for k in kinds) + " |")
    plot(stats)
    warm = {key(stage): stats[("warm", "chief")][stage][0] for stage in MARKS}
    cold = totals.get("cold", (float("nan"), 0))[0]
    write_section("startup", ANALYSIS.format(machine=doc["machine"], repeats=doc["repeats"], table="\n".join(rows),
                                             total=totals["warm"][0], cold=cold, **warm))


def key(stage: str) -> str:
    """A stage's name as a format field: "Python + config" → python_config."""
    return re.sub(r"\W+", "_", stage.lower())


def plot(stats: dict) -> None:
    bars = sorted(stats, key=lambda ks: (ks[0] != "cold", ks[1] != "worker"))
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.5 * len(bars)))
    for row, (kind, svc) in enumerate(bars):
        left = 0.0
        for i, stage in enumerate(MARKS):
            width = stats[(kind, svc)][stage][0]
            ax.barh(row, width, left=left, color=f"C{i}", label=stage if row == 0 else None)
            left += width
    ax.set_yticks(range(len(bars)), [f"{svc}, {kind}" for kind, svc in bars])
    ax.set_xlabel("seconds after `docker compose up` (medians)")
    ax.legend(fontsize=8, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.32), frameon=False)
    ax.set_title("Simulation start-up: where the seconds go")
    fig.tight_layout()
    fig.savefig(DOC.parent / "startup.png", dpi=110)


ANALYSIS = """
## B4 start-up: `docker compose up` to the first training step

{machine}; {repeats} pairs of runs of the two-container simulation (`compose.yaml`, image already
built, `EPOCHS=1 CANDIDATES=small_cnn`): a **cold** start right after dropping the page cache (as
after a reboot: the image's files come from disk), then a **warm** one. Each stage ends at a line
the trainer prints (timestamped by Docker, `docker compose logs --timestamps`) or, for the first,
at the container's `StartedAt`; the chief's stage lengths are shown (the worker's are within
0.05 s, see `startup.json`); seconds from the moment `docker compose up` was run.

{table}

Warm, the first training step is done **{total:.1f} s** after `docker compose up` (cold: {cold:.1f} s).
In order (warm medians):

- **container start** ({container_start:.2f} s): compose creates the network and both containers,
  then starts them. Nothing of ours runs yet.
- **Python + config** ({python_config:.2f} s): the entrypoint, Python, and the trainer reading its
  config and TF_CONFIG, which it checks *before* importing TensorFlow, so that bad input fails in
  this fraction of a second with one line instead of after the import.
- **TensorFlow import** ({tensorflow_import:.2f} s): `import tensorflow` and tf_keras: the largest
  cost, TensorFlow's own, and the one that grows on a cold start (files read from disk).
  Both containers import at once, each limited to one CPU (`cpus: 1.0`).
- **cluster join** ({cluster_join:.2f} s): MultiWorkerMirroredStrategy's constructor. It is bimodal:
  0.05–0.1 s, or about 1 s more in some runs (see the spread), although both peers finished
  importing within a few hundredths of a second of each other. That is consistent with gRPC's
  reconnect back-off (1 s initially) after a first connection attempt that reached the peer
  before its server listened; the wait is inside TensorFlow's channels, and no setting of ours
  shortens it.
- **data** ({data:.2f} s): generating the simulation's images in memory and building the pipeline.
- **first step** ({first_step:.2f} s): building and compiling the model, then fit's first step:
  tracing the training function and the first collective all-reduce (the trainer logs
  `first training step done`). Later steps take milliseconds.

Start-up is a few seconds against minutes of training, so nothing here is worth trading
anything for; what users do hit is bad input, and that fails before the import.

![start-up](startup.png)
"""


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        report()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
