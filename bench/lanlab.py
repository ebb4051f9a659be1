"""The LAN lab as a command: N hosts in network namespaces, each with its own sshd, ~/.ssh and
Docker engine, links shaped with tc (tests/support/lab.py does the work; the tests use it too).
With --slurm, the hosts are also the nodes of a real Slurm (tests/support/slurm.py).

    python bench/lanlab.py up 3 --rate 100mbit [--tag lab] [--subnet 10.213.9] [--replace]
    python bench/lanlab.py up 2 --slurm [--image tfcompose-trainer:latest] [--tag slurm]
    python bench/lanlab.py down [--tag lab]          # removes everything the tag made; safe twice

`up` writes <lab>/inventory.yaml, ready to run: the hosts, the lab's key and known_hosts, and a
small search on real images (scikit-learn's digits, or generated ones without scikit-learn)
that `tfcompose up` copies into every host's own data folder. It prints each host's address and
DOCKER_HOST; with --slurm, also SLURM_CONF and the folder every node sees. A lab of the same tag
is never replaced unless --replace says so (on a shared box it may be a colleague's). Needs root.
README: "A LAN on one machine: the LAN lab".
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import common  # noqa: F401  (puts tests/ on the path)
from support.lab import Lab, available  # noqa: E402
from support.sshd import write_inventory  # noqa: E402

# What the written inventory trains: two candidates, two learning rates, a few epochs on 16×16
# images (minutes on CPU-only hosts). Container paths: each host's data folder is /data there.
TRAIN = {"dataset": {"kind": "image_folder", "train_dir": "/data", "val_dir": None, "validation_split": 0.2,
                     "image_size": [16, 16], "color_mode": "grayscale"},
         "candidates": ["small_cnn", "deep_cnn"], "epochs": 3, "batch_per_replica": 32,
         "search": {"mode": "parallel", "learning_rates": [0.01, 0.001], "patience": 2}, "join_timeout_s": 300}
NEXT_STEPS = """
# Next, as root (the lab's key, hosts and engines are root's):
#   tfcompose validate -i {inv}
#   tfcompose up -i {inv} --wait          (results in ./runs/{cluster}/<run>/, report.md among them)
#   tfcompose down -i {inv}; python bench/lanlab.py down --tag {tag}
# mode: sync trains each trial on every host together (MultiWorkerMirroredStrategy) instead.
# A sampled search: under train.search, sampler: tpe, trials: 12, pruner: asha, and in place of
# learning_rates, learning_rate: {{log_uniform: [1.0e-4, 1.0e-1]}}.
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lanlab.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="build a lab of N hosts (refused if a lab of this tag exists, unless --replace)")
    up.add_argument("hosts", type=int)
    up.add_argument("--rate", help="link rate, e.g. 100mbit or 1gbit (default: unshaped)")
    up.add_argument("--latency", default="20ms", help="tbf's bound on queueing delay (default 20ms)")
    up.add_argument("--local-first", action="store_true", help="host h0 is this machine and its Docker engine")
    up.add_argument("--slurm", action="store_true", help="the hosts are also Slurm nodes (slurmd each; "
                    "slurmctld and munged on the bridge)")
    up.add_argument("--image", help="load this image of this machine's engine into every host's engine (and use it in "
                    "the inventory); without it, the first `tfcompose up` ships the image to each host")
    up.add_argument("--base-image", default="tensorflow/tensorflow:latest",
                    help="the inventory's base_image: what `tfcompose up` builds the trainer on "
                         "(default tensorflow/tensorflow:latest; without a registry, a local TensorFlow image)")
    up.add_argument("--subnet", help="the lab's /24, as 10.213.9 (default: 10.213.9; with --slurm 10.213.31)")
    up.add_argument("--replace", action="store_true", help="remove a lab of the same tag first (it may be someone else's)")
    for p in (up, sub.add_parser("down", help="remove the lab of this tag (with its Slurm, if any)")):
        p.add_argument("--tag", default="lab", help="names every namespace, link and folder (default: lab); "
                       "on a shared machine, a tag of your own")
    args = parser.parse_args(argv)
    if args.action == "down":
        return down(args.tag)
    if args.hosts < 1:
        print(f"lanlab: hosts: Received {args.hosts}. Expected at least 1.", file=sys.stderr)
        return 2
    from support.slurm import SlurmLab
    lab = (SlurmLab if args.slurm else Lab)(tag=args.tag, **({"subnet": args.subnet} if args.subnet else {}))
    refused = in_the_way(lab, args.replace)
    if refused:
        print(f"lanlab: {refused}", file=sys.stderr)
        return 2
    if args.replace:
        down(args.tag, quiet=True)
    return slurm_up(lab, args) if args.slurm else lan_up(lab, args)


def down(tag: str, quiet: bool = False) -> int:
    from support.slurm import SlurmLab
    existed = Lab(tag=tag).root.is_dir() or any(bridge_exists(b) for b in bridges(tag))
    SlurmLab(tag=tag).down()     # its daemons first: they are found by the pid files in the lab's folder
    Lab(tag=tag).down()
    if not quiet:
        print(f"lab {tag}: removed" if existed else f"lab {tag}: nothing to remove")
    return 0


def bridges(tag: str) -> list[str]:
    """The bridge of each kind of lab of this tag (the LAN lab's and the Slurm lab's)."""
    from support.slurm import SlurmLab
    return [Lab(tag=tag).lan.bridge, SlurmLab(tag=tag).lan.bridge]


