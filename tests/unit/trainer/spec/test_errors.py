"""The trainer's error family (trainer/spec/errors.py)."""
from __future__ import annotations

from trainer.spec.errors import one_line


def test_a_failure_is_one_line_naming_its_kind():
    assert one_line(ValueError("Invalid value 5.0\nTraceback …")) == "ValueError: Invalid value 5.0"
    assert one_line(MemoryError()) == "MemoryError"
