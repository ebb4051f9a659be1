"""The retries waiting for a host (trainer/search/retries.py): which host takes one, and the list kept in
the study's storage so that a restarted chief finds it."""
from __future__ import annotations

from trainer.search.retries import Retries, chosen_for


class Storage:
    """An Optuna study's user attributes, as far as Retries uses them."""

    def __init__(self):
        self.user_attrs = {}

    def set_user_attr(self, key, value):
        self.user_attrs[key] = value


def retry(name: str, *not_on: str) -> dict:
    return {"params": {}, "name": name, "retry_of": 0, "not_on": list(not_on)}


def test_a_host_that_failed_a_retry_gets_it_only_when_every_host_there_failed_it_too():
    waiting = [retry("a~r1", "h1")]
    assert chosen_for(waiting, "h1", {"h2"}) is None                 # h2 did not fail it: it waits for h2
    assert chosen_for(waiting, "h2", {"h1"})["name"] == "a~r1"
    assert chosen_for(waiting, "h1", set())["name"] == "a~r1"        # h1 alone
    both = [retry("a~r2", "h1", "h2")]
    assert chosen_for(both, "h1", {"h2"})["name"] == "a~r2"          # else nobody ever would


def test_the_list_lives_in_the_storage_and_a_taken_retry_leaves_it():
    storage = Storage()
    Retries(storage).add({"lr": 0.1}, "a~r1", 3, ["h1"])
    Retries(storage).add({"lr": 0.2}, "b~r1", 4, ["h2"])
    again = Retries(storage)                                          # a restarted chief
    assert [r["name"] for r in again.waiting()] == ["a~r1", "b~r1"]
    assert again.take_for("h1", {"h2"})["name"] == "b~r1"
    assert [r["name"] for r in again.clear()] == ["a~r1"] and again.waiting() == []
