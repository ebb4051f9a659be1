"""The fast set (`make test-unit`) runs without TensorFlow, Docker or sshd. TensorFlow is refused
at import: a unit test that reaches it (directly or through a module that imports it at the top)
fails at once, naming the module, instead of quietly paying seconds per import."""
from __future__ import annotations

import importlib.abc
import sys

BLOCKED = ("tensorflow", "tf_keras", "keras")


class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name}: the unit tests run without TensorFlow (tests/unit/conftest.py); "
                              "test the part that needs none, or move the test to tests/integration/")
        return None


if not any(name.split(".")[0] in BLOCKED for name in sys.modules):   # `make test`: integration may have it
    sys.meta_path.insert(0, NoTensorFlow())
