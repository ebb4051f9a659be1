"""What crosses the network in a parallel search (trainer/search/wire.py): calls and answers as typed
messages, each field checked, and the proof that a call is its host's own."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from trainer.search import wire
from trainer.spec.trials import Trial


def test_every_call_and_answer_survives_the_wire_as_itself():
    calls = [wire.Ask(2, 1), wire.Report(3, 2, 0.75, 0.4), wire.Report(3, 2, math.nan, math.nan), wire.Beat(3),
             wire.Finish(3, {"val_accuracy": 0.5}), wire.Fail(3, "OOM", build=False)]
    for call in calls:
        verb, doc = wire.encode_call(call)
        back = wire.decode_call(verb, doc)
        assert type(back) is type(call) and (back == call or math.isnan(back.val_accuracy))
    trial = Trial("small_cnn#001", "small_cnn", 0.01, 32, {"width": 64}, 4, 1)
    for verb, answer in (("next", wire.Offer(trial)), ("next", wire.Wait(2.0)), ("next", wire.Done("used up")),
                         ("report", wire.Verdict(prune=True))):
        assert wire.decode_answer(verb, wire.encode_answer(answer)) == answer


@pytest.mark.parametrize("verb,body", [
    ("report", {"number": 1, "epoch": 1, "val_accuracy": 1e300}), ("report", {"number": 1, "epoch": 1, "val_accuracy": -0.1}),
    ("report", {"number": 1, "epoch": 0, "val_accuracy": 0.5}), ("report", {"number": True, "epoch": 1, "val_accuracy": 0.5}),
    ("report", {"number": 1, "epoch": 1, "val_accuracy": 0.5, "val_loss": math.inf}),
    ("next", {"replicas": 0}), ("finish", {"number": 1, "figures": []}), ("fail", {"number": 1, "why": 7}),
    ("delete", {}), ("next", [])])
def test_a_call_that_is_not_what_a_trainer_sends_is_refused_naming_what(verb, body):
    with pytest.raises(wire.WireError):
        wire.decode_call(verb, body)


def test_a_fail_reason_is_bounded_and_printable():
    call = wire.decode_call("fail", {"number": 1, "why": "\x1b[2J" + "x" * 5000})
    assert "\x1b" not in call.why and len(call.why) == wire.MAX_WHY


@given(st.text(min_size=1, max_size=30).filter(lambda h: h != "h1"))
def test_a_host_key_signs_for_its_host_alone(other):
    run_key = bytes(32)
    gate = wire.Gate(run_key, None)
    body = b'{"replicas":1}'
    mine = wire.sign_call(wire.host_key(run_key, "h1"), "next", "h1", body)
    gate.check("next", mine, body, "10.0.0.1")
    posing = wire.sign_call(wire.host_key(run_key, other), "next", "h1", body)
    with pytest.raises(wire.Refused):
        gate.check("next", posing, body, "10.0.0.1")
    with pytest.raises(wire.Refused):
        gate.check("beat", wire.sign_call(wire.host_key(run_key, "h1"), "next", "h1", body), body, "10.0.0.1")


def test_a_key_file_is_what_the_launcher_writes_or_refused(tmp_path):
    good = tmp_path / "queue.key"
    good.write_text(bytes(range(32)).hex() + "\n")
    assert wire.read_key(good) == bytes(range(32))
    good.write_text("not a key")
    with pytest.raises(wire.WireError):
        wire.read_key(good)
