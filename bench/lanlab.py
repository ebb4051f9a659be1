"""The LAN lab as a command: N hosts in network namespaces, each with its own sshd, ~/.ssh and
Docker engine, links shaped with tc (tests/lab.py does the work; the tests use it too).

    python bench/lanlab.py up 3 --rate 100mbit [--tag lab] [--local-first]
    python bench/lanlab.py down [--tag lab]          # removes everything the tag made; safe twice

`up` writes <lab>/inventory.yaml (hosts, user key, known_hosts) to start from, and prints each
host's address and DOCKER_HOST. Needs root.
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
    for p in (up, sub.add_parser("down", help="remove the lab of this tag")):
        p.add_argument("--tag", default="lab", help="names every namespace, link and folder (default: lab)")
    args = parser.parse_args(argv)
    lab = Lab(tag=args.tag)
    if args.action == "down":
        lab.down()
        print(f"lab {args.tag}: removed")
        return 0
    ok, why = available()
    if not ok:
        print(f"lanlab: {why}", file=sys.stderr)
        return 2
    lab.up(args.hosts, rate=args.rate, latency=args.latency, local_first=args.local_first)
    inv = write_inventory(lab, lab.root / "inventory.yaml", "lab", lab.hosts, known_hosts=lab.known_hosts(),
                          image="tfcompose-trainer:latest")
    for host in lab.hosts:
        print(f"{host.name}  {host.address}:{host.port}  DOCKER_HOST={host.docker_host}")
    print(f"inventory: {inv}\nremove with: python bench/lanlab.py down --tag {args.tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
