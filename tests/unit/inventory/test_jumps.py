"""Jump chains: `proxy_jump` parsed, each host's bastions resolved as OpenSSH resolves them, loops found."""
from __future__ import annotations

from pathlib import Path

import pytest

from launcher.inventory.jumps import MAX_HOPS, Jump, Loop, loop, parse, resolve
from launcher.inventory.ssh_config import Alias


@pytest.mark.parametrize("text, expected", [
    ("gate", (Jump("gate"),)),
    ("jump@gate", (Jump("gate", "jump"),)),
    ("gate:2200", (Jump("gate", None, 2200),)),
    ("j.doe@10.0.0.1:2200", (Jump("10.0.0.1", "j.doe", 2200),)),
    ("ssh://jump@gate.example.org:22", (Jump("gate.example.org", "jump", 22),)),
    ("[fd00::1]:2200", (Jump("fd00::1", None, 2200),)),
    ("jump@fd00::1", (Jump("fd00::1", "jump"),)),
    ("a, jump@b:23 ,c", (Jump("a"), Jump("b", "jump", 23), Jump("c"))),
    ("none", ()),
    ("None", ()),
])
def test_what_openssh_takes_is_taken(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize("text", [
    "", "gate:", "gate:0", "gate:65536", "gate:22x", "a b", "jump@", "@gate", "a,,b", "a,", "gate;reboot",
    "$(id)@gate", "jump@gate@x", "[fd00::1", "fe80::1%eth0", "-oProxyCommand=x", "gate:22:23",
    ",".join(f"b{i}" for i in range(MAX_HOPS + 1)),
])
def test_anything_else_is_refused_saying_why(text):
    with pytest.raises(ValueError) as err:
        parse(text)
    assert str(err.value)




def config(**aliases: Alias):
    return lambda name: aliases.get(name.replace(".", "_").replace("-", "_"), Alias())


def chain(text, lookup=config(), identity=None):
    return resolve(text, lookup, "me", identity, Path)


def test_each_hop_takes_user_port_and_key_from_the_text_then_the_config_then_the_defaults():
    lookup = config(gate=Alias("10.0.0.1", "jump", 2200, "~/.ssh/id_gate"), inner=Alias("10.1.0.1"))
    gate, inner, plain = chain("gate,ops@inner:23,10.2.0.1", lookup, identity="/keys/inv")
    assert (gate.name, gate.address, gate.user, gate.port, gate.identity_file) == \
        ("gate", "10.0.0.1", "jump", 2200, Path("~/.ssh/id_gate"))
    assert (inner.address, inner.user, inner.port, inner.identity_file) == ("10.1.0.1", "ops", 23, Path("/keys/inv"))
    assert (plain.address, plain.user, plain.port) == ("10.2.0.1", "me", 22)
    assert chain("ops@gate:2201", lookup)[0].target == "ops@10.0.0.1:2201"     # the text wins over the config


def test_the_first_hops_own_proxyjump_is_followed_the_later_hops_are_reached_through_the_earlier_ones():
    lookup = config(b2=Alias("10.0.0.2", proxy_jump="b1"), b1=Alias("10.0.0.1", proxy_jump="b0"),
                    b0=Alias("10.0.0.9"), b3=Alias("10.0.0.3", proxy_jump="elsewhere"))
    assert [b.name for b in chain("b2", lookup)] == ["b0", "b1", "b2"]
    assert [b.name for b in chain("b2,b3", lookup)] == ["b0", "b1", "b2", "b3"]
    assert [b.name for b in chain("b0,b2", lookup)] == ["b0", "b2"]


def test_a_proxycommand_is_kept_for_the_first_hop_only():
    lookup = config(gate=Alias(proxy_command="nc -X 5 -x socks:1080 %h %p"), inner=Alias(proxy_command="never"))
    gate, inner = chain("gate,inner", lookup)
    assert gate.proxy_command == "nc -X 5 -x socks:1080 %h %p" and inner.proxy_command is None


def test_proxyjump_lines_that_go_round_in_a_circle_are_a_loop_naming_the_way_round():
    lookup = config(a=Alias(proxy_jump="b"), b=Alias(proxy_jump="c"), c=Alias(proxy_jump="a"), d=Alias(proxy_jump="d"))
    with pytest.raises(Loop) as err:
        chain("a", lookup)
    assert err.value.path == ("a", "b", "c", "a")
    with pytest.raises(Loop, match="d → d"):
        chain("d", lookup)


def test_following_the_config_past_the_hop_limit_is_refused():
    lookup = config(**{f"b{i}": Alias(f"10.0.0.{i}", proxy_jump=f"b{i + 1}") for i in range(MAX_HOPS)})
    with pytest.raises(ValueError, match=f"at most {MAX_HOPS}"):
        chain("b0", lookup)


def test_none_in_the_config_ends_the_chain():
    lookup = config(gate=Alias("10.0.0.1", proxy_jump="none"))
    assert [b.address for b in chain("gate", lookup)] == ["10.0.0.1"]


def test_a_host_that_is_its_own_bastion_loops_directly_or_through_the_config():
    lookup = config(gate=Alias("10.0.0.1", port=2200), inner=Alias("10.0.0.2", proxy_jump="gpu-a"),
                    gpu_a=Alias("10.0.0.5"))
    assert "h1 (10.0.0.1:2200) would be its own bastion (gate → h1)" in loop("h1", "10.0.0.1", 2200, chain("gate", lookup))
    assert "its own bastion (gpu-a → inner → h1)" in loop("h1", "10.0.0.5", 22, chain("inner", lookup))
    assert loop("h1", "10.0.0.1", 22, chain("gate", lookup)) is None          # the same machine, another port
    assert loop("h1", "10.0.0.7", 22, chain("gate,inner", lookup)) is None


def test_a_hop_met_twice_is_a_loop():
    lookup = config(gate=Alias("10.0.0.1"), again=Alias("10.0.0.1"))
    assert "passes through me@10.0.0.1:22 twice (gate → again)" in loop("h1", "10.0.0.9", 22, chain("gate,again", lookup))
