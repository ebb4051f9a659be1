"""results.json documents as the trainer writes them, for the tests of its owner and its check
(trainer/spec/results.py, results_check.py)."""
from __future__ import annotations

from trainer.spec import results


def record(name: str, acc: float) -> dict:
    return {"candidate": name, "val_accuracy": acc, "val_loss": 1 - acc, "train_seconds": 1.0,
            "images_per_second": 10.0, "params": 100, "epochs": 2, "history": f"history/{name}.csv"}


def document(*records: dict, **keys) -> dict:
    """A results.json as the trainer writes it: its trials, the best of them, and `keys`."""
    try:
        top = results.best(list(records))
    except (TypeError, KeyError, IndexError):        # records the check is to refuse: any best will do
        top = {"candidate": "t", "val_accuracy": 0.5}
    return {"schema": 1, "candidates": list(records), "best": {"candidate": top["candidate"],
                                                                "val_accuracy": top["val_accuracy"]}, **keys}
