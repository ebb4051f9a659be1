"""The LAN lab as a command: N hosts in network namespaces, each with its own sshd, ~/.ssh and
Docker engine, links shaped with tc (tests/support/lab.py does the work; the tests use it too).
With --slurm, the hosts are also the nodes of a real Slurm (tests/support/slurm.py).

    python bench/lanlab.py up 3 --rate 100mbit [--tag lab] [--local-first]
    python bench/lanlab.py up 2 --slurm [--image tfcompose-trainer:latest] [--tag slurm]
    python bench/lanlab.py down [--tag lab]          # removes everything the tag made; safe twice

`up` writes <lab>/inventory.yaml (hosts, user key, known_hosts) to start from, and prints each
host's address and DOCKER_HOST; with --slurm, also SLURM_CONF and the folder every node sees.
Needs root.
"""
from __future__ import annotations

import argparse
import sys

import common  # noqa: F401  (puts tests/ on the path)
from support.lab import Lab, available  # noqa: E402
from support.sshd import write_inventory  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lanlab.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="build a lab of N hosts (removing an earlier one of the same tag)")
    up.add_argument("hosts", type=int)
    up.add_argument("--rate", help="link rate, e.g. 100mbit or 1gbit (default: unshaped)")
    up.add_argument("--latency", default="20ms", help="tbf's bound on queueing delay (default 20ms)")
    up.add_argument("--local-first", action="store_true", help="host h0 is this machine and its Docker engine")
    up.add_argument("--slurm", action="store_true", help="the hosts are also Slurm nodes (slurmd each; "
                    "slurmctld and munged on the bridge)")
    up.add_argument("--image", help="load this image of this machine's engine into every host's engine")
    up.add_argument("--subnet", help="the lab's /24, as 10.213.9 (default: 10.213.9; with --slurm 10.213.31)")
    for p in (up, sub.add_parser("down", help="remove the lab of this tag (with its Slurm, if any)")):
        p.add_argument("--tag", default="lab", help="names every namespace, link and folder (default: lab)")
    args = parser.parse_args(argv)
    if args.action == "down":
        return down(args.tag)
    return slurm_up(args) if args.slurm else lan_up(args)


def down(tag: str) -> int:
    from support.slurm import SlurmLab
    SlurmLab(tag=tag).down()     # its daemons first: they are found by the pid files in the lab's folder
    Lab(tag=tag).down()
    print(f"lab {tag}: removed")
    return 0


def lan_up(args) -> int:
    ok, why = available()
    if not ok:
        print(f"lanlab: {why}", file=sys.stderr)
        return 2
    lab = Lab(tag=args.tag, **({"subnet": args.subnet} if args.subnet else {}))
    lab.up(args.hosts, rate=args.rate, latency=args.latency, local_first=args.local_first)
    if args.image:
        lab.load_image(args.image)
    inv = write_inventory(lab, lab.root / "inventory.yaml", "lab", lab.hosts, known_hosts=lab.known_hosts(),
                          image=args.image or "tfcompose-trainer:latest")
    for host in lab.hosts:
        print(f"{host.name}  {host.address}:{host.port}  DOCKER_HOST={host.docker_host}")
    print(f"inventory: {inv}\nremove with: python bench/lanlab.py down --tag {args.tag}")
    return 0


def slurm_up(args) -> int:
    from support.slurm import JOB_USER, SlurmLab, available as slurm_available
    ok, why = slurm_available()
    if not ok or args.local_first:
        print(f"lanlab: {why or '--local-first: every Slurm node needs a namespace of its own'}", file=sys.stderr)
        return 2
    lab = SlurmLab(tag=args.tag, **({"subnet": args.subnet} if args.subnet else {}))
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
