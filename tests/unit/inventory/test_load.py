"""Inventory validation: the bad-inventory corpus, defaults, overrides and ~/.ssh/config."""
from __future__ import annotations

import pytest
from launcher.inventory.load import load_cluster
from launcher.cli import main
from launcher.errors import InventoryError
from support.common import DATA, REPO  # noqa: E402
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st
from launcher.inventory.schema import Defaults, HostEntry, Inventory, SSHSettings
from trainer.spec.config import DatasetConfig, TrainConfig


BAD = sorted((DATA / "bad_inventories").glob("*.yaml"))


def test_the_corpus_is_large_enough():
    assert len(BAD) >= 25


@pytest.mark.parametrize("case", BAD, ids=[p.stem for p in BAD])
def test_bad_inventory_exits_2_with_the_expected_lines(case, capsys, monkeypatch):
    monkeypatch.delenv("TFC_TEST_UNSET_ADDRESS", raising=False)
    code = main(["validate", "-i", str(case)])
    captured = capsys.readouterr()
    expected = (case.with_suffix(".expected").read_text().replace("{f}", str(case))
                .replace("{d}", str(case.parent)).replace("{p}", str(case.parent.parent)))
    assert code == 2
    lines = captured.err.splitlines()
    assert lines[:-1] == expected.splitlines()
    assert lines[-1].startswith("tfcompose: ") and "nothing was contacted" in lines[-1]
    assert "Traceback" not in captured.err and captured.out == ""


