"""The placement's parameter formulas against the models TensorFlow builds."""
from __future__ import annotations

import json
import subprocess
import sys

from support.common import REPO
from trainer.trials import estimate_params


def test_parameter_formulas_match_keras():
    script = ("import json, os; os.environ['TF_USE_LEGACY_KERAS'] = '1'\n"
              "from trainer import models\n"
              "print(json.dumps({n: models.build(n, (40, 48, c), k, 'none').count_params()"
              " for n in ('small_cnn', 'deep_cnn', 'vgg16', 'resnet50') for c, k in [(3, 5)]}))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    actual = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, params in actual.items():
        assert estimate_params(name, (40, 48), 3, 5) == params, name
