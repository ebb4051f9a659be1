"""`tfcompose init`'s decisions on facts as hosts report them: names, the chief, nic, the bootstrap
hint, the search; and a host's answer that tries to break the file it is written into."""
from __future__ import annotations

import pytest
import yaml

from launcher.bootstrap import facts, starter

READY = "docker_info=24.0.7|/var/lib/docker|runc,\ndocker_user=ok\ncompose=2.24.6\n"


def host(address: str, answer: str, user=None, port=None) -> starter.Seen:
    text = "os_name=Ubuntu 22.04.4 LTS\narch=amd64\n" + answer + "end=probe\n"
    return starter.Seen(starter.Target(address, user, port), facts.parse(text))


def write(seen, **kw) -> dict:
    text = starter.inventory_text(seen, "lab", "/x/inventory.schema.json", kw.pop("ssh", {}), "tfcompose init …")
    assert text.startswith("# yaml-language-server: $schema=/x/inventory.schema.json\n")
    return yaml.safe_load(text), text


GPU = "nvidia_smi=ok\nnvidia_said=550.54.15, NVIDIA A100-SXM4-40GB, 40960 MiB\nnvidia_said=550.54.15, NVIDIA A100-SXM4-40GB, 40960 MiB\n"


def test_the_chief_is_the_host_with_the_fastest_link_then_the_most_gpus():
    slow = host("10.0.0.1", READY + GPU + "hostname=a\nnic=eth0 up 1000 10.0.0.1/24\nroute=10.0.0.2 dev eth0 src 10.0.0.1\n")
    fast = host("10.0.0.2", READY + "hostname=b\nnic=ens5 up 25000 10.0.0.2/24\nroute=10.0.0.1 dev ens5 src 10.0.0.2\n")
    doc, text = write([slow, fast])
    assert [h.get("chief", False) for h in doc["hosts"]] == [False, True]
    assert [h["nic"] for h in doc["hosts"]] == ["eth0", "ens5"] and "25000 Mbit/s" in text
    assert doc["hosts"][0]["gpus"] == 2 and "2× NVIDIA A100-SXM4-40GB, 40 GiB; driver 550.54.15" in text
    tie = host("10.0.0.3", READY + GPU + "hostname=c\nnic=ens5 up 25000 10.0.0.3/24\nroute=10.0.0.1 dev ens5\n")
    doc, _ = write([fast, tie])
    assert [h.get("chief", False) for h in doc["hosts"]] == [False, True]


def test_a_host_without_docker_gets_the_bootstrap_hint_and_a_virtual_route_no_nic():
    bare = host("gpu-b.lab", "hostname=gpu-b\nnic=docker0 up - 172.17.0.1/16\nroute=10.0.0.1 dev docker0\n")
    doc, text = write([host("10.0.0.1", READY + "hostname=gpu-a\n"), bare])
    assert doc["bootstrap"] == {"docker": "distro"} and "# gpu-b: no usable Docker" in text
    assert "nic" not in doc["hosts"][1] and "loopback or virtual interface" in text
    assert "could not be read" in text          # the first host: no route said


def test_names_are_the_hosts_own_made_valid_and_unique():
    same = "hostname=GPU_Box.lab.example\n"
    seen = [host("10.0.0.1", same), host("10.0.0.2", same), host("10.0.0.3", "hostname=\n"), host("10.0.0.4", "hostname=123\n")]
    assert starter.names(seen) == ["gpu-box", "gpu-box-2", "h2", "h3"]


@pytest.mark.parametrize("text,expected", [("gpu-a", starter.Target("gpu-a")), ("me@10.0.0.1:2200", starter.Target("10.0.0.1", "me", 2200)),
                                           ("fe80::1", starter.Target("fe80::1"))])
def test_targets_parse(text, expected):
    assert starter.parse_target(text) == expected


@pytest.mark.parametrize("text", ["", "a b", "h:0", "h:x", "Root@h", "h;reboot"])
def test_a_bad_target_is_refused(text):
    with pytest.raises(ValueError):
        starter.parse_target(text)


def test_a_hostile_answer_cannot_add_keys_or_lines_to_the_file():
    evil = ("os_name=x\\ncluster: evil\ndocker_info=1|/|r\nhostname=a\\nchief: true\n"
            "nvidia_smi=ok\nnvidia_said=550.54.15, GPU\\n  - name: x, 1 MiB\nnic=eth0: up 1000 -\n")
    doc, text = write([host("10.0.0.1", evil), host("10.0.0.2", READY)])
    assert doc["cluster"] == "lab" and len(doc["hosts"]) == 2 and set(doc) <= {"cluster", "defaults", "hosts", "train", "bootstrap"}
    assert all(set(h) <= {"name", "address", "chief", "gpus", "nic"} for h in doc["hosts"])