def write(tmp_path, text, name="inventory.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_and_per_host_overrides(tmp_path):
    path = write(tmp_path, """
cluster: lab
ssh: {user: alice, port: 2200, config_file: ./none}
defaults: {tf_port: 3000, workdir: /srv/tfc, gpus: 2, data_dir: /data, nic: eth1, shm_size: 4g}
hosts:
  - {name: a, address: 10.0.0.1}
  - {name: b, address: 10.0.0.2, chief: true, ssh_user: bob, ssh_port: 22, tf_port: 3001, workdir: /x, gpus: [1], data_dir: /d, nic: ib0, shm_size: host}
""")
    cluster = load_cluster(path)
    b, a = cluster.hosts  # the chief comes first
    assert (b.name, b.index, b.chief, a.index, a.chief) == ("b", 0, True, 1, False)
    assert (a.ssh_user, a.ssh_port, a.tf_port, a.workdir, a.gpus, a.data_dir, a.nic, a.shm_size) == \
        ("alice", 2200, 3000, "/srv/tfc", 2, "/data", "eth1", "4g")
    assert (b.ssh_user, b.ssh_port, b.tf_port, b.workdir, b.gpus, b.data_dir, b.nic, b.shm_size) == \
        ("bob", 22, 3001, "/x", [1], "/d", "ib0", "host")
    assert a.bundle_dir == "/srv/tfc/lab" and b.tf_address == "10.0.0.2:3001"


def test_first_host_is_chief_when_none_is_marked(tmp_path):
    cluster = load_cluster(write(tmp_path, "cluster: c\nssh: {user: u}\nhosts:\n  - {name: x, address: 10.0.0.9}\n  - {name: y, address: 10.0.0.8}\n"))
    assert [h.name for h in cluster.hosts] == ["x", "y"] and cluster.chief.name == "x"


def test_env_and_home_expansion_and_relative_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_A", "10.1.2.3")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("not really a key")
    (tmp_path / "home-key").write_text("x")
    path = write(tmp_path, """
cluster: c
ssh: {user: u, identity_file: keys/id, config_file: ./none}
hosts:
  - {name: a, address: "${GPU_A}"}
  - {name: b, address: "${GPU_B:-10.1.2.4}", identity_file: ~/home-key}
""")
    a, b = load_cluster(path).hosts
    assert a.address == "10.1.2.3" and b.address == "10.1.2.4"
    assert a.identity_file == tmp_path / "keys" / "id" and b.identity_file == tmp_path / "home-key"


def test_ssh_config_aliases_resolve_hostname_user_port_and_key(tmp_path):
    (tmp_path / "id_lab").write_text("x")
    (tmp_path / "ssh_config").write_text(
        f"Host gpu-a\n  HostName 192.168.7.10\n  User carol\n  Port 2201\n  IdentityFile {tmp_path}/id_lab\n")
    path = write(tmp_path, """
cluster: c
ssh: {config_file: ./ssh_config}
hosts:
  - {name: a, address: gpu-a}
  - {name: b, address: 192.168.7.11, ssh_user: dave}
""")
    a, b = load_cluster(path).hosts
    assert (a.address, a.ssh_user, a.ssh_port, a.identity_file) == ("192.168.7.10", "carol", 2201, tmp_path / "id_lab")
    assert a.tf_address == "192.168.7.10:2222"  # TF_CONFIG names the real address, not the alias
    assert (b.ssh_user, b.ssh_port) == ("dave", 22)


def test_inventory_wins_over_ssh_config(tmp_path):
    (tmp_path / "ssh_config").write_text("Host *\n  User zed\n  Port 2299\n")
    path = write(tmp_path, "cluster: c\nssh: {user: amy, config_file: ./ssh_config}\nhosts:\n  - {name: a, address: 10.0.0.1, ssh_port: 2000}\n")
    (a,) = load_cluster(path).hosts
    assert (a.ssh_user, a.ssh_port) == ("amy", 2000)


def test_proxy_jump_for_every_host_per_host_or_none_and_each_bastion_completed_from_the_ssh_config(tmp_path):
    (tmp_path / "id_gate").write_text("x")
    (tmp_path / "ssh_config").write_text(f"Host gate\n  HostName 192.168.7.1\n  User jump\n  Port 2200\n"
                                         f"  IdentityFile {tmp_path}/id_gate\n")
    path = write(tmp_path, """
cluster: c
ssh: {user: amy, proxy_jump: gate, config_file: ./ssh_config}
hosts:
  - {name: a, address: 10.0.0.1}
  - {name: b, address: 10.0.0.2, proxy_jump: "ops@gate,10.0.0.9:23"}
  - {name: c, address: 10.0.0.3, proxy_jump: none}
""")
    a, b, c = load_cluster(path, environ={"USER": "me"}).hosts
    assert [(j.target, j.identity_file) for j in a.jumps] == [("jump@192.168.7.1:2200", tmp_path / "id_gate")]
    assert [j.target for j in b.jumps] == ["ops@192.168.7.1:2200", "me@10.0.0.9:23"]   # not ssh.user: a host's
    assert c.jumps == () and (a.ssh_user, a.address) == ("amy", "10.0.0.1")


def test_the_ssh_configs_proxyjump_and_proxycommand_unless_the_inventory_says_otherwise(tmp_path):
    (tmp_path / "ssh_config").write_text("Host gpu-*\n  ProxyJump gate\nHost gpu-a\n  HostName 10.0.0.1\n"
                                         "Host gpu-b\n  HostName 10.0.0.2\nHost gate\n  HostName 192.168.7.1\n"
                                         "Host cloud\n  HostName 10.0.0.3\n  ProxyCommand nc -x socks:1080 %h %p\n")
    path = write(tmp_path, """
cluster: c
ssh: {user: amy, config_file: ./ssh_config}
hosts:
  - {name: a, address: gpu-a}
  - {name: b, address: gpu-b, proxy_jump: none}
  - {name: c, address: cloud}
  - {name: d, address: cloud, tf_port: 2223, proxy_jump: gate}
""")
    a, b, c, d = load_cluster(path, environ={"USER": "me"}).hosts
    assert [j.target for j in a.jumps] == ["me@192.168.7.1:22"] and a.proxy_command is None
    assert b.jumps == () and b.proxy_command is None
    assert c.jumps == () and c.proxy_command == "nc -x socks:1080 10.0.0.3 22"    # tokens expanded
    assert [j.name for j in d.jumps] == ["gate"] and d.proxy_command is None


def test_a_missing_bastion_key_from_the_ssh_config_is_named(tmp_path):
    (tmp_path / "ssh_config").write_text(f"Host gate\n  IdentityFile {tmp_path}/gone\n")
    path = write(tmp_path, "cluster: c\nssh: {user: u, proxy_jump: gate, config_file: ./ssh_config}\n"
                           "hosts:\n  - {name: a, address: 10.0.0.1}\n")
    with pytest.raises(InventoryError) as err:
        load_cluster(path)
    assert err.value.lines == [f"{path}:2:16: ssh.proxy_jump: Received 'gate'; its bastion gate's key "
                               f"'{tmp_path}/gone' does not exist. Expected an existing private key file (the ssh "
                               "config's IdentityFile for it, else ssh.identity_file)."]


def test_every_problem_is_reported_in_file_order(tmp_path):
    path = write(tmp_path, "cluster: C\nhosts:\n  - {name: a, address: 10.0.0.1, tf_port: 0}\n  - {name: a, address: 10.0.0.2, gpus: x}\n")
    with pytest.raises(InventoryError) as err:
        load_cluster(path)
    fields = [line.split(": ")[1] for line in err.value.lines]
    assert fields == ["cluster", "hosts[0].tf_port", "hosts[1].name", "hosts[1].gpus"]


def test_the_example_inventory_validates_and_documents_every_field(tmp_path, monkeypatch):
    from launcher.inventory.schema import (BootstrapSettings, Defaults, HostEntry, Inventory, KubernetesTarget,
                                           MlflowTracking, RunSpec, SlurmTarget, SSHSettings, TelemetrySettings, Tracking)
    from trainer.spec.config import Range, SearchConfig, TrainConfig
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("a key")
    example = REPO / "inventory.example.yaml"
    cluster = load_cluster(example)
    assert [h.name for h in cluster.hosts] == ["gpu-a", "gpu-b"] and cluster.hosts[1].gpus == [0, 1]
    text = example.read_text()
    for model in (Inventory, SSHSettings, Defaults, TrainConfig, SearchConfig, RunSpec, KubernetesTarget, SlurmTarget,
                  Tracking, MlflowTracking, TelemetrySettings, BootstrapSettings):
        assert all(f"{name}:" in text for name in model.model_fields), model
    assert all(kind in text for kind in Range.model_fields)
    for name in HostEntry.model_fields:  # per-host overrides are named in a comment or used
        assert name in text, name


def test_the_example_names_every_slurm_runtime():
    from typing import get_args
    from launcher.inventory.schema import SlurmTarget
    lines = (REPO / "inventory.example.yaml").read_text().splitlines()
    (line,) = [line for line in lines if line.strip().startswith("runtime:")]
    assert all(runtime in line for runtime in get_args(SlurmTarget.model_fields["runtime"].annotation))


KEYS = sorted({k for m in (Inventory, SSHSettings, Defaults, HostEntry, TrainConfig, DatasetConfig)
               for k in m.model_fields})


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["all", "127.0.0.1", "10.0.0.1", "a-b", "/opt/x", "${HOME}",
                                                           "${NOPE_UNSET}", "../..", "$(id)", "small_cnn"]))


keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=12))


values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(keys, inner, max_size=5)), max_leaves=25)


hosts = st.lists(st.dictionaries(st.sampled_from(sorted(HostEntry.model_fields)), values, max_size=6), max_size=4)


documents = st.one_of(values, st.fixed_dictionaries({"cluster": values, "hosts": hosts},
                                                    optional={k: values for k in ("ssh", "defaults", "train", "image")}))


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def load_or_bad_input(path) -> None:
    try:
        load_cluster(path, environ={"HOME": "/nonexistent"})
    except InventoryError as exc:
        assert exc.lines and all(line and "\n" not in line for line in exc.lines)


@FUZZ
@given(doc=documents)
def test_structured_documents_never_raise_anything_else(tmp_path, doc):
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    load_or_bad_input(path)


@FUZZ
@given(raw=st.binary(max_size=400))
def test_raw_bytes_never_raise_anything_else(tmp_path, raw):
    path = tmp_path / "inventory.yaml"
    path.write_bytes(raw)
    load_or_bad_input(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents)
def test_the_cli_answers_0_or_2_without_a_traceback(tmp_path, capsys, doc):
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    assert main(["validate", "-i", str(path)]) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err
