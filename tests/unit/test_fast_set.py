"""The fast set itself: no TensorFlow (tests/unit/conftest.py)."""
from __future__ import annotations

import subprocess
import sys

from support.common import REPO


def test_a_unit_test_that_imports_tensorflow_fails_naming_it():
    probe = ("import sys; sys.path[:0] = ['tests/unit', 'tests', '.']; import conftest\n"
             "try:\n    import trainer.trial_loop\nexcept ImportError as e:\n    print('refused:', e)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("refused: tensorflow: the unit tests run without TensorFlow"), done.stdout + done.stderr
