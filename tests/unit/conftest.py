"""The fast set (`make test-unit`) runs without TensorFlow, Docker or sshd. TensorFlow is refused
at import from a unit test (directly or through a module that imports it at the top): the test
fails at once, naming the module, instead of quietly paying seconds per import. Only imports made
from tests/unit/ are refused: a lane of `make test` that also runs integration tests (which may
import TensorFlow themselves) is not touched."""
from __future__ import annotations

import importlib.abc
import sys
from pathlib import Path

BLOCKED = ("tensorflow", "tf_keras", "keras")
UNIT = str(Path(__file__).resolve().parent) + "/"


def from_a_unit_test() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(UNIT):
            return True
        frame = frame.f_back
    return False


class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        # Only the top-level name is judged: its submodules come only after it was let in.
        if name in BLOCKED and from_a_unit_test():
            raise ImportError(f"{name}: the unit tests run without TensorFlow (tests/unit/conftest.py); "
                              "test the part that needs none, or move the test to tests/integration/")
        return None


if not any(isinstance(finder, NoTensorFlow) for finder in sys.meta_path):
    sys.meta_path.insert(0, NoTensorFlow())
