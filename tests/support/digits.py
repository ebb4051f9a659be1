"""Real images without a download: scikit-learn's bundled handwritten digits (1,797 scans of 8×8
pixels, 10 classes) written as an image folder, one sub-folder per class, as a user's data looks."""
from __future__ import annotations

from pathlib import Path


def write_digits(root: Path) -> Path:
    """root/<digit>/<n>.png for every digit of the set (grayscale, 0–255); `root`."""
    import numpy as np
    from PIL import Image       # Pillow: matplotlib's own dependency
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = (digits.images * (255.0 / 16.0)).round().astype(np.uint8)    # the scans hold 0–16
    for n, (image, label) in enumerate(zip(pixels, digits.target)):
        folder = root / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{n:04d}.png")
    return root
