"""The plan: the code hash and the run id."""
from __future__ import annotations

from launcher import plan as plan_mod
from launcher.inventory.model import Cluster
from launcher.inventory.schema import Inventory
from support.builders import cluster, host


def test_the_code_folder_is_hashed_once_per_command_however_many_hosts(tmp_path, monkeypatch):
    calls = []
    real = plan_mod.code_hash
    monkeypatch.setattr(plan_mod, "code_hash", lambda folder: calls.append(folder) or real(folder))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_bytes(b"x" * (3 << 20))  # read in chunks, not at once
    hosts = [{"name": f"h{i}", "address": f"10.0.0.{i + 1}"} for i in range(8)]
    inv = Inventory.model_validate({"cluster": "c", "hosts": hosts,
                                    "run": {"command": ["python", "train.py"], "code_dir": str(tmp_path / "code")}})
    made = plan_mod.make(Cluster(tmp_path / "inv.yaml", inv, tuple(host(h["name"], i) for i, h in enumerate(hosts))))
    assert len(calls) == 1 and made.container_image == f"tfcompose-trainer:run-{made.code_hash[:12]}"
    from launcher.stages import render
    bundles = render.render_cluster(made)
    assert len(bundles) == 8 and len(calls) == 1


def test_a_rebuilt_image_or_a_changed_dataset_source_is_a_new_run_and_nothing_else_is():
    made = plan_mod.make(cluster(2))
    assert plan_mod.complete(made, {}, {}).config_id == made.config_id  # render and export know no image: same id
    ids = {plan_mod.complete(made, {}, {}, image, data).config_id
           for image, data in (("sha256:a", ""), ("sha256:b", ""), ("sha256:a", "d1"), ("sha256:a", "d2"))}
    assert len(ids) == 4 and made.config_id not in ids
    assert plan_mod.complete(made, {}, {}, "sha256:a").config_id == plan_mod.complete(made, {}, {}, "sha256:a").config_id


def test_reaching_the_hosts_through_a_bastion_is_the_same_run():
    # Adding (or changing) a jump host must not restart a run that is training or make `collect`
    # look for another one: how the launcher reaches the hosts is not what they run.
    from dataclasses import replace
    from launcher.inventory.model import Bastion
    direct = cluster(2)
    gate = Bastion("gate", "192.168.7.1", "jump", 22)
    spec = direct.spec.model_copy(update={"ssh": direct.spec.ssh.model_copy(update={"proxy_jump": "jump@gate"}),
                                          "hosts": [h.model_copy(update={"proxy_jump": "none"}) for h in direct.spec.hosts]})
    jumped = Cluster(direct.path, spec, tuple(replace(h, jumps=(gate,), proxy_command="nc %h %p") for h in direct.hosts))
    assert plan_mod.make(jumped).config_id == plan_mod.make(direct).config_id
    assert plan_mod.make(replace(direct, hosts=(replace(direct.hosts[0], ssh_port=2200), *direct.hosts[1:]))).config_id \
        != plan_mod.make(direct).config_id            # what reaches the hosts' files still counts


def test_where_a_run_is_tracked_is_not_the_run_but_tracking_at_all_is():
    # A new tracker URI (or its token) must not restart a run; switching tracking on makes the
    # hosts write the best model in MLflow's format, so that is a run of its own.
    from dataclasses import replace
    from launcher.inventory.model import TrackerSettings
    plain = cluster(2)
    spec = plain.spec.model_copy(update={"tracking": {"mlflow": {"uri": "http://a:1"}}})
    one = replace(plain, spec=spec, tracking=TrackerSettings("http://u:tok-1@a:1", "x"))
    other = replace(one, tracking=TrackerSettings("http://u:tok-2@b:2", "y", "model"))
    assert plan_mod.make(one).config_id == plan_mod.make(other).config_id != plan_mod.make(plain).config_id


def test_how_the_hosts_were_bootstrapped_is_the_same_run():
    # The bootstrap section says how hosts were made ready, not what they run: an inventory that
    # gains one (or an older one without it) keeps its run.
    from launcher.inventory.schema import BootstrapSettings
    plain = cluster(2)
    spec = plain.spec.model_copy(update={"bootstrap": BootstrapSettings(docker="docker", offline=True)})
    assert plan_mod.make(Cluster(plain.path, spec, plain.hosts)).run_id == plan_mod.make(plain).run_id


def test_the_measured_link_reaches_train_yaml_only_for_auto_and_never_over_the_users_figure():
    import yaml
    from launcher.stages import render
    for train, expected in (({"allreduce": "auto"}, 94.1), ({"allreduce": {"auto": True, "link_mbit_s": 10.0}}, 10.0),
                            ({"allreduce": {"dtype": "bfloat16"}}, None), ({}, None)):
        made = plan_mod.make(cluster(2, train=train))
        measured = plan_mod.measured(made, 94.1234)
        assert measured.config_id == made.config_id          # measured again, still the same run
        config = yaml.safe_load(render.render_host(measured, measured.cluster.hosts[1])["train.yaml"])
        assert config["allreduce"]["link_mbit_s"] == expected, train
    unmeasured = plan_mod.measured(plan_mod.make(cluster(2, train={"allreduce": "auto"})), None)
    assert unmeasured.train_config().allreduce.link_mbit_s is None


def test_how_the_launcher_samples_the_hardware_is_not_what_runs():
    plain = plan_mod.make(cluster(2)).run_id
    assert plan_mod.make(cluster(2, telemetry={"enabled": False})).run_id == plain
    assert plan_mod.make(cluster(2, telemetry={"period_s": 0.5})).run_id == plain
