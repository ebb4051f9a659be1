"""Generated image-folder datasets with class-dependent patterns (for the simulation and tests).

`python -m trainer.train.synth OUT --classes 4 --per-class N --size 56` writes
`OUT/train/<class>/*.png` and `OUT/val/<class>/*.png` in the layout of the OASIS MRI set.
Each class is a bright blob at its own angle around the centre, with jitter, random size and
noise: a small CNN separates the classes well above chance within two epochs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

VAL_FRACTION = 4  # validation gets per_class // 4 images per class


def class_names(classes: int) -> list[str]:
    return [f"class_{k:02d}" for k in range(classes)]


def make_images(classes: int, per_class: int, size: tuple[int, int], channels: int,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images [n, h, w, channels] and int labels, classes interleaved."""
    rng = np.random.default_rng(seed)
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    images = np.empty((classes * per_class, h, w, channels), np.uint8)
    labels = np.tile(np.arange(classes), per_class)
    for i, label in enumerate(labels):
        angle = 2 * np.pi * label / classes + rng.normal(0, 0.12)
        radius = 0.28 * min(h, w) * rng.uniform(0.85, 1.15)
        cy, cx = h / 2 + radius * np.sin(angle), w / 2 + radius * np.cos(angle)
        spread = min(h, w) * rng.uniform(0.08, 0.13)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * spread ** 2))
        picture = 0.25 + 0.65 * blob + rng.normal(0, 0.08, (h, w))
        images[i] = (np.clip(picture, 0, 1) * 255).astype(np.uint8)[..., None]
    return images, labels


def encode_png(image: np.ndarray) -> bytes:
    """One image (height × width × channels, uint8) as PNG bytes, with Pillow: writing folders is
    for this machine (tests, benchmarks), where matplotlib brings it; the image never writes any."""
    import io

    from PIL import Image  # imported here: generating arrays in memory needs no Pillow

    out = io.BytesIO()
    Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(out, format="PNG")
    return out.getvalue()


def write_folder(out: Path, classes: int, per_class: int, size: int, channels: int = 1,
                 seed: int = 0) -> dict[str, int]:
    """Write train/ and val/ image folders; returns how many images each split got."""
    counts = {}
    for split, n, split_seed in (("train", per_class, seed), ("val", max(2, per_class // VAL_FRACTION), seed + 1)):
        images, labels = make_images(classes, n, (size, size), channels, split_seed)
        names = class_names(classes)
        for name in names:
            (out / split / name).mkdir(parents=True, exist_ok=True)
        for i, (image, label) in enumerate(zip(images, labels)):
            (out / split / names[label] / f"{split}_{i:06d}.png").write_bytes(encode_png(image))
        counts[split] = len(images)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.train.synth", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write train/ and val/ into")
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--per-class", type=int, default=64, help="training images per class")
    parser.add_argument("--size", type=int, default=56, help="image side in pixels")
    parser.add_argument("--channels", type=int, choices=(1, 3), default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name, value, low in (("--classes", args.classes, 2), ("--per-class", args.per_class, 4), ("--size", args.size, 8)):
        if value < low:
            print(f"trainer.train.synth: Invalid value for `{name}`. Received: {value}. Expected an integer ≥ {low}.", file=sys.stderr)
            return 2
    counts = write_folder(args.out, args.classes, args.per_class, args.size, args.channels, args.seed)
    print(f"wrote {counts['train']} training and {counts['val']} validation images "
          f"in {args.classes} classes to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
