"""The golden results.json files (tests/golden/, compared by tests/support/golden.py in the runs that
make each kind: a grid, a parallel search, a pruned trial, a retried one) hold every field, and the
comparison fails on a field gone, a field new, or a value of another type."""
from __future__ import annotations

import copy
import json

import pytest

from support.golden import FOLDER, assert_golden, realized


def document(name: str) -> dict:
    golden = json.loads((FOLDER / f"results-{name}.json").read_text())
    trials = [realized(kind) for kinds in golden["trials"].values() for kind in kinds]
    return {**realized(golden["document"]), "candidates": trials}


@pytest.mark.parametrize("name", ["grid-1-workers", "grid-2-workers", "parallel", "pruned", "retried"])
def test_a_document_of_each_golden_shape_fits_and_one_field_off_does_not(name):
    doc = document(name)
    assert_golden(doc, name)
    gone = copy.deepcopy(doc)
    del gone["candidates"][0]["val_loss"]
    with pytest.raises(AssertionError, match="'val_loss' missing"):
        assert_golden(gone, name)
    retyped = copy.deepcopy(doc)
    retyped["candidates"][-1]["epochs"] = "2"
    with pytest.raises(AssertionError, match="epochs"):
        assert_golden(retyped, name)
    new = {**doc, "extra": 1}
    with pytest.raises(AssertionError, match="'extra' new"):
        assert_golden(new, name)
    without_telemetry = copy.deepcopy(doc)
    for record in without_telemetry["candidates"]:
        record.pop("cpu_hours", None)
    assert_golden(without_telemetry, name)          # a trial shorter than a sample has no figures
