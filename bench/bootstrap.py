"""B12 bootstrap: bare Debian 12 hosts → ready tfcompose hosts → the first epoch trained across them.

    sudo .venv/bin/python bench/bootstrap.py [REPEATS]      (TFC_LAB_NET=N moves the lab's /16)

On bare hosts of tests/support/bare.py (each a network namespace and a root filesystem of its own
with only OpenSSH's server and sudo; online: a route to the Debian mirror only; offline: none),
for 1 and 2 hosts, online and offline, each repetition on fresh hosts:
- `tfcompose bootstrap --yes`: its seconds (offline: with the resolution cache emptied first, so
  the .debs are resolved and fetched here each time; the bytes sent);
- `tfcompose up --wait` of the digits (a 2-epoch `small_cnn`): the seconds to `running` (the trainer
  image shipped, 1.5 GB compressed, to empty engines; the image's split on this machine is warm, as
  after a user's first `up`) and to the first finished epoch;
- then `tfcompose bootstrap --yes` again on the ready hosts (the idempotent second run).
Targets (#39): one host ≤ 6 min, two ≤ 8 min to the first training step; second run ≤ 10 s for two.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, machine, summary, write_section  # noqa: E402
from support.bare import BareLab, make_tree  # noqa: E402
from support.digits import write_digits  # noqa: E402

IMAGE = os.environ.get("TFC_TEST_IMAGE", "tfcompose-trainer:bench-bootstrap")
BASE = os.environ.get("BASE_IMAGE", "tf-offline-base:cpu")
CASES = [(1, "online"), (2, "online"), (1, "offline"), (2, "offline")]
RAW = REPO / "docs" / "bootstrap_bench.json"
TRAIN = {"dataset": {"kind": "image_folder", "train_dir": "/data", "image_size": [16, 16]}, "candidates": ["small_cnn"],
         "epochs": 2, "join_timeout_s": 300}


def tfcompose(*args: str, env: dict) -> tuple[int, list[tuple[float, str]]]:
    """The CLI as a user runs it (off a terminal): its exit code and each output line with its time."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.monotonic() - start, line.rstrip("\n")) for line in proc.stdout]
    return proc.wait(), lines


def first(lines, pattern: str) -> float | None:
    return next((t for t, line in lines if re.search(pattern, line)), None)


def one(lab: BareLab, hosts: int, mode: str, tmp: Path, digits: Path, env: dict) -> dict:
    chosen = lab.hosts[:hosts]
    for host in chosen:
        lab.fresh(host, online=mode == "online")
    lab.known_hosts()
    boot = {"offline": True, "resolver_images": {"debian-12": "offline-base-rootfs:bookworm"}} if mode == "offline" else {}
    inv = lab.inventory(tmp / f"{mode}{hosts}.yaml", f"b12{mode[:3]}{hosts}", chosen, image=IMAGE, base_image=BASE,
                        dataset_source=str(digits), defaults={"data_dir": "/srv/digits"}, train=TRAIN, bootstrap=boot)
    shutil.rmtree(Path(env["XDG_CACHE_HOME"]) / "tfcompose" / "bootstrap", ignore_errors=True)
    code, boot_lines = tfcompose("bootstrap", "-i", str(inv), "--yes", env=env)
    assert code == 0, "\n".join(line for _, line in boot_lines)
    sent = sum(float(m.group(1).replace(",", "")) for _, line in boot_lines      # all hosts together
               if (m := re.search(r"; sent ([\d,.]+) MB", line)))
    code, up_lines = tfcompose("up", "-i", str(inv), "--wait", "--runs", str(tmp / "runs"), env=env)
    assert code == 0, "\n".join(line for _, line in up_lines)
    image = max((int(m.group(1).replace(",", "")) for _, line in up_lines
                 if (m := re.search(r"image \(shipped \d+/\d+ layers, ([\d,]+) B", line))), default=0)
    started = time.monotonic()
    code, again = tfcompose("bootstrap", "-i", str(inv), "--yes", env=env)
    second = time.monotonic() - started
    assert code == 0 and all("nothing to do" in line for _, line in again if ": Debian" in line)
    tfcompose("down", "-i", str(inv), env=env)
    boot_s = boot_lines[-1][0]
    return {"bootstrap_s": boot_s, "bundle_mb": sent, "to_running_s": first(up_lines, r": running$"),
            "to_first_epoch_s": first(up_lines, r"epoch 1/2"), "image_bytes": image, "second_run_s": second,
            "bare_to_first_epoch_s": boot_s + (first(up_lines, r"epoch 1/2") or float("nan"))}


