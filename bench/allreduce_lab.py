"""B1c `allreduce:` across two LAN-lab hosts: loopback, 1 Gbit/s and 100 Mbit/s in one run, both
built-in candidates, float32 every step (tf_keras's own step: the baseline) against `allreduce:
auto`, fed the link as `up` feeds it: measured by the launcher's own links probe (launcher/stages/
links.py) between the two hosts, the slower direction. Real data: scikit-learn's digits (1,797
8×8 images, 10 classes) written as an image folder and resized (SIZE: each model keeps B1's
~1.5 M parameters). Same trainer, pinning and lab as bench/scaling_lab.py.

    python bench/allreduce_lab.py [REPEATS]     (root: network namespaces; needs scikit-learn)
    python bench/allreduce_lab.py --report
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import DOC, REPO, machine, summary, write_section  # noqa: E402
from support.common import free_ports, tf_config  # noqa: E402
from support.lab import Lab, enter  # noqa: E402
from scaling import EPOCH_LINE, cpu_flags, trainer  # noqa: E402

sys.path.insert(0, str(REPO))
from launcher.stages import links  # noqa: E402  (the probe `up` runs)

# (candidate, batch per replica, per_class (synthetic only: unused), epochs): enough epochs for float32 every step to level off
CASES = [("small_cnn", 32, 64, 20), ("deep_cnn", 32, 64, 5)]
# small_cnn at B1's 56×56 (its parameters grow with the image: 1.49 M here); deep_cnn's do not
# (global pooling: 1.48 M at any size), and at 32×32 its arithmetic costs a third (a shared machine)
SIZE = {"small_cnn": 56, "deep_cnn": 32}
LINKS = ("loopback", "1gbit", "100mbit")
SETTINGS = ("float32", "auto")
# A trial without `allreduce:` records nothing of it (results.json as before): tf_keras's own step.
STOCK = {"dtype": "float32", "every": 1, "auto": False, "why": "as configured", "link_mbit_s": None, "step_ms": None,
         "expected_ms": None}
RAW = DOC.parent / "allreduce_lab.json"
TF_PORT = 47121


def digits_folder(out: Path) -> Path:
    """scikit-learn's digits as <class>/<n>.png (grey levels 0–16 stretched to 0–255)."""
    from PIL import Image
    from sklearn.datasets import load_digits
    digits = load_digits()
    for n, (image, label) in enumerate(zip(digits.images, digits.target)):
        (out / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray((image * 255 / 16).round().astype("uint8")).save(out / str(label) / f"{n:04d}.png")
    return out


def measure_link(lab: Lab, link: str) -> float:
    """Both directions at once with the links probe, as `up` does; the slower one, Mbit/s."""
    if link == "loopback":
        ends = [((), "127.0.0.1", port) for port in free_ports(2)]
    else:
        ends = [(tuple(enter(h.ns)), lab.lan.address(i), TF_PORT) for i, h in enumerate(lab.hosts)]
    listeners = [subprocess.Popen([*pre, sys.executable, "-c", links.LISTEN, str(port), "30", f"b.h{i}",
                                   str(links.READ_S), str(links.SEND_CAP)], stdout=subprocess.PIPE, text=True)
                 for i, (pre, _, port) in enumerate(ends)]
    try:
        for listener in listeners:
            listener.stdout.readline()                                  # "bound"
        peers = [f"b.h{1 - i}|{ends[1 - i][1]}|{ends[1 - i][2]}" for i in range(2)]
        probes = [subprocess.Popen([*pre, sys.executable, "-c", links.CONNECT, str(links.CONNECT_TIMEOUT_S),
                                    str(links.SEND_S), str(links.SEND_CAP), "15", peers[i]], stdout=subprocess.PIPE,
                                   text=True) for i, (pre, _, _) in enumerate(ends)]
        rates = [next(iter(json.loads(p.communicate(timeout=60)[0])["mbit_s"].values())) for p in probes]
    finally:
        for listener in listeners:
            listener.kill()
            listener.wait()
    return min(rates)


def pair(case, tmp: Path, data: Path, lab: Lab, link: str, setting: str, mbit_s: float) -> dict:
    """Two MWMS workers (worker i on core i), over loopback or across the lab hosts."""
    env = {"TFC_TRAIN_DATASET__KIND": "image_folder", "TFC_TRAIN_DATASET__TRAIN_DIR": str(data),
           "TFC_TRAIN_DATASET__IMAGE_SIZE": f"[{SIZE[case[0]]}, {SIZE[case[0]]}]"}
    if setting == "auto":
        env.update(TFC_TRAIN_ALLREDUCE__AUTO="true", TFC_TRAIN_ALLREDUCE__LINK_MBIT_S=str(mbit_s))
    if link == "loopback":
        addrs, prefixes = [f"127.0.0.1:{p}" for p in free_ports(2)], ((), ())
    else:
        addrs = [f"{lab.lan.address(i)}:{TF_PORT}" for i in range(2)]
        prefixes = tuple(tuple(enter(h.ns)) for h in lab.hosts)
    load = os.getloadavg()[0]
    procs = [trainer(i, case, tmp / f"w{i}", tf_config(addrs, i), prefixes[i], env) for i in range(2)]
    output = procs[0].communicate(timeout=3600)[0]
    procs[1].communicate(timeout=600)
    if procs[0].returncode != 0:
        raise SystemExit(f"trainer failed:\n{output[-3000:]}")
    record = json.loads((tmp / "w0" / "results.json").read_text())["candidates"][0]
    rates = [int(r) for e, r in EPOCH_LINE.findall(output) if int(e) > 1]
    return {"img_s": summary(rates)[0], "val_accuracy": record["val_accuracy"], "allreduce": record.get("allreduce", STOCK),
            "load": round((load + os.getloadavg()[0]) / 2, 2)}


def main(repeats: int = 3) -> None:
    raw: dict = {"machine": machine(), "cpu_flags": cpu_flags(), "repeats": repeats, "links_mbit_s": {k: [] for k in LINKS},
                 "cases": {f"{n}@bs={b}": {f"{link}/{s}": [] for link in LINKS for s in SETTINGS} for n, b, _, _ in CASES}}
    lab = Lab(tag="ar1", subnet="10.213.40").up(2, services=False)
    try:
        with tempfile.TemporaryDirectory(prefix="tfc-allreduce-lab-") as tmp:
            data = digits_folder(Path(tmp) / "digits")
            for rep in range(repeats):               # interleaved: drift on a shared machine hits every case alike
                for link in LINKS:
                    if link != "loopback":
                        lab.shape(link)
                    mbit_s = measure_link(lab, link)
                    raw["links_mbit_s"][link].append(mbit_s)
                    for case in CASES:
                        runs = raw["cases"][f"{case[0]}@bs={case[1]}"]
                        for setting in SETTINGS:
                            out = Path(tmp) / f"{rep}-{case[0]}-{link}-{setting}"
                            runs[f"{link}/{setting}"].append(pair(case, out, data, lab, link, setting, mbit_s))
                            print(rep, case[0], link, setting, runs[f"{link}/{setting}"][-1], flush=True)
                RAW.write_text(json.dumps(raw, indent=1) + "\n")   # what is done so far survives a stop
    finally:
        lab.down()
    report(raw)


def cell(runs: list[dict], base: float) -> str:
    (rate, spread), (acc, acc_spread) = summary([r["img_s"] for r in runs]), summary([r["val_accuracy"] for r in runs])
    return f"{rate:.0f} ± {spread:.0f} (**{rate / base:.2f}**) | {acc:.4f} ± {acc_spread:.4f}"


def picked(runs: list[dict]) -> str:
    picks = sorted({(r["allreduce"]["dtype"], r["allreduce"]["every"]) for r in runs})
    return ", ".join(f"{d} every {e}" for d, e in picks)


def report(raw: dict) -> None:
    rows, whys = [], []
    for case, runs in raw["cases"].items():
        base = summary([r["img_s"] for r in runs["loopback/float32"]])[0]
        for link in LINKS:
            f32, auto = runs[f"{link}/float32"], runs[f"{link}/auto"]
            if not f32:
                continue
            gap = summary([a["val_accuracy"] - f["val_accuracy"] for a, f in zip(auto, f32)])[0]
            rows.append(f"| {case} | {link} | {cell(f32, base)} | {cell(auto, base)} | {gap:+.4f} | {picked(auto)} |")
            whys.append(f"- `{case}`, {link}: {auto[0]['allreduce']['why']}")
    links_row = "; ".join(f"{link} {summary(v)[0]:,.0f} Mbit/s (spread {summary(v)[1]:,.0f})"
                          for link, v in raw["links_mbit_s"].items() if v)
    loads = [r["load"] for runs in raw["cases"].values() for v in runs.values() for r in v]
    done = sorted({len(v) for runs in raw["cases"].values() for v in runs.values()})
    reps = f"{done[0]} repetitions" if len(done) == 1 else f"{done[0]}–{done[-1]} repetitions (of {raw['repeats']} planned)"
    write_section("allreduce-lab", f"""
## B1c `allreduce:` across two LAN-lab hosts: float32 every step against `auto`

{raw['machine']}; CPU flags: {raw['cpu_flags']}; {reps}, interleaved; load
average during the runs: median {summary(loads)[0]:.1f} (min {min(loads):.1f}, max {max(loads):.1f}) on 2 cores.
Two MWMS workers of the trainer (worker i pinned to core i), each in its own network namespace
of the LAN lab with every link shaped by `tc tbf`, against the same two workers over loopback, in
the same run (`bench/allreduce_lab.py`). Data: scikit-learn's digits as an image folder (1,438
training and 359 validation images after the trainer's seeded, stratified 20 % split), resized to
56×56 for `small_cnn` (20 epochs; 1.49 M parameters) and 32×32 for `deep_cnn` (5 epochs; 1.48 M
at any size: global pooling; a third of the arithmetic of 56×56, for a shared 2-core machine);
32 images per replica (23 steps an epoch), learning rate 0.001, seed 42.
`auto` gets the link the launcher's own probe measured between the two hosts, as `up` renders it
into train.yaml: {links_row}.
Cells: training img/s, median ± spread, (**ratio to float32 every step over loopback**) | final
val_accuracy, median ± spread; "Δ val_acc" is auto minus float32 on the same link, median of the
repetitions.

| case | link | float32, every step | val_accuracy | auto | val_accuracy | Δ val_acc | auto picked |
|---|---|---:|---:|---:|---:|---:|---|
{chr(10).join(rows)}

Why, as the first repetition's trainer logged it and wrote it to results.json:

{chr(10).join(whys)}

{analysis(raw)}
""")


def analysis(raw: dict) -> str:
    """The targets of issue #32, read off the medians: ≥ 0.9 of the loopback rate at 1 Gbit/s, ≥ 0.6
    at 100 Mbit/s, val_accuracy within 0.01 of float32 every step."""
    lines = []
    for case, runs in raw["cases"].items():
        base = summary([r["img_s"] for r in runs["loopback/float32"]])[0]
        for link, goal in (("1gbit", 0.9), ("100mbit", 0.6)):
            auto = runs[f"{link}/auto"]
            if not auto:
                continue
            ratio = summary([r["img_s"] for r in auto])[0] / base
            gap = summary([a["val_accuracy"] - f["val_accuracy"] for a, f in zip(auto, runs[f"{link}/float32"])])[0]
            lines.append(f"- `{case}` at {link}: auto runs at **{ratio:.2f}** of the loopback rate (goal ≥ {goal}: "
                         f"{'met' if ratio >= goal else 'missed'}); val_accuracy {gap:+.4f} against float32 every step "
                         f"on the same link (goal within 0.01: {'met' if abs(gap) <= 0.01 else 'missed'}).")
    return "Against the goals of issue #32 (medians):\n\n" + "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        report(json.loads(RAW.read_text()))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
