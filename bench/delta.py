"""B5 ship only what changed: full archive vs layer delta, and dataset sync.

One sshd "host" on loopback whose Docker engine is a second, empty `dockerd` (its own data root),
so everything it gets really travels over SSH and is really loaded. Interleaved repetitions of:

- image, (a) one line of a `run:` script changed, (b) one line of trainer/ changed,
  (c) nothing changed: the old way (build the code image, `docker save | gzip` the whole image,
  send, `docker load`) against the delta (only the layers the host's engine lacks). The trainer
  image's own `docker buildx build` (BuildKit-cached, the same for both) is not in the times.
- dataset sync of 5,000 files: first (empty data_dir, cold caches), nothing changed, one file changed.

    BASE_IMAGE=tf-offline-base:cpu python bench/delta.py [REPEATS]
    python bench/delta.py --report          # re-render docs from docs/delta.json
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import matplotlib
import yaml
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from common import DOC, IMAGE, REPO, build_image, machine, summary, write_section  # noqa: E402
from support.common import free_ports  # noqa: E402
from support.engine import SecondEngine  # noqa: E402
from support.sshd import SshdFarm, write_inventory  # noqa: E402

from launcher import plan as plan_mod  # noqa: E402
from launcher.dataset import source as dataset_source, sync as dataset  # noqa: E402
from launcher.image import local, ship as ship_mod, stage as image_stage  # noqa: E402
from launcher.inventory.load import load_cluster  # noqa: E402
from launcher.ssh.group import Group, connect  # noqa: E402

RAW = DOC.parent / "delta.json"
FILES, CLASSES = 5000, 4
OLD_CODE_DOCKERFILE = "FROM {base}\nCOPY code/ /workspace/\nWORKDIR /workspace\nLABEL tfcompose.code=\"{code}\"\n"


def timed(fn) -> tuple[float, object]:
    t0 = time.monotonic()
    result = fn()
    return time.monotonic() - t0, result


def edit(path: Path) -> None:
    path.write_text(path.read_text() + f"# edit {uuid.uuid4().hex}\n")


# --- (a) a code edit ------------------------------------------------------------------------------
def code_delta(cluster, conn) -> dict:
    plan = plan_mod.make(cluster)
    seconds, outcome = timed(lambda: ship_mod.ship(conn, image_stage.code_shipment(plan)))
    return {"seconds": seconds, "bytes": outcome.bytes_sent, "layers": outcome.layers_sent}


def code_full(cluster, conn) -> dict:
    """What `up` did before: build the code image with Docker, save and gzip all of it, send it."""
    plan = plan_mod.make(cluster)

    def old_way():
        with tempfile.TemporaryDirectory() as ctx:
            shutil.copytree(cluster.path.parent / "code", Path(ctx) / "code")
            (Path(ctx) / "Dockerfile").write_text(OLD_CODE_DOCKERFILE.format(base=IMAGE, code=plan.code_hash))
            subprocess.run(["docker", "buildx", "build", "--load", "-t", plan.container_image, ctx], check=True,
                           capture_output=True)
            # A new image ID at every edit: the old archive cache never helped here.
            shipment = local.Shipment(plan.container_image, local.local_image_id(plan.container_image), cache=Path(ctx))
            return ship_mod.ship_full(conn, shipment, lambda *_: None, 0, "")
    seconds, outcome = timed(old_way)
    return {"seconds": seconds, "bytes": outcome.bytes_sent}


# --- (b) a trainer change -------------------------------------------------------------------------
def trainer_build(context: Path, base: str) -> str:
    edit(context / "trainer" / "__main__.py")
    for cmd in local.build_command(base, IMAGE, context):
        subprocess.run(cmd, check=True, capture_output=True)
    return local.local_image_id(IMAGE)


def trainer_delta(conn, context: Path, base: str, cache: Path) -> dict:
    image_id = trainer_build(context, base)
    seconds, outcome = timed(lambda: ship_mod.ship(conn, local.Shipment(IMAGE, image_id, cache=cache)))
    return {"seconds": seconds, "bytes": outcome.bytes_sent, "layers": outcome.layers_sent}


def trainer_full(conn, context: Path, base: str, cache: Path) -> dict:
    image_id = trainer_build(context, base)
    seconds, outcome = timed(lambda: ship_mod.ship_full(conn, local.Shipment(IMAGE, image_id, cache=cache), lambda *_: None, 0, ""))
    return {"seconds": seconds, "bytes": outcome.bytes_sent}


def unchanged(conn, cache: Path) -> dict:
    shipment = local.Shipment(IMAGE, local.local_image_id(IMAGE), cache=cache)
    seconds, outcome = timed(lambda: ship_mod.ship(conn, shipment))
    assert outcome.action == "present"
    return {"seconds": seconds, "bytes": outcome.bytes_sent}


# --- dataset sync -----------------------------------------------------------------------------------
def make_dataset(root: Path) -> None:
    rng = random.Random(0)
    for i in range(FILES):
        path = root / "train" / f"class{i % CLASSES}" / f"img_{i:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(rng.randint(1000, 3000)))


def sync_once(cluster) -> dict:
    plan = plan_mod.make(cluster)

    def run():
        source = dataset_source.source_manifest(cluster.dataset_source, cluster.path)
        with Group(cluster) as group:
            return dataset.provide(group, plan, source)
    seconds, outcomes = timed(run)
    (outcome,) = outcomes.values()
    return {"seconds": seconds, "bytes": outcome.bytes_sent, "files": outcome.files_sent}


def dataset_round(cluster, host, source: Path, cache_home: Path) -> dict:
    shutil.rmtree(host.bundle_dir, ignore_errors=True)    # the host's cache
    shutil.rmtree(host.data_dir, ignore_errors=True)
    shutil.rmtree(cache_home / "tfcompose" / "datasets", ignore_errors=True)  # this machine's cache
    first = sync_once(cluster)
    same = sync_once(cluster)
    edit_file = source / "train" / "class0" / "img_00000.png"
    edit_file.write_bytes(os.urandom(2000))
    one = sync_once(cluster)
    return {"first": first, "unchanged": same, "one file changed": one}


def main(repeats: int) -> None:
    base = build_image()
    root = Path(tempfile.mkdtemp(prefix="tfc-delta-"))
    os.environ["XDG_CACHE_HOME"] = str(root / "xdg")
    for name in ("ssh", "code", "engine"):
        (root / name).mkdir()
    (root / "code" / "train.py").write_text("print('my training script')\n")
    context = root / "context"
    for name in ("trainer", "docker"):
        shutil.copytree(REPO / name, context / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".dockerignore", context / ".dockerignore")
    make_dataset(root / "oasis")
    engine = SecondEngine(root / "engine", bridge=f"tfc-b5-{os.getpid() % 10000}").start()
    farm = SshdFarm(root / "ssh")
    port, tf_port = free_ports(2)
    host = farm.start("h1", port, tf_port, env={"DOCKER_HOST": engine.sock})
    farm.known_hosts()
    run = {"command": ["python3", "train.py"], "code_dir": str(root / "code")}
    code_cluster = load_cluster(write_inventory(farm, root / "code.yaml", "b5code", [host], image=IMAGE, base_image=base, run=run))
    data_inv = write_inventory(farm, root / "data.yaml", "b5data", [host], image=IMAGE, base_image=base,
                               train={"dataset": {"kind": "image_folder", "train_dir": "/data/train", "image_size": [32, 32]}},
                               dataset_source=str(root / "oasis"))
    doc = yaml.safe_load(data_inv.read_text())
    doc["hosts"][0]["data_dir"] = str(host.workdir / "data")
    data_inv.write_text(yaml.safe_dump(doc))
    data_cluster = load_cluster(data_inv)
    results = {k: [] for k in ("code edit, full", "code edit, delta", "trainer change, full", "trainer change, delta",
                               "nothing changed", "dataset")}
    try:
        with connect(code_cluster, code_cluster.hosts[0]) as conn:
            ship_mod.ship(conn, local.Shipment(IMAGE, local.local_image_id(IMAGE), cache=root / "xdg" / "tfcompose"))  # the host gets the image once
            for rep in range(repeats):
                results["dataset"].append(dataset_round(data_cluster, data_cluster.hosts[0], root / "oasis", root / "xdg"))
                edit(root / "code" / "train.py")
                results["code edit, full"].append(code_full(code_cluster, conn))
                edit(root / "code" / "train.py")
                results["code edit, delta"].append(code_delta(code_cluster, conn))
                results["trainer change, full"].append(trainer_full(conn, context, base, root / "xdg" / "tfcompose"))
                results["trainer change, delta"].append(trainer_delta(conn, context, base, root / "xdg" / "tfcompose"))
                results["nothing changed"].append(unchanged(conn, root / "xdg" / "tfcompose"))
                print(f"rep {rep + 1}/{repeats}: " + ", ".join(f"{k} {v[-1]['seconds']:.1f} s" for k, v in results.items()
                                                              if k != "dataset"), flush=True)
    finally:
        farm.stop()
        engine.stop()
        subprocess.run(["docker", "rmi", "-f", IMAGE], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    RAW.write_text(json.dumps({"repeats": repeats, "machine": machine(), "results": results}, indent=1) + "\n")
    report()


def med(runs: list[dict], key: str = "seconds") -> tuple[float, float]:
    return summary([r[key] for r in runs])


def image_table(results: dict) -> str:
    rows = ["| change | way | median s | spread s | bytes sent (median) | layers sent |", "|---|---|---:|---:|---:|---:|"]
    for case in ("code edit", "trainer change"):
        for way in ("full", "delta"):
            runs = results[f"{case}, {way}"]
            s, spread = med(runs)
            layers = str(int(med(runs, "layers")[0])) if way == "delta" else "all"
            rows.append(f"| {case} | {way} | {s:.2f} | {spread:.2f} | {med(runs, 'bytes')[0]:,.0f} | {layers} |")
    s, spread = med(results["nothing changed"])
    rows.append(f"| nothing changed | either | {s:.2f} | {spread:.2f} | 0 | 0 |")
    return "\n".join(rows)


def dataset_table(results: dict) -> str:
    rows = ["| sync | median s | spread s | files sent | bytes sent |", "|---|---:|---:|---:|---:|"]
    for case in ("first", "unchanged", "one file changed"):
        runs = [r[case] for r in results["dataset"]]
        s, spread = med(runs)
        rows.append(f"| {case} | {s:.2f} | {spread:.2f} | {med(runs, 'files')[0]:,.0f} | {med(runs, 'bytes')[0]:,.0f} |")
    return "\n".join(rows)


def human(n: float) -> str:
    """Bytes as a person reads them: 1.9 KB, 38 KB, 1.49 GB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit} sent"
    return f"{n:.0f} B sent"


