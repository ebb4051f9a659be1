"""results.json checked (was in results.py): every key any reader uses, its type and its range
(numbers finite but where NaN says "no figure"), applied once where a results file enters (the
launcher's runfiles.load_results, the chief's queue) so that readers trust a checked document as
it is; and the figures a host of a parallel search may send the chief for a trial it trained."""
from __future__ import annotations

import math

from trainer.spec.errors import BadInput

SCHEMA = 1
STATES = ("complete", "pruned", "retried", "failed", "running", "waiting")
MAX_TRIALS = 1_000_000
MAX_EPOCHS = 100_000
EXPECTED = {"text": "text", "number": "a number", "int": "an integer"}


def _int(low: float, high: float):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _num(low: float, high: float, nan: bool = False):
    """A number in [low, high] (NaN too when `nan`: a trial that diverged has no figure)."""
    return lambda v: _real(v) and ((nan and math.isnan(v)) or low <= v <= high)


def _text(limit: int):
    return lambda v: isinstance(v, str) and len(v) <= limit


def _list_of(fits, limit: int):
    return lambda v: isinstance(v, list) and len(v) <= limit and all(fits(x) for x in v)


def _map_of(key_fits, value_fits, limit: int):
    return lambda v: isinstance(v, dict) and len(v) <= limit and all(key_fits(k) and value_fits(x) for k, x in v.items())


def _optional(fits):
    return lambda v: v is None or fits(v)


_ACCURACY = _num(0, 1, nan=True)
_LOSS = _num(0, math.inf, nan=True)
_NAME = _text(1000)
_CHOICE = lambda v: (_real(v) and math.isfinite(v)) or (isinstance(v, str) and len(v) <= 1000)  # noqa: E731
_MATRIX = lambda v: isinstance(v, list) and len(v) <= 1000 and all(  # noqa: E731
    isinstance(row, list) and len(row) == len(v) and all(_whole(n, 1e12) for n in row) for row in v)
_EPOCH = _int(0, MAX_EPOCHS)

