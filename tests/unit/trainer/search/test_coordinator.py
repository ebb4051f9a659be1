"""The chief's queue policy (trainer/search/coordinator.py) without a network: hand-outs, a host that fails
every trial, the launcher's word that a host is gone, and the search's progress for the live view."""
from __future__ import annotations

import threading
import time

import pytest

from trainer.spec.config import TrainConfig
from trainer.search.coordinator import QUARANTINE_AFTER, Coordinator, expected_epochs, halving_epochs
from trainer.spec.progress import SEARCH_FILE, parse_search
from trainer.search.study import Study
from trainer.search.wire import Ask, Beat, Done, Fail, Finish, Offer, Report, Wait


def coordinator(tmp_path, hosts=("h1", "h2"), **search) -> Coordinator:
    cfg = TrainConfig.model_validate({"candidates": ["small_cnn"], "epochs": 4, "search": {
        "mode": "parallel", "sampler": "random", "trials": 6, "seed": 1,
        "learning_rate": {"log_uniform": [1e-4, 1e-1]}, **search}})
    said = []
    made = Coordinator(Study(cfg, tmp_path / "backup"), lost_after_s=60, log=said.append, hosts=list(hosts), classes=2,
                       folder=tmp_path / "backup", progress=tmp_path / SEARCH_FILE)
    made.said = said
    return made


FIGURES = {"val_accuracy": 0.5, "val_loss": 0.5, "train_seconds": 1.0, "images_per_second": 10.0, "params": 100,
           "epochs": 4}


def test_a_host_that_fails_every_trial_burns_at_most_a_few_and_its_trials_go_elsewhere(tmp_path):
    queue = coordinator(tmp_path)
    queue.handle("h2", Ask())                          # h2 is there too
    failed_on_h1 = []
    while isinstance(answer := queue.handle("h1", Ask()), Offer):
        failed_on_h1.append(answer.trial.name)
        queue.handle("h1", Fail(answer.trial.number, "ResourceExhaustedError: OOM when allocating"))
    assert len(failed_on_h1) == QUARANTINE_AFTER and isinstance(answer, Wait)
    assert any("h1 failed 3 trials in a row" in line for line in queue.said)
    trained = []
    while isinstance(answer := queue.handle("h2", Ask()), Offer):
        trained.append(answer.trial.name)
        queue.handle("h2", Finish(answer.trial.number, FIGURES))
    assert isinstance(answer, Done) and {f"{n}~r1" for n in failed_on_h1} <= set(trained)
    assert queue.study.counts()["done"] == 6 and queue.summary()["quarantined"] == ["h1"]   # none of the budget lost


def test_when_every_host_fails_its_trials_the_search_stops_saying_why(tmp_path):
    queue = coordinator(tmp_path, hosts=("h1",))
    while isinstance(answer := queue.handle("h1", Ask()), Offer):
        queue.handle("h1", Fail(answer.trial.number, "OOM"))
    assert isinstance(answer, Done) and "no host is left to train: h1 failed 3 trials in a row" in answer.why
    assert queue.study.done() and all(r["state"] in ("retried", "failed") for r in queue.study.records())


def test_a_trial_its_builder_refuses_fails_for_good_without_counting_against_the_host(tmp_path):
    queue = coordinator(tmp_path)
    offer = queue.handle("h1", Ask())
    queue.handle("h1", Fail(offer.trial.number, "ValueError: width must be even", build=True))
    assert queue.failures.get("h1", 0) == 0 and queue.study.records()[0]["state"] == "failed"


def test_the_launchers_word_that_a_host_is_gone_hands_its_trial_on_within_seconds(tmp_path):
    queue = coordinator(tmp_path)
    mine = queue.handle("h1", Ask()).trial
    stop = threading.Event()
    threading.Thread(target=queue.watch, args=(stop,), daemon=True).start()
    try:
        (tmp_path / "backup" / "signals").mkdir(parents=True)
        (tmp_path / "backup" / "signals" / "h1.lost").write_text("exit (exit code 137 after 0 restarts)\x1b[2J")
        started = time.monotonic()
        while "h1" not in queue.lost and time.monotonic() - started < 10:
            time.sleep(0.1)
        assert queue.lost["h1"] == [f"{mine.name}~r1"] and time.monotonic() - started < 5   # one watch tick, on a busy machine
        assert not list((tmp_path / "backup" / "signals").iterdir())
        assert any("the launcher saw h1 exit (exit code 137" in line and "\x1b" not in line for line in queue.said)
        assert queue.handle("h2", Ask()).trial.name == f"{mine.name}~r1"
    finally:
        stop.set()