def plot(results: dict) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    cases = ["code edit", "trainer change"]
    for offset, way in ((-0.2, "full"), (0.2, "delta")):
        left.bar([i + offset for i in range(2)], [med(results[f"{c}, {way}"])[0] for c in cases], width=0.4, label=way)
        for i, c in enumerate(cases):
            left.annotate(human(med(results[f"{c}, {way}"], "bytes")[0]), (i + offset, med(results[f"{c}, {way}"])[0]),
                          ha="center", va="bottom", fontsize=7)
    left.set_xticks(range(2), cases)
    left.set_ylabel("seconds until the host has the image")
    left.legend(fontsize=8)
    left.set_title("image: full archive vs layer delta", fontsize=9)
    kinds = ["first", "unchanged", "one file changed"]
    right.bar(kinds, [med([r[k] for r in results["dataset"]])[0] for k in kinds], color="tab:green")
    right.set_ylabel("seconds (sync + verify)")
    right.set_title(f"dataset sync, {FILES:,} files", fontsize=9)
    fig.tight_layout()
    fig.savefig(DOC.parent / "delta.png", dpi=110)


def report() -> None:
    doc = json.loads(RAW.read_text())
    results = doc["results"]
    plot(results)
    ratio = {c: med(results[f"{c}, full"])[0] / med(results[f"{c}, delta"])[0] for c in ("code edit", "trainer change")}
    write_section("delta", TEXT.format(machine=doc["machine"], repeats=doc["repeats"], images=image_table(results),
                                       datasets=dataset_table(results), code=ratio["code edit"], trainer=ratio["trainer change"],
                                       files=FILES))


