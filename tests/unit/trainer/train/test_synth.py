
from __future__ import annotations

import subprocess
import sys
import numpy as np
from support.common import REPO
from trainer.train import synth


def test_generator_writes_the_oasis_layout(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trainer.train.synth", str(tmp_path / "d"), "--classes", "3",
                           "--per-class", "8", "--size", "24"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for split, per_class in (("train", 8), ("val", 2)):
        folders = sorted(p.name for p in (tmp_path / "d" / split).iterdir())
        assert folders == ["class_00", "class_01", "class_02"]
        for folder in folders:
            files = list((tmp_path / "d" / split / folder).glob("*.png"))
            assert len(files) == per_class
            assert files[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_generator_rejects_bad_arguments(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trainer.train.synth", str(tmp_path), "--classes", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Invalid value for `--classes`. Received: 1. Expected an integer ≥ 2." in proc.stderr


def test_classes_differ_where_the_blob_is_and_generation_is_seeded():
    images, labels = synth.make_images(4, 20, (32, 32), 1, seed=3)
    again, _ = synth.make_images(4, 20, (32, 32), 1, seed=3)
    assert np.array_equal(images, again)
    means = [images[labels == k].mean(axis=0)[..., 0] for k in range(4)]
    peaks = {np.unravel_index(m.argmax(), m.shape) for m in means}
    assert len(peaks) == 4  # every class's bright spot sits somewhere else