def main(repeats: int) -> None:
    subprocess.run(["make", "image", f"BASE_IMAGE={BASE}", f"IMAGE={IMAGE}"], cwd=REPO, check=True, capture_output=True)
    results: dict = {f"{n}/{mode}": [] for n, mode in CASES}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")        # here and in every command run
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        digits = write_digits(root / "digits")
        for path in [digits, *digits.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        lab = BareLab(make_tree(root / "tree.tar"), tag="b12", subnet="10.213.6").up([True, True])
        try:
            from launcher.image.local import Shipment, local_image_id     # the image's split, made once (warm)
            Shipment(IMAGE, local_image_id(IMAGE)).parts()
            for rep in range(repeats):
                for n, mode in CASES:
                    loads.append(os.getloadavg()[0])
                    results[f"{n}/{mode}"].append(one(lab, n, mode, root, digits, env))
                    print(rep, n, mode, json.dumps(results[f"{n}/{mode}"][-1]), flush=True)
                    # Written after every case: a long run stopped part-way keeps what it measured.
                    RAW.write_text(json.dumps({"machine": machine(), "repeats": rep + 1, "load": loads,
                                               "results": results}, indent=1))
                    report(results, rep + 1, loads)
        finally:
            lab.down()


def report(results: dict, repeats: int, loads: list[float]) -> None:
    def cell(runs, key, fmt="{:.0f}", per: int = 1):
        values = [r[key] / per for r in runs if r[key] is not None]
        if not values:
            return "?"
        median, spread = summary(values)
        return (fmt + " ± " + fmt).format(median, spread / 2)
    results = {key: runs for key, runs in results.items() if runs}
    rows = [f"| {key.split('/')[0]} | {key.split('/')[1]} | {cell(runs, 'bootstrap_s')} | {cell(runs, 'bundle_mb', '{:.1f}', int(key.split('/')[0]))} | "
            f"{cell(runs, 'to_running_s')} | {cell(runs, 'to_first_epoch_s')} | {cell(runs, 'bare_to_first_epoch_s')} | "
            f"{cell(runs, 'second_run_s', '{:.1f}')} |" for key, runs in results.items()]
    image = max((r["image_bytes"] for runs in results.values() for r in runs), default=0)
    write_section("bootstrap", f"""## B12 Bare hosts to the first epoch: `tfcompose bootstrap`, then `up --wait` (#39)

`sudo .venv/bin/python bench/bootstrap.py {repeats}` — {machine()}
(the bench alone on it; load average over the runs, its own included, {min(loads):.1f}–{max(loads):.1f}, median {sorted(loads)[len(loads) // 2]:.1f}); medians of
{repeats} repetitions, ± half the spread (max − min). Each repetition on fresh bare hosts (tests/support/bare.py: a
network namespace and a Debian 12 root filesystem each, OpenSSH's server and sudo only; online: a route to the
Debian mirror only; offline: none), all hosts of a case at once. Seconds from the command's start:
**bootstrap** `tfcompose bootstrap --yes` (online: the hosts' apt fetches from the mirror; offline: the
resolution cache emptied first, so this machine resolves and fetches the .debs each time, then sends them);
**bundle** the MB sent per host offline; **running** `up --wait` until the containers run (the trainer image,
{image / 1e9:.2f} GB compressed, shipped to empty engines; its split on this machine warm, as after a user's first
`up`); **first epoch** until `up` shows the first finished epoch (2 epochs of `small_cnn` on the digits, 16×16);
**bare → first epoch** the two together; **second run** `tfcompose bootstrap --yes` again on the ready hosts.
Targets: one host ≤ 6 min (360 s), two ≤ 8 min (480 s); second run ≤ 10 s for two hosts.

| hosts | network | bootstrap s | bundle MB | up → running s | up → first epoch s | bare → first epoch s | second run s |
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}
""")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