def test_where_the_search_is_gets_written_whatever_the_hosts_are_doing(tmp_path):
    queue = coordinator(tmp_path)
    first = queue.handle("h1", Ask()).trial
    queue.handle("h2", Ask())
    queue.handle("h1", Report(first.number, 1, 0.4, 1.0))
    stop = threading.Event()
    threading.Thread(target=queue.watch, args=(stop,), daemon=True).start()
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / SEARCH_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        progress = parse_search((tmp_path / SEARCH_FILE).read_text())
    finally:
        stop.set()
    assert progress is not None and (progress.running, progress.left, progress.budget) == (2, 4, 6)
    assert progress.hosts["h1"]["trial"] == first.name and progress.hosts["h1"]["epoch"] == 1
    assert progress.hosts["h1"]["state"] == "training" and not progress.finished


def test_the_epochs_a_trial_is_expected_to_train_under_halving():
    assert halving_epochs([], 9, 3) == 9
    # every trial reaches epoch 1; 1/3 go on to 3; 1/9 to 9: 2/3·1 + 2/9·3 + 1/9·9
    assert halving_epochs([1, 3], 9, 3) == pytest.approx(2 / 3 + 2 / 3 + 1, abs=0.01)
    cfg = TrainConfig.model_validate({"epochs": 9, "search": {"pruner": "asha", "sampler": "random", "trials": 4,
                                                                "learning_rates": [0.1]}})
    assert expected_epochs(cfg, {"epochs_per_trial": 0.0, "done": 0, "pruned": 0}) == halving_epochs([1, 3], 9, 3)
    assert expected_epochs(cfg, {"epochs_per_trial": 5.5, "done": 2, "pruned": 1}) == 5.5


def test_a_trials_first_epoch_is_not_judged_by_another_trials_pace(tmp_path):
    queue = coordinator(tmp_path)
    queue.lost_after_s = 1.0
    quick = queue.handle("h1", Ask()).trial
    time.sleep(0.1)
    queue.handle("h1", Report(quick.number, 1, 0.5, 1.0))        # a small model: an epoch in 0.1 s
    slow = queue.handle("h2", Ask()).trial                        # a deep one: its first epoch takes long
    time.sleep(1.5)
    queue.handle("h2", Beat(slow.number))                        # alive, beating, no epoch yet
    assert queue._why_lost(slow.number, "h2", time.monotonic()) == ""
    queue.handle("h2", Report(slow.number, 1, 0.5, 1.0))          # its own pace: 1.6 s an epoch
    time.sleep(0.3)
    assert queue._why_lost(slow.number, "h2", time.monotonic()) == ""



def test_a_retry_every_host_there_has_lost_goes_to_one_of_them_and_the_search_ends(tmp_path):
    queue = coordinator(tmp_path)
    first = queue.handle("h1", Ask()).trial
    own = queue.handle("h2", Ask()).trial                     # h2 is there, busy with a trial of its own
    queue.handle("h1", Fail(first.number, "OOM"))
    queue.handle("h2", Finish(own.number, FIGURES))
    retry = queue.handle("h2", Ask()).trial
    assert retry.name == f"{first.name}~r1"
    queue.handle("h2", Fail(retry.number, "OOM"))             # lost on every host there: none is better placed
    trained, answers = [], []
    for _ in range(20):                                      # each host asks in turn, finishing what it gets
        for host in ("h1", "h2"):
            answers.append(answer := queue.handle(host, Ask()))
            if isinstance(answer, Offer):
                trained.append(answer.trial.name)
                queue.handle(host, Finish(answer.trial.number, FIGURES))
    assert trained[0] == f"{first.name}~r2" and isinstance(answers[-1], Done) and queue.study.done()


