"""B3 input pipeline: one pass over the training set through the trainer's pipeline (`trainer.train.data`:
parallel decode → cache → shuffle → batch → prefetch) versus the original script's
(`image_dataset_from_directory` + cache + shuffle + prefetch), global batch 64 (one worker), on the
same generated folder of 5,000 PNGs. Epoch 1 decodes from disk; epochs 2–3 read the cache.
No model: this times the pipeline alone, as the GPU would see it.

    python bench/input_pipeline.py [REPEATS]      (needs TensorFlow on this machine)
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from common import DOC, REPO, machine, summary, write_section  # noqa: E402

PER_CLASS, CLASSES, SIZE, BATCH, EPOCHS = 1250, 4, 56, 64, 3

PASS = """
import json, sys, time
import tensorflow as tf
which, folder = sys.argv[1], sys.argv[2]
if which == "trainer":
    from trainer.spec.config import DatasetConfig
    from trainer.train.data import load
    cfg = DatasetConfig(kind="image_folder", train_dir=folder, image_size=({size}, {size}), validation_split=0.2)
    train, _ = load(cfg, 42).batches({batch})
else:  # the original script
    train = tf.keras.utils.image_dataset_from_directory(folder, image_size=({size}, {size}), color_mode="grayscale",
        batch_size={batch}, validation_split=0.2, subset="training", seed=42, verbose=False)
    train = train.cache().shuffle(1000).prefetch(tf.data.AUTOTUNE)
times = []
for _ in range({epochs}):
    t = time.perf_counter()
    for x, y in train:
        pass
    times.append(time.perf_counter() - t)
print(json.dumps(times))
""".format(size=SIZE, batch=BATCH, epochs=EPOCHS)


def one_pass(which: str, folder: Path) -> list[float]:
    out = subprocess.run([sys.executable, "-c", PASS, which, str(folder)], cwd=REPO, capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"},
                         timeout=900)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(repeats: int = 3) -> None:
    raw: dict = {"trainer": [], "original": []}
    with tempfile.TemporaryDirectory(prefix="tfc-pipeline-") as tmp:
        subprocess.run([sys.executable, "-m", "trainer.train.synth", tmp, "--classes", str(CLASSES), "--per-class",
                        str(PER_CLASS), "--size", str(SIZE)], cwd=REPO, check=True, capture_output=True)
        for _ in range(repeats):  # interleaved; a fresh process each time, so epoch 1 really decodes
            for which in raw:
                raw[which].append(one_pass(which, Path(tmp) / "train"))
    (DOC.parent / "input_pipeline.json").write_text(json.dumps(raw, indent=1) + "\n")
    report(raw, repeats)


def report(raw: dict, repeats: int) -> None:
    first = {k: summary([r[0] for r in v]) for k, v in raw.items()}
    steady = {k: summary([x for r in v for x in r[1:]]) for k, v in raw.items()}
    rows = [f"| {k} | {first[k][0]:.2f} | {first[k][1]:.2f} | {steady[k][0]:.3f} | {steady[k][1]:.3f} |" for k in raw]
    fig, axes = plt.subplots(1, 2, figsize=(7, 3))
    for ax, pick, title in ((axes[0], lambda r: r[:1], "epoch 1 (decode)"), (axes[1], lambda r: r[1:], "cached epochs")):
        ax.boxplot([[x for r in raw[k] for x in pick(r)] for k in raw])
        ax.set_xticks([1, 2], list(raw))
        ax.set_title(title)
        ax.set_ylabel("seconds per pass")
    fig.tight_layout()
    fig.savefig(DOC.parent / "input_pipeline.png", dpi=110)
    train_images = round(PER_CLASS * CLASSES * 0.8)
    extra_ms = (steady["trainer"][0] - steady["original"][0]) * 1000
    ratio1 = first["trainer"][0] / first["original"][0]
    scaling = json.loads((DOC.parent / "scaling.json").read_text())["cases"]["small_cnn@bs=32"]["one"]
    small_rate = summary(scaling)[0]
    small_pct = 100 * extra_ms / 1000 / (train_images / small_rate)
    tie = abs(first["trainer"][0] - first["original"][0]) <= max(first["trainer"][1], first["original"][1])
    verdict = (f"{ratio1:.2f}× the time, a tie within the runs' spread" if tie else f"the trainer takes {ratio1:.2f}× the time")
    goal = ("met on epoch 1 (within the spread), **not on cached epochs**, by that margin" if tie or ratio1 < 1 else
            "**not met**, on epoch 1 or cached epochs")
    batches = -(-train_images // BATCH)
    write_section("input-pipeline", f"""
## B3 input pipeline: the trainer's vs the original script's

{machine()}; {repeats} repetitions, interleaved, each in a fresh process. {PER_CLASS * CLASSES:,} generated
{SIZE}×{SIZE} PNGs in {CLASSES} class folders, 20 % held out, global batch {BATCH}, one worker, no model:
seconds to iterate the training set once.

| pipeline | epoch 1 median s | spread | cached epoch median s | spread |
|---|---:|---:|---:|---:|
{chr(10).join(rows)}

Trainer / original: epoch 1 **{ratio1:.2f}×** the time, cached epochs
**{steady['trainer'][0] / steady['original'][0]:.2f}×**.

Epoch 1 (reading and decoding the PNGs): {verdict}; both decode in parallel (the trainer with
AUTOTUNE map, the original's loader likewise). Cached epochs are slower in the trainer, by {extra_ms:.1f} ms per
{train_images:,} images, because it shuffles *images* (buffer 4,096) and then batches, while the original
shuffles whole *batches* (`image_dataset_from_directory` batches first), so the same 64 images
travel together in every epoch: the trainer's pipeline moves {train_images:,} elements through shuffle and
batch, the original's {batches}. The kit keeps the per-image shuffle, because batch-level shuffling
weakens SGD, and {extra_ms:.1f} ms is small next to training on those images: {small_pct:.1f}% of a `small_cnn`
epoch at 32 per replica (the fastest candidate, {small_rate:,.0f} img/s on one core in the scaling section),
under 0.1% of a `deep_cnn` one. Goal "not slower": {goal}.

![input pipeline](input_pipeline.png)
""")


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:  # re-render docs/benchmarks.md from the last raw results
        data = json.loads((DOC.parent / "input_pipeline.json").read_text())
        report(data, len(data["trainer"]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
