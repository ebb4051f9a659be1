
from __future__ import annotations

import json
import pytest
from trainer.spec.errors import ConfigError
from trainer.cluster.tfconfig import is_chief, parse_tf_config


W2 = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}


def cfg(cluster, task):
    return json.dumps({"cluster": cluster, "task": task})


def test_no_tf_config_is_a_single_chief_worker():
    for raw in (None, "", "  "):
        info = parse_tf_config(raw)
        assert info.num_workers == 0 and not info.is_multi_worker and is_chief(info)


def test_worker_zero_is_chief_without_a_chief_job():
    assert is_chief(parse_tf_config(cfg(W2, {"type": "worker", "index": 0})))
    assert not is_chief(parse_tf_config(cfg(W2, {"type": "worker", "index": 1})))


def test_chief_job_takes_the_role_and_trains():
    cluster = {"chief": ["a:1"], "worker": ["b:1", "c:1"]}
    chief = parse_tf_config(cfg(cluster, {"type": "chief", "index": 0}))
    worker0 = parse_tf_config(cfg(cluster, {"type": "worker", "index": 0}))
    assert is_chief(chief) and not is_chief(worker0)
    assert chief.num_workers == 3
    assert [name for name, _ in chief.tasks()] == ["chief:0", "worker:0", "worker:1"]
    assert [name for name, _ in worker0.peers()] == ["chief:0", "worker:1"]


def test_evaluator_is_not_counted_in_the_cluster():
    info = parse_tf_config(cfg({**W2, "evaluator": ["e:1"]}, {"type": "worker", "index": 1}))
    assert info.num_workers == 2 and "evaluator" not in info.cluster


@pytest.mark.parametrize("raw, fragment", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "Expected an object"),
    (cfg({}, {"type": "worker", "index": 0}), "cluster"),
    (cfg(W2, {"type": "worker", "index": 2}), "task.index: Received 2. Expected an integer 0–1"),
    (cfg(W2, {"type": "worker", "index": -1}), "task.index"),
    (cfg(W2, {"type": "worker", "index": "0"}), "task.index"),
    (cfg(W2, {"type": "chief", "index": 0}), "task.type: Received 'chief'"),
    (cfg(W2, {"type": "evaluator", "index": 0}), "side-car evaluation"),
    (cfg({"worker": ["a:1"], "ps": ["p:1"]}, {"type": "worker", "index": 0}), "parameter servers"),
    (cfg({"chief": ["a:1", "b:1"]}, {"type": "chief", "index": 0}), "cluster.chief: Received 2 addresses"),
    (cfg({"worker": ["nohostport"]}, {"type": "worker", "index": 0}), "cluster.worker[0]: Received 'nohostport'"),
    (cfg({"worker": ["a:70000"]}, {"type": "worker", "index": 0}), "port 1–65535"),
    (cfg({"worker": ["a:1", "a:1"]}, {"type": "worker", "index": 0}), "twice"),
    (cfg({"trainer": ["a:1"]}, {"type": "worker", "index": 0}), "cluster.trainer: Unknown job"),
    (json.dumps({"cluster": W2, "task": {"type": "worker", "index": 0}, "tasks": 1}), "Unknown key 'tasks'"),
    (cfg(W2, "worker"), "task: Received"),
])
def test_bad_tf_config_is_one_line_naming_the_field(raw, fragment):
    with pytest.raises(ConfigError) as err:
        parse_tf_config(raw)
    message = str(err.value)
    assert fragment in message and "\n" not in message and message.startswith("TF_CONFIG")