TEXT = """
## B5 Ship only what changed: layer deltas and dataset sync

{machine}; {repeats} repetitions, interleaved. One sshd "host" on loopback whose Docker engine is a
second `dockerd` with its own data root, so every byte it gets travels over SSH and is loaded by a
real engine. `python bench/delta.py` (raw figures in `docs/delta.json`).

{images}

The full way is what `up` did before: build the code image with Docker, `docker save | gzip` the
whole image and stream it into the host's `docker load`. The delta sends only the layers the host's
engine lacks, with manifest and config. A code edit is **{code:.0f}×** faster end to end: your code
becomes a layer made here without Docker (no build, no `docker save`), and the host receives a few KB.
A trainer change is **{trainer:.1f}×** faster; it still pays one local `docker save` of the new image
(to split it into layers; the layers it shares with the old image are not compressed again), which
is most of its time on this machine. The trainer image's BuildKit build, the same for both ways, is
not included.

![full vs delta](delta.png)

Dataset sync of {files:,} generated files (1–3 KB each, four class folders), one host:

{datasets}

"first" starts from an empty data_dir and cold caches (every file hashed here and, after it arrived,
on the host); "unchanged" compares manifests, with hashes cached by size, mtime, inode and ctime on
both sides, and sends nothing; "one file changed" sends that file alone. Every row ends with the
host's copy verified against the source.
"""


if __name__ == "__main__":
    if "--report" in sys.argv:
        report()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
