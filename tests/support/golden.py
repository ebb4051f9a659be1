"""Golden results.json files (tests/golden/): the format's fields guarded one by one.

A run's figures differ from run to run (accuracies, times, which host trained what), its fields do
not: a document is reduced to its shape (every key, each value's JSON type; the values that say
what the run was: schema, mode, workers, states) and compared with the golden file of its kind (a
grid, a parallel search, a pruned trial, a retried one). Each trial is compared with the golden
shape of its state. `TFC_WRITE_GOLDEN=1` writes the files anew from the run (never under CI);
review the diff before committing it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "golden"
OPTIONAL = {"gpu_hours", "gpu_utilization", "energy_wh", "cpu_hours", "telemetry_coverage"}   # telemetry's, per trial
LITERAL = {"schema", "mode", "workers", "replicas", "precision", "state"}      # values that say what the run was


SAMPLE = {"str": "x", "int": 1, "float": 0.5, "bool": True, "null": None}


def realized(shape):
    """A document of a golden shape (each type a value of it)."""
    if isinstance(shape, dict):
        return {k: realized(v) for k, v in shape.items()}
    if isinstance(shape, list):
        return [realized(item) for item in shape]
    return SAMPLE.get(shape, shape) if isinstance(shape, str) else shape


def shape(value, key: str = ""):
    """`value` with each leaf its JSON type (kept as it is for LITERAL keys); a list as the sorted
    distinct shapes of its items."""
    if isinstance(value, dict):
        return {k: shape(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        items = {json.dumps(shape(v), sort_keys=True) for v in value}
        return [json.loads(s) for s in sorted(items)]
    if key in LITERAL:
        return value
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}[type(value)]


def document_shape(doc: dict) -> dict:
    """The document's own keys' shapes, and one shape per trial state (trials of one state alike)."""
    top = shape({k: v for k, v in doc.items() if k != "candidates"})
    by_state: dict[str, list] = {}
    for record in doc["candidates"]:
        one = shape(record)
        kinds = by_state.setdefault(record.get("state", "complete"), [])
        if one not in kinds:
            kinds.append(one)
    return {"document": top, "trials": {state: sorted(kinds, key=json.dumps) for state, kinds in sorted(by_state.items())}}


def assert_golden(doc: dict, name: str) -> None:
    """`doc` field for field as tests/golden/results-<name>.json says: the same keys (a trial's
    telemetry figures may be missing: a trial shorter than a sample has none), each value of its
    type, a list's items each of a shape the golden list holds (an empty list fits any)."""
    path = FOLDER / f"results-{name}.json"
    found = document_shape(doc)
    if os.environ.get("TFC_WRITE_GOLDEN") == "1" and os.environ.get("CI") != "true":
        FOLDER.mkdir(exist_ok=True)
        path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    assert path.is_file(), f"{path}: no golden file (TFC_WRITE_GOLDEN=1 writes it from this run; review it)"
    golden = json.loads(path.read_text())
    problems = differences(found["document"], golden["document"], "the document")
    for state, kinds in found["trials"].items():
        if state not in golden["trials"]:
            problems.append(f"a trial of state {state!r}, which the golden file has not")
            continue
        for kind in kinds:
            each = [differences(kind, known, f"a {state} trial") for known in golden["trials"][state]]
            if all(each):
                problems += min(each, key=len)
    assert not problems, f"{path}: differs from the golden file:\n" + "\n".join(problems)


def differences(found, golden, where: str) -> list[str]:
    """Where `found` (a shape) does not fit `golden`'s, one line each."""
    if isinstance(golden, dict) and isinstance(found, dict):
        said = [f"{where}: {key!r} missing" for key in golden if key not in found and key not in OPTIONAL]
        said += [f"{where}: {key!r} new" for key in found if key not in golden]
        for key in set(found) & set(golden):
            said += differences(found[key], golden[key], f"{where}.{key}")
        return said
    if isinstance(golden, list) and isinstance(found, list):
        return [f"{where}: an item {json.dumps(item)} of no shape the golden list holds"
                for item in found if all(differences(item, known, where) for known in golden)]
    return [] if found == golden else [f"{where}: {json.dumps(found)}, the golden file says {json.dumps(golden)}"]