# Every key of a trial's record a reader uses: (required, its check, what is expected). One place,
# applied once where a results file enters (the launcher's runfiles.load_results, the chief's
# queue), so no reader meets a type or a range it does not expect.
RECORD_KEYS = {
    "candidate": (True, lambda v: isinstance(v, str) and 0 < len(v) <= 1000, "a trial's name (text)"),
    "val_accuracy": (True, _ACCURACY, "an accuracy 0–1 (or NaN)"),
    "val_loss": (True, _LOSS, "a loss ≥ 0 (or NaN)"),
    "train_seconds": (True, _num(0, 1e9), "a number of seconds 0–1e9"),
    "images_per_second": (True, _num(0, 1e12), "a number 0–1e12"),
    "params": (True, _int(0, 10**12), "an integer 0–1e12"),
    "epochs": (True, _EPOCH, f"an integer 0–{MAX_EPOCHS:,}"),
    "epochs_run": (False, _EPOCH, f"an integer 0–{MAX_EPOCHS:,}"),
    "resumed_from_epoch": (False, _EPOCH, f"an integer 0–{MAX_EPOCHS:,}"),
    "pruned_at_epoch": (False, _optional(_EPOCH), f"an integer 0–{MAX_EPOCHS:,}"),
    "start": (False, _int(0, 10**6), "an integer 0–1e6"),
    "trial": (False, _int(0, 10**9), "an integer 0–1e9"),
    "retry_of": (False, _int(0, 10**9), "an integer 0–1e9"),
    "stopped_early": (False, lambda v: isinstance(v, bool), "true or false"),
    "state": (False, lambda v: v in STATES, f"one of {', '.join(STATES)}"),
    "curve": (False, _list_of(_ACCURACY, 100_000), "a list of accuracies 0–1"),
    "hyperparameters": (False, _map_of(_NAME, _CHOICE, 1000), "a mapping of names to finite numbers or text"),
    "host": (False, _text(64), "a host name"),
    "architecture": (False, _NAME, "a model's name"),
    "learning_rate": (False, _num(0, 1e15), "a finite learning rate ≥ 0"),
    "batch_per_replica": (False, _int(1, 10**9), "an integer ≥ 1"),
    "retried_as": (False, _NAME, "a trial's name"),
    "why": (False, _text(100_000), "text"),
    "confusion_matrix": (False, _optional(_MATRIX), "a square table of counts"),
    # The trial's wall clock (UTC unix seconds, the clock of the host that trained it), and what the
    # launcher's telemetry measured over it (added at collect: launcher/telemetry/assemble.py).
    "started_at": (False, _num(0, 1e11), "a time in UTC unix seconds"),
    "ended_at": (False, _num(0, 1e11), "a time in UTC unix seconds"),
    "gpu_hours": (False, _num(0, 1e9), "GPU-hours ≥ 0"),
    "gpu_utilization": (False, _num(0, 100), "a percentage 0–100"),
    "energy_wh": (False, _num(0, 1e12), "watt-hours ≥ 0"),
    "cpu_hours": (False, _num(0, 1e9), "CPU core-hours ≥ 0"),
    "telemetry_coverage": (False, _num(0, 1), "a share 0–1"),
}
# The document's own keys a reader uses (`best` and `candidates` are checked on their own).
DOC_KEYS = {
    "workers": (False, _int(1, 100_000), "an integer ≥ 1"), "replicas": (False, _int(1, 10**7), "an integer ≥ 1"),
    "restarts": (False, _int(0, 10**6), "an integer ≥ 0"),
    "mode": (False, lambda v: v in ("sync", "parallel"), "'sync' or 'parallel'"),
    "started": (False, _text(64), "a time"), "finished": (False, _text(64), "a time"),
    "precision": (False, _text(64), "a precision name"), "tensorflow": (False, _text(64), "a version"),
    "class_names": (False, _list_of(_NAME, 10_000), "a list of names"),
    "images": (False, _map_of(_NAME, lambda n: _whole(n, 1e12), 100), "a mapping of counts"),
    "skipped_images": (False, lambda v: isinstance(v, dict) and _whole(v.get("count", 0), 1e12)
                       and _list_of(_text(4096), 1000)(v.get("files", [])), "a count and a list of files"),
    "elastic": (False, lambda v: _elastic_fits(v), "the batch policy, the replicas at the start and the re-forms "
                "(trainer/spec/elastic_run.py ElasticRun)"),
}
BEST_KEYS = {
    "candidate": (True, lambda v: isinstance(v, str) and 0 < len(v) <= 1000, "the best trial's name"),
    "val_accuracy": (True, _ACCURACY, "an accuracy 0–1 (or NaN)"),
    "host": (False, _text(64), "a host name"),
}
SEARCH_KEYS = {
    "sampler": (False, _text(100), "a sampler's name"), "pruner": (False, _text(100), "a pruner's name"),
    "trials": (False, _int(0, 10**12), "an integer ≥ 0"), "reduction_factor": (False, _int(1, 1000), "an integer ≥ 1"),
    "min_epochs": (False, _EPOCH, "an integer ≥ 0"), "max_epochs": (False, _EPOCH, "an integer ≥ 0"),
    "rungs": (False, _list_of(_EPOCH, 1000), "a list of epochs"),
    "hosts": (False, _list_of(_text(64), 10_000), "a list of host names"),
    "lost": (False, _map_of(_text(64), _list_of(_NAME, 10_000), 10_000), "host names, each with the trials retried"),
    "note": (False, _text(10_000), "text"),
}


class ResultsError(BadInput):
    """A results.json that is not one tfcompose wrote."""


def _keys(doc: dict, table: dict, where: str) -> None:
    for key, (required, fits, expected) in table.items():
        if key not in doc:
            if required:
                raise ResultsError(f"{where}{key}: Received nothing. Expected {expected}.")
            continue
        if not fits(doc[key]):
            raise ResultsError(f"{where}{key}: Received {_shown(doc[key])}. Expected {expected}.")


