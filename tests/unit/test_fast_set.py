"""The fast set itself: no TensorFlow (tests/unit/conftest.py)."""
from __future__ import annotations

import importlib
import sys

import pytest


def test_a_unit_test_that_imports_tensorflow_fails_naming_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)     # a lane of `make test` may hold it
    with pytest.raises(ImportError, match="^tensorflow: the unit tests run without TensorFlow"):
        importlib.import_module("tensorflow")
