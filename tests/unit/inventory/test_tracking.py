"""`tracking.mlflow` resolved at load: the inventory's URI, else MLFLOW_TRACKING_URI; the experiment
from the inventory, MLFLOW_EXPERIMENT_NAME or the cluster; bad or missing values named by line."""
from __future__ import annotations

import pytest
import yaml

from launcher.errors import InventoryError
from launcher.inventory.load import load_cluster

HOSTS = [{"name": "a", "address": "10.0.0.1"}]


def write(tmp_path, **top):
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump({"cluster": "lab", "hosts": HOSTS, **top}, sort_keys=False))
    return path


def test_the_inventory_uri_wins_and_the_experiment_defaults_to_the_cluster(tmp_path):
    inv = write(tmp_path, tracking={"mlflow": {"uri": "http://mlflow.lab:5000", "register_as": "oasis-cnn"}})
    t = load_cluster(inv, environ={"MLFLOW_TRACKING_URI": "http://other:1", "USER": "u"}).tracking
    assert (t.uri, t.experiment, t.register_as, t.timeout_s) == ("http://mlflow.lab:5000", "lab", "oasis-cnn", 10.0)


def test_the_environment_gives_what_mlflow_users_set_there(tmp_path):
    inv = write(tmp_path, tracking={"mlflow": {}})
    t = load_cluster(inv, environ={"MLFLOW_TRACKING_URI": "https://u:tok@mlflow.lab", "MLFLOW_EXPERIMENT_NAME": "mri",
                                   "USER": "u"}).tracking
    assert (t.uri, t.experiment, t.register_as) == ("https://u:tok@mlflow.lab", "mri", None)
    assert load_cluster(write(tmp_path, train={}), environ={"MLFLOW_TRACKING_URI": "http://x:1", "USER": "u"}).tracking \
        is None                                              # the environment alone switches nothing on


@pytest.mark.parametrize("tracking, environ, expected", [
    ({"mlflow": {}}, {}, "inv.yaml:6:3: tracking.mlflow: Received no uri, and MLFLOW_TRACKING_URI is not set."),
    # A URI that is not one may still hold a password: not shown (it was, before #46).
    ({"mlflow": {"uri": "http://u:pa ss@mlflow.lab:5000"}}, {},
     "inv.yaml:7:5: tracking.mlflow.uri: Received a value that is not one (not shown: it may hold a password or token)."),
    ({"mlflow": {}}, {"MLFLOW_TRACKING_URI": "not a uri secret-123"},
     "inv.yaml:6:3: tracking.mlflow: Received MLFLOW_TRACKING_URI that is not a URI (shown without its value"),
    ({"mlflow": {"uri": "http://x:1", "register_as": "my model/v1"}}, {}, "tracking.mlflow.register_as: Received"),
    ({"mlflow": {"uri": "http://x:1", "timeout_s": 0}}, {}, "tracking.mlflow.timeout_s: Received 0."),
    ({"wandb": {}}, {}, "tracking.wandb: Unknown key 'wandb'."),
])
def test_bad_tracking_is_named_by_line_and_field(tmp_path, tracking, environ, expected):
    with pytest.raises(InventoryError) as err:
        load_cluster(write(tmp_path, tracking=tracking), environ={"USER": "u", **environ})
    lines = err.value.lines               # every problem at once: `wandb:` unknown, and `mlflow:` missing
    assert len(lines) == (2 if "wandb" in tracking else 1) and expected in lines[-1], lines
    assert "secret-123" not in "".join(lines) and "pa ss" not in "".join(lines)


def test_tracking_goes_with_the_built_in_trainer_only(tmp_path):
    (tmp_path / "code").mkdir()
    inv = write(tmp_path, run={"command": ["python", "t.py"], "code_dir": "code"},
                tracking={"mlflow": {"uri": "http://x:1"}})
    with pytest.raises(InventoryError) as err:
        load_cluster(inv, environ={"USER": "u"})
    assert "tracking: Received tracking with run: (your own program)" in err.value.lines[0]


def test_without_mlflow_installed_tracking_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    import importlib.util
    from launcher.cli import main
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    inv = write(tmp_path, tracking={"mlflow": {"uri": "http://x:1"}})
    assert main(["validate", "-i", str(inv)]) == 2
    err = capsys.readouterr().err
    assert "tracking.mlflow: Received an MLflow tracker, but MLflow's client is not installed" in err
    assert "pip install 'tfcompose[tracking]'" in err and "Traceback" not in err
