"""results.json (trainer/results.py): merging parallel results, refusing what tfcompose did not write."""
from __future__ import annotations

import pytest
from trainer import results


def record(name: str, acc: float) -> dict:
    return {"candidate": name, "val_accuracy": acc, "val_loss": 1 - acc, "train_seconds": 1.0,
            "images_per_second": 10.0, "params": 100, "epochs": 2, "history": f"history/{name}.csv"}


def test_parallel_results_merge_in_placement_order_with_the_best_over_all_hosts():
    docs = {"a": {"schema": 1, "replicas": 1, "restarts": 0, "started": "2026-01-01T10:00:00", "finished": "2026-01-01T10:05:00",
                  "candidates": [record("t1", 0.5), record("t3", 0.9)]},
            "b": {"schema": 1, "replicas": 2, "restarts": 1, "started": "2026-01-01T09:59:00", "finished": "2026-01-01T10:07:00",
                  "candidates": [record("t2", 0.7)]}}
    merged = results.merge_parallel(docs, ["t3", "t2", "t1"], {"a": ["t3", "t1"], "b": ["t2"]})
    assert [r["candidate"] for r in merged["candidates"]] == ["t3", "t2", "t1"]
    assert merged["best"] == {"candidate": "t3", "val_accuracy": 0.9, "host": "a"}
    assert merged["candidates"][1]["history"] == "hosts/b/history/t2.csv"
    assert (merged["mode"], merged["workers"], merged["replicas"], merged["restarts"]) == ("parallel", 2, 3, 1)
    assert (merged["started"], merged["finished"]) == ("2026-01-01T09:59:00", "2026-01-01T10:07:00")
    results.check(merged, "merged")


@pytest.mark.parametrize("doc, field", [
    ({"schema": 1, "candidates": []}, "no candidates"),
    ({"schema": 2, "candidates": [record("t", 0.5)]}, "no candidates"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "val_accuracy": "high"}]}, "candidates[0].val_accuracy"),
    ({"schema": 1, "candidates": [{"candidate": "t"}]}, "candidates[0].val_accuracy"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "history": "../../etc/passwd"}]}, "history"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "history": "/etc/passwd"}]}, "history"),
    ([1, 2], "no candidates"),
])
def test_results_that_tfcompose_did_not_write_are_refused_by_name(doc, field):
    with pytest.raises(results.ResultsError, match=field.replace("[", r"\[").replace("]", r"\]")):
        results.check(doc, "r.json")
