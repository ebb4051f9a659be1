"""A trial's record (trainer/spec/trial_record.py): built through the type as the trainer builds it,
for each state, its JSON has results.json's golden shape (tests/golden/, support/golden.py); what
earlier versions wrote parses and writes back unchanged; a missing key or a wrong type is refused in
one line naming the field, with results.json's own words."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from support.golden import FOLDER, assert_golden, differences, realized, shape
from trainer.spec import results_check
from trainer.spec.errors import BadInput
from trainer.spec.results_check import RECORD_KEYS, ResultsError
from trainer.spec.trial_record import ABSENT, KEYS, TrialRecord, chief_knows, history_path, of_host
from trainer.spec.trials import Trial

RUNS = Path(__file__).resolve().parents[3] / "data" / "runs"
PLAIN = Trial("small_cnn#001", "small_cnn", 0.01, 32, {}, number=0, seq=1)
WIDE = Trial("small_cnn#002", "small_cnn", 0.001, 16, {"width": 32}, number=1, seq=2)


def trained(trial: Trial = PLAIN, chief: bool = True, allreduce=None) -> TrialRecord:
    """A record as trainer/train/trial.py builds it on the host that trained the trial."""
    return TrialRecord(candidate=trial.name, architecture=trial.candidate, learning_rate=trial.learning_rate,
                       batch_per_replica=trial.batch_per_replica, val_accuracy=0.75, val_loss=0.5, train_seconds=12.5,
                       images_per_second=80.0, epochs=3, epochs_run=2, resumed_from_epoch=1, stopped_early=False,
                       params=1234, history=history_path(trial.name), started_at=1.7e9, ended_at=1.7e9 + 12.5,
                       allreduce=allreduce if allreduce is not None else ABSENT,
                       confusion_matrix=[[3, 1], [0, 4]] if chief else None)


def searched(trial: Trial, state: str, host: str = "h1") -> dict:
    """A parallel search's record as results.json holds it: trial_loop's study_record on its host,
    the figures it sends (QueueSource.finish), the chief's record of them (Coordinator.finish), the
    study's state (Study.finish), the history under the host's folder (main.py), telemetry's figures."""
    pruned = state == "pruned"
    mine = dataclasses.replace(trained(trial), **chief_knows(trial), curve=[0.5, 0.75], start=1, state=state,
                               pruned_at_epoch=2 if pruned else None)
    sent = {k: v for k, v in mine.to_json().items() if k in results_check.HOST_FIGURES or k == "confusion_matrix"}
    where = f"{host}'s trial {trial.number}"
    kept = of_host(trial, results_check.host_figures(sent, 2, where), host, where)
    doc = dataclasses.replace(kept, state=state, pruned_at_epoch=2 if pruned else None).to_json()
    return {**doc, "history": f"hosts/{host}/{doc['history']}", "cpu_hours": 0.01, "telemetry_coverage": 1.0}


def lost(trial: Trial, state: str, **said) -> TrialRecord:
    """A trial that never sent its figures, as the study knows it (study_records.record_of)."""
    return TrialRecord(candidate=trial.name, architecture=trial.candidate, learning_rate=trial.learning_rate,
                       batch_per_replica=trial.batch_per_replica, val_accuracy=0.5, val_loss=math.nan,
                       train_seconds=0.0, images_per_second=0.0, params=0, epochs=3, epochs_run=1, curve=[0.5],
                       state=state, hyperparameters=chief_knows(trial)["hyperparameters"], started_at=1.7e9,
                       ended_at=1.7e9 + 5, trial=trial.number, host="h1", history="", **said)


def golden_document(name: str, *records: dict) -> dict:
    return {**realized(json.loads((FOLDER / f"results-{name}.json").read_text())["document"]), "candidates": list(records)}


