"""launcher/bootstrap_lines.py: what `tfcompose bootstrap` says of each host, from its outcome."""
from __future__ import annotations

from types import SimpleNamespace

from launcher.bootstrap.host_plan import HostPlan, Step
from launcher.bootstrap_lines import bootstrap_lines


def result(host: str, state: str, plan: HostPlan, **kw) -> SimpleNamespace:
    facts = SimpleNamespace(os_name="Debian 12", arch="amd64", engine_version="", compose="")
    values = dict(host=host, state=state, plan=plan, after=None, facts=facts, error=None, done=(), seconds=0.0,
                  bundle=None, shipped=None)
    return SimpleNamespace(**{**values, **kw})


def test_a_plan_is_each_hosts_steps_then_what_was_not_done_and_how_to_do_it():
    steps = (Step("install", "install docker.io", "no Docker engine"), Step("group", "add you to the docker group"))
    outcome = SimpleNamespace(applied=False, hosts={
        "h0": result("h0", "planned", HostPlan("h0", steps=steps, notes=("a note",))),
        "h1": result("h1", "unreachable", HostPlan("h1"), error="h1: connection refused")})
    assert bootstrap_lines(outcome) == [
        "h0: Debian 12, amd64: 2 step(s)", "  1. install docker.io — no Docker engine", "  2. add you to the docker group",
        "  note: a note", "h1: not looked at: connection refused",
        "nothing was changed; `tfcompose bootstrap --yes` takes the steps above on h0"]


def test_a_host_made_ready_says_in_how_long_and_what_was_done():
    outcome = SimpleNamespace(applied=True, hosts={
        "h0": result("h0", "ready", HostPlan("h0"), done=("installed docker.io",), seconds=41.6)})
    assert bootstrap_lines(outcome) == ["h0: ready in 42 s: installed docker.io"]
