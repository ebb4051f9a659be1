"""The image stage: what each chain host got."""
from __future__ import annotations

from launcher.image import relay, stage as images
from support.builders import chain_hosts
from launcher.ssh.fanout import GroupResult


# --- outcomes (pure) ---------------------------------------------------------------------------
A, B, C = chain_hosts()


def test_hosts_the_chain_served_are_relayed_the_others_say_why():
    chain = [A, B, C]
    walked = relay.ChainResult(reached=["a", "b"], broken={"c": "b → c: the hop ended with status 255"})
    checked = GroupResult("image", ["a", "b"], succeeded={"a": None, "b": None})
    out = images.relayed_outcomes(chain, walked, checked, {"a": [2], "b": [1, 2], "c": [0, 1, 2]}, 3, 1234, "sha256:i")
    assert out.served["a"].summary() == "shipped 1/3 layers, 1,234 B; passed on to b"
    assert out.served["b"].summary() == "relayed 2/3 layers, 0 B; from a" and out.served["b"].via == "a"
    assert out.broken == {"c": "b → c: the hop ended with status 255"}