def test_when_the_last_host_able_to_train_is_lost_the_search_stops_instead_of_waiting_for_ever(tmp_path):
    queue = coordinator(tmp_path, hosts=("h0", "h1"))
    for _ in range(QUARANTINE_AFTER):                          # h0 fails every trial it gets: it gets no more
        offer = queue.handle("h0", Ask())
        queue.handle("h0", Fail(offer.trial.number, "OOM"))
    assert not queue.stopped                                   # h1, of the cluster, has not asked yet: it may
    training = queue.handle("h1", Ask())
    assert isinstance(training, Offer) and not queue.stopped   # h1 trains: the search goes on
    (tmp_path / "backup" / "signals").mkdir(parents=True)
    (tmp_path / "backup" / "signals" / "h1.lost").write_text("exit (exit code 137 after 2 restarts)")
    stop = threading.Event()
    threading.Thread(target=queue.watch, args=(stop,), daemon=True).start()
    try:
        started = time.monotonic()
        while not queue.stopped and time.monotonic() - started < 10:
            time.sleep(0.1)
    finally:
        stop.set()
    answer = queue.handle("h0", Ask())
    assert isinstance(answer, Done) and "h0 failed 3 trials in a row; h1 lost" in answer.why
    assert queue.study.done()


def quarantine(queue: Coordinator, host: str) -> None:
    for _ in range(QUARANTINE_AFTER):
        offer = queue.handle(host, Ask())
        queue.handle(host, Fail(offer.trial.number, "OOM"))


def test_a_host_silent_for_a_moment_while_the_others_are_quarantined_is_waited_for_not_given_up(tmp_path):
    queue = coordinator(tmp_path, hosts=("h0", "h1"))
    quarantine(queue, "h0")
    mine = queue.handle("h1", Ask()).trial
    queue.seen[mine.number] = time.monotonic() - 61           # silent past lost_after_s (60 s): a network blip
    stop = threading.Event()
    threading.Thread(target=queue.watch, args=(stop,), daemon=True).start()
    try:
        started = time.monotonic()
        while "h1" not in queue.gone and time.monotonic() - started < 10:
            time.sleep(0.1)
        time.sleep(1.5)                                       # a watch tick more
        assert "h1" in queue.gone and not queue.stopped       # its trial handed on, the search waits for h1
        assert queue.handle("h1", Ask()).trial.name == f"{mine.name}~r1"     # back: it takes the retry
    finally:
        stop.set()


def test_a_host_of_the_cluster_that_never_asks_is_given_up_after_twice_lost_after_s(tmp_path):
    queue = coordinator(tmp_path, hosts=("h0", "h1"))
    quarantine(queue, "h0")
    assert not queue.stopped                                  # h1 may still be starting
    queue.started -= 121                                      # twice lost_after_s (60 s) later, it never asked
    queue._stop_if_nobody_left()
    assert "no host is left to train: h0 failed 3 trials in a row; h1 lost" in queue.stopped


def test_an_error_in_one_look_of_the_watch_is_said_once_and_the_watch_goes_on(tmp_path, monkeypatch):
    """CI: Study.lose raised in the watch's thread, which ended, and the search waited for ever with
    a trial 'running'. Now the error is said, and the next look hands the trial on."""
    queue = coordinator(tmp_path)
    mine = queue.handle("h1", Ask()).trial
    real_lose, failures = queue.study.lose, iter([KeyError("tfc:name"), KeyError("tfc:name")])

    def lose_failing_twice(number, why):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real_lose(number, why)
    monkeypatch.setattr(queue.study, "lose", lose_failing_twice)
    stop = threading.Event()
    threading.Thread(target=queue.watch, args=(stop,), daemon=True).start()
    try:
        (tmp_path / "backup" / "signals").mkdir(parents=True)
        (tmp_path / "backup" / "signals" / "h1.lost").write_text("exit")
        started = time.monotonic()
        while not queue.lost.get("h1") and time.monotonic() - started < 20:
            time.sleep(0.1)
        assert queue.lost.get("h1") == [f"{mine.name}~r1"], queue.said
        assert [line for line in queue.said if "watch met an error" in line] == [
            "[queue] the watch met an error, and goes on: KeyError: 'tfc:name'"]
    finally:
        stop.set()