def check(doc, where: str) -> None:
    """The whole document as its readers use it; a ResultsError names the first key that is not."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("candidates"), list) \
            or not doc["candidates"] or len(doc["candidates"]) > MAX_TRIALS:
        raise ResultsError(f"{where}: Received no candidates. Expected a tfcompose results.json (schema {SCHEMA}).")
    for i, record in enumerate(doc["candidates"]):
        check_record(record, f"{where}: candidates[{i}]")
    if not isinstance(doc.get("best"), dict):
        raise ResultsError(f"{where}: best: Received {_shown(doc.get('best'))}. Expected the best trial "
                           "({candidate, val_accuracy}).")
    _keys(doc["best"], BEST_KEYS, f"{where}: best.")
    if doc["best"]["candidate"] not in {r["candidate"] for r in doc["candidates"]}:
        raise ResultsError(f"{where}: best.candidate: Received {_shown(doc['best']['candidate'])}. Expected the name "
                           "of one of the candidates.")
    if "search" in doc:
        if not isinstance(doc["search"], dict):
            raise ResultsError(f"{where}: search: Received {_shown(doc['search'])}. Expected the search's settings "
                               "(sampler, pruner, trials, rungs, the hosts lost).")
        _keys(doc["search"], SEARCH_KEYS, f"{where}: search.")
    _keys(doc, DOC_KEYS, f"{where}: ")


def check_record(record, where: str) -> None:
    """One trial's record as results.json holds it (also what a host sends the chief's queue)."""
    if not isinstance(record, dict):
        raise ResultsError(f"{where}: Received {_shown(record)}. Expected a trial's record.")
    _keys(record, RECORD_KEYS, f"{where}.")
    history = record.get("history", "")
    if not isinstance(history, str) or len(history) > 4096 or history.startswith("/") or ".." in history.split("/") \
            or "\x00" in history:
        raise ResultsError(f"{where}.history: Received {_shown(history)}. Expected a path inside the run folder.")


# What a host of a parallel search may tell the chief about a trial it trained: each figure's
# check. Everything else in the record the chief knows itself (the trial's name and values, its
# host, whether the pruner stopped it), so a host cannot write it.
HOST_FIGURES = {
    "val_accuracy": lambda v: _real(v) and (math.isnan(v) or 0 <= v <= 1),
    "val_loss": lambda v: _real(v) and (math.isnan(v) or v >= 0),
    "train_seconds": lambda v: _real(v) and 0 <= v <= 1e9,
    "images_per_second": lambda v: _real(v) and 0 <= v <= 1e12,
    "params": lambda v: _whole(v, 1e12), "epochs": lambda v: _whole(v, 100_000), "epochs_run": lambda v: _whole(v, 100_000),
    "resumed_from_epoch": lambda v: _whole(v, 100_000), "start": lambda v: _whole(v, 1_000_000),
    "stopped_early": lambda v: isinstance(v, bool),
    "started_at": lambda v: _real(v) and 0 <= v <= 1e11, "ended_at": lambda v: _real(v) and 0 <= v <= 1e11,
    "curve": lambda v: isinstance(v, list) and len(v) <= 100_000 and all(_real(x) and (math.isnan(x) or 0 <= x <= 1) for x in v),
}


def host_figures(sent, classes: int, where: str) -> dict:
    """The figures a host sent for its trial, checked (a ResultsError names the first that is not
    what it should be); its confusion matrix when it is classes × classes counts."""
    if not isinstance(sent, dict):
        raise ResultsError(f"{where}: Received {_shown(sent)}. Expected a trial's figures.")
    out = {}
    for key, fits in HOST_FIGURES.items():
        if key not in sent:
            continue
        if not fits(sent[key]):
            raise ResultsError(f"{where}.{key}: Received {_shown(sent[key])}. Expected {key.replace('_', ' ')} as a trainer writes it.")
        out[key] = sent[key]
    matrix = sent.get("confusion_matrix")
    if matrix is not None:
        if not (isinstance(matrix, list) and len(matrix) == classes and all(
                isinstance(row, list) and len(row) == classes and all(_whole(n, 1e12) for n in row) for row in matrix)):
            raise ResultsError(f"{where}.confusion_matrix: Received {_shown(matrix)}. Expected {classes} × {classes} counts.")
        out["confusion_matrix"] = matrix
    return out


def _elastic_fits(value) -> bool:
    """An elastic run's section, checked by the model `up` writes it from (one owner)."""
    from pydantic import ValidationError
    from trainer.spec.elastic_run import ElasticRun
    try:
        ElasticRun.model_validate(value)
        return True
    except ValidationError:
        return False


def _real(value) -> bool:
    return isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53)


def _whole(value, limit: float) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