@pytest.mark.parametrize("name", ["grid-1-workers", "grid-2-workers"])
def test_a_grids_record_has_the_golden_shape_and_one_without_its_start_does_not(name):
    record = dataclasses.replace(trained(), start=1)                  # GridSource.record
    assert_golden(golden_document(name, record.to_json()), name)
    with pytest.raises(AssertionError, match="'start' missing"):
        assert_golden(golden_document(name, trained().to_json()), name)
    with pytest.raises(AssertionError, match="'state' new"):
        assert_golden(golden_document(name, dataclasses.replace(record, state="complete").to_json()), name)


@pytest.mark.parametrize("name, trial", [("parallel", PLAIN), ("pruned", WIDE)])
def test_a_searchs_complete_and_pruned_records_have_the_golden_shape(name, trial):
    records = [searched(trial, "complete")] + ([searched(trial, "pruned")] if name == "pruned" else [])
    assert_golden(golden_document(name, *records), name)
    assert records[-1]["pruned_at_epoch"] == (2 if name == "pruned" else None)
    unsaid = {k: v for k, v in records[0].items() if k != "pruned_at_epoch"}     # a complete trial says null
    with pytest.raises(AssertionError, match="'pruned_at_epoch' missing"):
        assert_golden(golden_document(name, unsaid), name)


def test_a_retried_records_have_the_golden_shape_with_and_without_retry_of():
    first = lost(PLAIN, "retried", retried_as="small_cnn#001~r1", why="h1 stopped answering for 60 s")
    again = dataclasses.replace(first, candidate="small_cnn#001~r1", trial=2, retried_as="small_cnn#001~r2", retry_of=0)
    assert_golden(golden_document("retried", first.to_json(), again.to_json(), searched(PLAIN, "complete")), "retried")
    with pytest.raises(AssertionError, match="'retried_as' missing"):
        assert_golden(golden_document("retried", dataclasses.replace(first, retried_as=ABSENT).to_json()), "retried")


def test_a_failed_record_is_a_retried_ones_shape_without_a_retry():
    golden = json.loads((FOLDER / "results-retried.json").read_text())["trials"]["retried"]
    expected = [{**{k: v for k, v in kind.items() if k not in ("retried_as", "retry_of")}, "state": "failed"}
                for kind in golden]
    failed = lost(PLAIN, "failed", why="h1 stopped answering for 60 s; lost 3 times, not retried again")
    assert any(not differences(shape(failed.to_json()), kind, "failed") for kind in expected)
    assert all(differences(shape(trained().to_json()), kind, "failed") for kind in expected)


def test_a_key_is_absent_or_null_as_the_trial_says():
    worker = trained(chief=False).to_json()
    assert worker["confusion_matrix"] is None and "allreduce" not in worker and "state" not in worker
    assert "pruned_at_epoch" not in worker and "host" not in worker
    chosen = {"dtype": "float16", "every": 1}                         # only when `allreduce:` is configured
    assert trained(allreduce=chosen).to_json()["allreduce"] == chosen
    assert "confusion_matrix" not in lost(PLAIN, "retried").to_json()


@pytest.mark.parametrize("run", sorted(p.name for p in RUNS.iterdir() if (p / "results.json").is_file()))
def test_the_records_of_results_files_from_before_parse_and_write_back_the_same(run):
    doc = json.loads((RUNS / run / "results.json").read_text())
    for i, record in enumerate(doc["candidates"]):
        parsed = TrialRecord.from_json(record, f"candidates[{i}]")
        assert json.dumps(parsed.to_json(), sort_keys=True) == json.dumps(record, sort_keys=True)