def bridge_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def in_the_way(lab: Lab, replace: bool) -> str | None:
    """Why `up` must not go on: a lab of this tag exists (unless replace), or the lab's subnet is
    already this machine's on another device (another tag's lab, or a real network)."""
    exists = lab.root.is_dir() or any(bridge_exists(b) for b in bridges(lab.tag))
    if exists and not replace:
        return (f"a lab tagged {lab.tag!r} already exists: {describe(lab)}. Nothing was changed. Use it, remove it "
                f"(python bench/lanlab.py down --tag {lab.tag}), choose another --tag, or pass --replace to remove "
                "it and build a new one.")
    holder = subnet_holder(lab.subnet)
    if holder and holder not in bridges(lab.tag):
        return (f"the subnet {lab.subnet}.0/24 is already in use on this machine by {holder} (another lab, or a "
                "network of this machine's). Nothing was changed. Choose another --subnet.")
    return None


def describe(lab: Lab) -> str:
    """An existing lab as its lab.json records it: hosts, who made it, when."""
    try:
        doc = json.loads((lab.root / "lab.json").read_text())
        hosts = ", ".join(f"{name} {address}" for name, address in doc["hosts"])
        return f"{len(doc['hosts'])} host(s) ({hosts}), made by {doc['made_by']} at {doc['made_at']}, in {lab.root}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its folder {lab.root} or its bridge is there (no record of who made it: an unfinished or older lab)"


def subnet_holder(subnet: str) -> str | None:
    """The device of this machine holding an address in subnet.0/24, if any."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields and fields[fields.index("inet") + 1].rsplit(".", 1)[0] == subnet:
            return fields[1]
    return None


def lan_up(lab: Lab, args) -> int:
    ok, why = available()
    if not ok:
        print(f"lanlab: {why}", file=sys.stderr)
        return 2
    lab.up(args.hosts, rate=args.rate, latency=args.latency, local_first=args.local_first)
    if args.image:
        lab.load_image(args.image)
    data, what = write_data(lab.root / "data-source")
    inv = write_lab_inventory(lab, data, args.image or "tfcompose-trainer:latest", args.base_image)
    for host in lab.hosts:
        print(f"{host.name}  {host.address}:{host.port}  DOCKER_HOST={host.docker_host}")
    print(f"dataset: {what} in {data}\ninventory: {inv}\n"
          f"try it:  tfcompose validate -i {inv} && tfcompose up -i {inv} --wait\n"
          f"remove with: tfcompose down -i {inv}; python bench/lanlab.py down --tag {args.tag}")
    return 0


def write_data(folder: Path) -> tuple[Path, str]:
    """Real images for the inventory's search: scikit-learn's handwritten digits as an image folder,
    or, without scikit-learn, generated images (numpy and Pillow: matplotlib's own dependencies)."""
    try:
        from support.digits import write_digits
        write_digits(folder)
        return folder, "scikit-learn's 1,797 handwritten digits (10 classes)"
    except ImportError:
        pass
    import numpy as np
    from PIL import Image
    from trainer.train.synth import class_names, make_images
    images, labels = make_images(4, 100, (16, 16), 1, seed=0)
    for n, (image, label) in enumerate(zip(images, labels)):
        target = folder / class_names(4)[label]
        target.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.squeeze(image, -1)).save(target / f"{n:04d}.png")
    return folder, "400 generated images (4 classes; install scikit-learn for the digits)"


def write_lab_inventory(lab: Lab, data: Path, image: str, base_image: str) -> Path:
    """An inventory that runs as it is: every host of the lab with a data folder of its own, which
    `tfcompose up` fills from `data` (dataset_source), and a small search (TRAIN)."""
    import re
    import yaml
    path = lab.root / "inventory.yaml"
    # The tag names the cluster: two people's labs on one box (--local-first: one engine) stay apart.
    cluster = lab.tag if re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", lab.tag) else "lab"
    write_inventory(lab, path, cluster, lab.hosts, known_hosts=lab.known_hosts(), image=image, base_image=base_image,
                    train=TRAIN, dataset_source=str(data), defaults={"restart_retries": 2})
    doc = yaml.safe_load(path.read_text())
    for entry, host in zip(doc["hosts"], lab.hosts):
        entry["data_dir"] = str(host.folder / "dataset")      # (`data` is the host's Docker data-root)
    head = (f"# The LAN lab {lab.tag!r}: {len(lab.hosts)} host(s) on this machine (bench/lanlab.py; README: "
            "\"A LAN on one machine\").\n")
    path.write_text(head + yaml.safe_dump(doc, sort_keys=False) + NEXT_STEPS.format(inv=path, tag=lab.tag, cluster=cluster))
    return path


def slurm_up(lab, args) -> int:
    from support.slurm import JOB_USER, available as slurm_available
    ok, why = slurm_available()
    if not ok or args.local_first:
        print(f"lanlab: {why or '--local-first: every Slurm node needs a namespace of its own'}", file=sys.stderr)
        return 2
    lab.up(args.hosts, rate=args.rate, latency=args.latency)
    if args.image:
        lab.load_image(args.image)
    for host in lab.hosts:
        print(f"{host.name}  {host.address}  slurmd, DOCKER_HOST={host.docker_host}")
    print(f"export SLURM_CONF={lab.conf}\n"
          f"shared folder (every node sees it): {lab.shared}\n"
          f"submit as {JOB_USER}: runuser -u {JOB_USER} -- sbatch tfcompose.sbatch "
          f"(from a folder of {lab.shared} that {JOB_USER} owns)\n"
          f"remove with: python bench/lanlab.py down --tag {args.tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
