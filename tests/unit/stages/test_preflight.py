"""preflight: what one host's facts mean (judge)."""
from __future__ import annotations

import pytest
from launcher.stages import preflight
from support.builders import host

GOOD = {"docker": "ok", "runtimes": '{"runc":{}}', "compose": "2.26.1", "gpu_count": "0", "own_running": "0",
        "port_busy": "0", "workdir": "ok", "free_kb": str(50 * 1024 * 1024), "bundle": "none", "clock": "1000.0"}



@pytest.mark.parametrize("change, problem", [
    ({}, None),
    ({"docker": "permission denied"}, "`docker info` fails"),
    ({"compose": "1.29.2"}, "compose v2 is needed"),
    ({"compose": "missing"}, "compose v2 is needed"),
    ({"port_busy": "1"}, "tf_port 2222 is already in use"),
    ({"port_busy": "1", "own_running": "1"}, None),           # our own container holds it: a re-run
    ({"workdir": "not writable"}, "not writable"),
    ({"free_kb": "1024"}, "MB free"),
    ({"bundle": "foreign"}, "was not made by tfcompose"),
])
def test_preflight_blocks_on_what_would_break_the_start(change, problem):
    problems, _ = preflight.judge(host("a"), {**GOOD, **change}, midpoint=1000.0)
    assert (problems == []) if problem is None else any(problem in p for p in problems), problems


def test_what_bootstrap_can_fix_says_tfcompose_bootstrap():
    for change in ({"docker": "permission denied"}, {"compose": "missing"}, {"workdir": "not writable"}):
        problems, _ = preflight.judge(host("a"), {**GOOD, **change}, midpoint=1000.0)
        assert len(problems) == 1 and "`tfcompose bootstrap`" in problems[0], problems


def test_preflight_checks_gpus_and_warns_on_clock_skew():
    problems, _ = preflight.judge(host("a", gpus=[0, 3]), {**GOOD, "runtimes": "nvidia", "gpu_count": "2"}, 1000.0)
    assert problems == ["gpus 0,3 requested but nvidia-smi lists 2 GPU(s)"]
    problems, _ = preflight.judge(host("a", gpus="all"), GOOD, 1000.0)
    assert any("no nvidia runtime (`tfcompose bootstrap` installs the NVIDIA Container Toolkit" in p for p in problems)
    _, warnings = preflight.judge(host("a"), {**GOOD, "clock": "1003.5"}, 1000.0)
    assert warnings and "+3.5 s" in warnings[0]