def test_a_record_as_an_earlier_study_stored_it_parses_and_writes_back_the_same():
    """study.db's `tfc:record` of a sync search's trial as the version before the type wrote it
    (its `history` after its values), and with a key this version does not know."""
    stored = ('{"candidate": "small_cnn#001", "architecture": "small_cnn", "learning_rate": 0.01, "batch_per_replica": 32, '
              '"val_accuracy": 0.75, "val_loss": 0.5, "train_seconds": 12.5, "images_per_second": 80.0, "epochs": 3, '
              '"epochs_run": 3, "resumed_from_epoch": 0, "stopped_early": false, "params": 1234, "started_at": 1700000000.0, '
              '"ended_at": 1700000012.5, "allreduce": {"dtype": "float16", "every": 1}, "confusion_matrix": [[3, 1], [0, 4]], '
              '"curve": [0.5, 0.6, 0.75], "start": 1, "trial": 0, "hyperparameters": {"learning_rate": 0.01, '
              '"batch_per_replica": 32}, "history": "history/small_cnn_001.csv", "state": "complete", "pruned_at_epoch": null}')
    old = json.loads(stored)
    parsed = TrialRecord.from_json(old, "study.db")
    assert parsed.to_json() == old and parsed.pruned_at_epoch is None and parsed.host is ABSENT
    later = TrialRecord.from_json({**old, "energy_source": "grid"}, "study.db")
    assert later.to_json() == {**old, "energy_source": "grid"} and later.unknown == {"energy_source": "grid"}


GOOD = trained().to_json()


@pytest.mark.parametrize("record, said", [
    ({k: v for k, v in GOOD.items() if k != "val_loss"}, "t.val_loss: Received nothing. Expected a loss ≥ 0 (or NaN)."),
    ({**GOOD, "epochs": "3"}, "t.epochs: Received '3'. Expected an integer 0–100,000."),
    ({**GOOD, "stopped_early": 0}, "t.stopped_early: Received 0. Expected true or false."),
    ({**GOOD, "state": "lost"}, "t.state: Received 'lost'. Expected one of complete, pruned, retried, failed, running, waiting."),
    ({**GOOD, "confusion_matrix": [[1, 2]]}, "t.confusion_matrix: Received [[1, 2]]. Expected a square table of counts."),
    ({**GOOD, "history": "../../etc/passwd"}, "t.history: Received '../../etc/passwd'. Expected a path inside the run folder."),
    ([1, 2], "t: Received [1, 2]. Expected a trial's record."),
], ids=["missing", "text-for-int", "int-for-bool", "unknown-state", "not-square", "outside-the-run", "not-a-record"])
def test_a_record_not_as_its_readers_expect_is_refused_in_one_line_naming_the_field(record, said):
    with pytest.raises(ResultsError) as caught:
        TrialRecord.from_json(record, "t")
    assert str(caught.value) == said and isinstance(caught.value, BadInput)


def test_the_chief_refuses_a_hosts_figures_that_leave_out_a_required_one():
    sent = {k: v for k, v in GOOD.items() if k in results_check.HOST_FIGURES and k != "params"}
    with pytest.raises(ResultsError, match=r"^h1's trial 0\.params: Received nothing\. Expected an integer 0–1e12\.$"):
        of_host(PLAIN, results_check.host_figures(sent, 2, "h1's trial 0"), "h1", "h1's trial 0")


def test_the_chiefs_knowledge_wins_over_what_a_host_says():
    record = of_host(PLAIN, {**GOOD, "candidate": "mine", "trial": 9}, "h1", "h1's trial 0")
    assert (record.candidate, record.trial, record.host, record.history) == (PLAIN.name, 0, "h1", "history/small_cnn_001.csv")


def test_the_fields_are_the_keys_results_json_checks_and_the_required_ones_alike():
    assert set(RECORD_KEYS) | {"history", "allreduce"} == set(KEYS)
    required = {f.name for f in dataclasses.fields(TrialRecord)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert required == {key for key, (needed, _, _) in RECORD_KEYS.items() if needed}


def test_a_record_is_frozen_and_its_json_a_copy():
    record = dataclasses.replace(trained(), curve=[0.5])
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.val_accuracy = 1.0
    doc = record.to_json()
    doc["curve"].append(0.9)
    doc["confusion_matrix"][0][0] = 99
    assert record.curve == [0.5] and record.confusion_matrix[0][0] == 3
