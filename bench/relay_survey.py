"""B2b on the LAN lab: the image stage with nothing to ship on 8 hosts, relay on — the launcher
before the one-survey change (it looked at each host's layers for the relay, then again to ship)
against today's, interleaved in one run. Each case runs in a fresh process against its own
checkout; every SSH command is counted.

    python bench/relay_survey.py OLD_CHECKOUT [REPEATS]   (root; builds and removes lab "survey")

OLD_CHECKOUT: a checkout of the launcher before the change (`git worktree add /tmp/old 40568ae`).
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, machine, summary, write_section  # noqa: E402
from relay import IMAGE, bench_image  # noqa: E402
from support.lab import Lab  # noqa: E402
from support.sshd import write_inventory  # noqa: E402

HOSTS = 8
RAW = REPO / "docs" / "relay_survey.json"

# The image stage alone, connections already open (as after `push`); prints seconds and commands.
TIMED = """
import json, sys, time
from launcher.ssh import connection
counted = []
original = connection.Connection.run
def run(self, command, *a, **kw):
    counted.append(self.host.name)
    return original(self, command, *a, **kw)
connection.Connection.run = run
{imports}
cluster = load(sys.argv[1])
with Group(cluster) as group:
    for host in cluster.hosts:
        group.conn(host).run(["true"])
    counted.clear()
    t0 = time.monotonic()
    outcomes = provide(group, make(cluster), Shipment(sys.argv[2], sys.argv[3], cache=Path(sys.argv[4])))
    elapsed = time.monotonic() - t0
assert all(o.action == "present" for o in outcomes.values()), outcomes
print(json.dumps({{"seconds": elapsed, "commands": len(counted)}}))
"""
OLD = TIMED.format(imports="from pathlib import Path\nfrom launcher.group import Group\nfrom launcher.inventory import load\n"
                           "from launcher.plan import make\nfrom launcher.image import Shipment, provide")
NEW = TIMED.format(imports="from pathlib import Path\nfrom launcher.ssh.group import Group\n"
                           "from launcher.inventory.load import load_cluster as load\nfrom launcher.plan import make\n"
                           "from launcher.image.local import Shipment\nfrom launcher.image.stage import provide")


def timed(code: str, checkout: Path, inv: Path, image_id: str, cache: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, str(inv), IMAGE, image_id, str(cache)], cwd=checkout,
                          env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(old: Path, repeats: int) -> None:
    raw = {"machine": machine(), "hosts": HOSTS, "repeats": repeats, "before": [], "now": []}
    lab = Lab(tag="survey", subnet="10.213.8")
    with tempfile.TemporaryDirectory(prefix="tfc-survey-") as tmp:
        image_id = bench_image(Path(tmp))
        lab.up(HOSTS, rate="100mbit")
        try:
            inv = write_inventory(lab, Path(tmp) / "inv.yaml", "survey", lab.hosts, known_hosts=lab.known_hosts(),
                                  image=IMAGE, image_relay="on")
            cache = Path(tmp) / "cache"
            subprocess.run([sys.executable, "-c", NEW.replace("assert all", "# "), str(inv), IMAGE, image_id,
                            str(cache)], cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
                           check=True, capture_output=True)   # the first ship: every host gets the image
            for _ in range(repeats):
                for name, code, checkout in (("before", OLD, old), ("now", NEW, REPO)):
                    result = timed(code, checkout, inv, image_id, cache)
                    raw[name].append(result)
                    print(name, result, flush=True)
        finally:
            lab.down()
    RAW.write_text(json.dumps(raw, indent=1) + "\n")
    report(raw)


def report(raw: dict) -> None:
    rows = []
    for name in ("before", "now"):
        median, spread = summary([r["seconds"] for r in raw[name]])
        commands = sorted({r["commands"] for r in raw[name]})
        rows.append(f"| {name} | {median:.2f} | {spread:.2f} | {'/'.join(map(str, commands))} |")
    ratio = summary([n["seconds"] / b["seconds"] for b, n in zip(raw["before"], raw["now"])])[0]
    write_section("relay_survey", f"""## B2b: nothing to ship, one look at each host

{raw['machine']}; {raw['repeats']} repetitions, interleaved, each in a fresh process. The image stage
alone with nothing to ship, `image_relay: on`, on {raw['hosts']} LAN-lab hosts (100 Mbit/s links): the
launcher before the change (it surveyed each host's layers for the relay, then asked each host's
image ID and layers again to ship) and today's (one survey per host feeds both). `python
bench/relay_survey.py OLD_CHECKOUT {raw['repeats']}`.

| launcher | median s | spread s | SSH commands |
|---|---:|---:|---:|
{chr(10).join(rows)}

Now ÷ before, per repetition, median: **{ratio:.2f}**.
""")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5)
