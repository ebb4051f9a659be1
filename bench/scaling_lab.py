"""B1 across two LAN-lab hosts: two MWMS workers, each in its own network namespace (tests/lab.py)
with links shaped to 100 Mbit/s and to 1 Gbit/s, next to the same two workers over loopback, in
the same run, interleaved. Same trainer, cases and pinning as bench/scaling.py (worker i on core i).

    python bench/scaling_lab.py [REPEATS]     (root: network namespaces)
    python bench/scaling_lab.py --report
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from common import DOC, machine, summary, write_section  # noqa: E402
from support.lab import Lab, enter  # noqa: E402
from scaling import CASES, cpu_flags, mwms  # noqa: E402

LAB_CASES = [c for c in CASES if c[1] == 32]          # small_cnn@32 and deep_cnn@32
LINKS = ("loopback", "1gbit", "100mbit")
RAW = DOC.parent / "scaling_lab.json"
TF_PORT = 47111


def two_workers(case, tmp: Path, lab: Lab, link: str) -> float:
    """img/s of two MWMS workers, over loopback or across the two lab hosts at `link`."""
    if link == "loopback":
        return mwms(case, tmp)
    lab.shape(link)
    return mwms(case, tmp, addrs=[f"{lab.lan.address(i)}:{TF_PORT}" for i in range(2)],
                prefixes=tuple(tuple(enter(h.ns)) for h in lab.hosts))


def main(repeats: int = 3) -> None:
    raw: dict = {"machine": machine(), "cpu_flags": cpu_flags(), "repeats": repeats,
                 "cases": {f"{n}@bs={b}": {link: [] for link in LINKS} for n, b, _, _ in LAB_CASES}}
    lab = Lab(tag="b1", subnet="10.213.7").up(2, services=False)
    try:
        with tempfile.TemporaryDirectory(prefix="tfc-scaling-lab-") as tmp:
            for rep in range(repeats):
                for case in LAB_CASES:
                    runs = raw["cases"][f"{case[0]}@bs={case[1]}"]
                    for link in LINKS:
                        runs[link].append(two_workers(case, Path(tmp) / f"{rep}-{case[0]}-{link}", lab, link))
                    print(case[:2], {k: v[-1] for k, v in runs.items()}, flush=True)
    finally:
        lab.down()
    RAW.write_text(json.dumps(raw, indent=1) + "\n")
    report(raw)


def report(raw: dict) -> None:
    rows = []
    for case, runs in raw["cases"].items():
        loop = summary(runs["loopback"])[0]
        cells = []
        for link in LINKS:
            med, spread = summary(runs[link])
            cells.append(f"{med:.0f} ± {spread:.0f} ({med / loop:.2f})")
        rows.append(f"| {case} | " + " | ".join(cells) + " |")
    added = []
    for case, runs in raw["cases"].items():
        loop = 64 / summary(runs["loopback"])[0]
        added.append(f"`{case}` " + ", ".join(f"{(64 / summary(runs[link])[0] - loop) * 1000:.0f} ms at {link}"
                                              for link in LINKS[1:]))
    write_section("scaling-lab", f"""
## B1 across two LAN-lab hosts: loopback, 1 Gbit/s and 100 Mbit/s

{raw['machine']}; CPU flags: {raw['cpu_flags']}; {raw['repeats']} repetitions, interleaved.
Two MWMS workers of the trainer (worker i pinned to core i, as in B1), each in its own network
namespace of the LAN lab with every link shaped by `tc tbf` (`bench/scaling_lab.py`), against the
same two workers over loopback in the same run. Cells: training img/s, median ± spread (ratio to
loopback).

| case | loopback | 1 Gbit/s | 100 Mbit/s |
|---|---:|---:|---:|
{chr(10).join(rows)}

Every step all-reduces all the gradients between the two hosts, so a link adds roughly
(gradient bytes ÷ link rate) to each step, and only arithmetic running at the same time can hide
it. Both models have about the same number of parameters (`small_cnn`'s sit in the dense layer
after its Flatten), so they send about as much per step; `small_cnn`'s steps are far shorter, so
the same transfer is a far larger share of its step. Step time per worker = 64 images ÷ img/s.
Added to each step over loopback: {"; ".join(added)}. About 1.5 M float32 gradients are 6 MB;
a two-worker ring sends about that much each way per step: 48 ms at 1 Gbit/s, 480 ms at 100 Mbit/s.
Over a 100 Mbit/s LAN, MWMS with models of this size is bound by the link: use 1 Gbit/s or more, or
`search.mode: parallel`.
""")


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        report(json.loads(RAW.read_text()))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
